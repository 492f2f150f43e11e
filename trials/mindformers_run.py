"""Train a MindFormers config with MindFormers' own Trainer, on any backend, the CPU included.

    .venv-mindformers/bin/python -m trials.mindformers_run mindformers.yaml --steps 3

This is what ``run_mindformer.py --config mindformers.yaml`` does (``build_context``, then
``Trainer(config).train()``), plus what the CPU needs: MindFormers' ``MFTrainOneStepCell``
checks overflow with Ascend's float-status kernels (``NPUGetFloatStatusV2``), which the CPU
lacks, so on the CPU it runs as :class:`CPUTrainOneStepCell`, the same cell with the check
done by ``ops.isfinite``. ``--steps`` stops after N steps (MindFormers' ``TrainCallBack``;
``runner_config.stop_step`` has no effect in 2.1.0). ``--synthetic-data`` trains on random
tokens instead of the config's dataset (a smoke run where that data is not at hand).
Exit codes: 0 trained, 1 MindFormers failed, 2 bad input.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import mindspore as ms
import numpy as np
from mindformers import MindFormerConfig, Trainer, build_context
from mindformers.core.callback.callback import TrainCallBack
from mindformers.tools.register import MindFormerModuleType, MindFormerRegister
from mindformers.wrapper import MFTrainOneStepCell
from mindspore import ops
from mindspore.common import dtype as mstype
from mindspore.dataset import GeneratorDataset
from mindspore.train import Callback

from trials.contract import mindformers as mf
from trials.contract.schema import ConfigError


@MindFormerRegister.register(MindFormerModuleType.WRAPPER)
class CPUTrainOneStepCell(MFTrainOneStepCell):
    """``MFTrainOneStepCell`` whose overflow check runs on the CPU (``ops.isfinite``)."""

    def start_overflow_check(self, pre_cond, compute_input):
        return ms.Tensor(0, mstype.int32), compute_input

    def get_overflow_status(self, status, compute_output):
        finite = ms.Tensor(True, mstype.bool_)
        for grad in compute_output:
            finite = ops.logical_and(finite, ops.isfinite(grad).all())
        return ops.logical_not(finite)


class LossLog(Callback):
    """Prints each step's loss and keeps them."""

    def __init__(self) -> None:
        self.losses: list[float] = []

    def on_train_step_end(self, run_context):
        params = run_context.original_args()
        out = params.net_outputs
        loss = out[0] if isinstance(out, (tuple, list)) else out
        self.losses.append(float(np.asarray(loss.asnumpy()).reshape(-1)[0]))
        print(f"step {params.cur_step_num}: loss {self.losses[-1]:.4f}", flush=True)


def synthetic_tokens(seq_length: int, vocab_size: int, batch_size: int,
                     samples: int = 64) -> GeneratorDataset:
    """Random token rows of seq_length + 1 (MindFormers' causal LMs shift them)."""
    rows = np.random.default_rng(0).integers(3, vocab_size, size=(samples, seq_length + 1))
    rows = rows.astype(np.int32)
    dataset = GeneratorDataset(lambda: ((row,) for row in rows), column_names=["input_ids"],
                               shuffle=False)
    return dataset.batch(batch_size, drop_remainder=True)


def train(path: Path, *, steps: int | None, synthetic_data: bool) -> list[float]:
    # The same checks autotune's export runs: MindFormers' own errors are less direct.
    raw = mf.load_config(path, what="config")
    mf.check(raw, what=str(path))
    data_dir = ((raw.get("train_dataset") or {}).get("data_loader") or {}).get("dataset_dir")
    if not synthetic_data and data_dir and not Path(str(data_dir)).exists():
        raise ConfigError(f"train_dataset.data_loader.dataset_dir={data_dir} does not exist: "
                          "point it at your data (a MindRecord file), or pass "
                          "--synthetic-data to train on random tokens")
    config = MindFormerConfig(str(path))
    if config.context.device_target == "CPU" and \
            config.runner_wrapper.type == "MFTrainOneStepCell":
        config.runner_wrapper.type = CPUTrainOneStepCell.__name__
        print("CPU: MFTrainOneStepCell runs as CPUTrainOneStepCell (overflow check by "
              "ops.isfinite)", flush=True)
    build_context(config)
    dataset = None
    if synthetic_data:
        model_config = config.model.model_config
        dataset = synthetic_tokens(model_config.seq_length, model_config.vocab_size,
                                   config.runner_config.batch_size)
    log = LossLog()
    callbacks = [log] + ([TrainCallBack(stop_step=steps)] if steps else [])
    Trainer(args=config, train_dataset=dataset, callbacks=callbacks).train()
    return log.losses


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m trials.mindformers_run",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("config", type=Path, help="a MindFormers YAML (e.g. mindformers.yaml)")
    parser.add_argument("--steps", type=int, default=None, help="stop after N steps")
    parser.add_argument("--synthetic-data", action="store_true",
                        help="random tokens instead of the config's train_dataset")
    args = parser.parse_args(argv)
    if args.steps is not None and args.steps < 1:
        print(f"mindformers_run: error: --steps={args.steps} must be at least 1",
              file=sys.stderr)
        return 2
    try:
        losses = train(args.config, steps=args.steps, synthetic_data=args.synthetic_data)
    except ConfigError as exc:
        print(f"mindformers_run: error: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # noqa: BLE001 -- MindFormers' failure, reported as one line
        lines = [line for line in str(exc).strip().splitlines() if line.strip()] or [""]
        print(f"mindformers_run: MindFormers failed: {type(exc).__name__}: {lines[0]}",
              file=sys.stderr)
        return 1
    if not losses or not all(np.isfinite(losses)):
        print(f"mindformers_run: training gave no finite loss: {losses}", file=sys.stderr)
        return 1
    print(f"trained {len(losses)} steps: loss {losses[0]:.4f} -> {losses[-1]:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
