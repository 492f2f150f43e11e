"""Runner overhead: the trial program's steady-state step time vs a bare MindSpore loop.

Both sides train the same GPT (trials/model.py) on the same synthetic tokens with
the same settings: ``workload=gpt_small data=synthetic``, fp32, graph mode, a Cell
train step (value_and_grad + AdamWeightDecay + clip_by_global_norm), jit_level O0,
memory optimize level O0, the same seed. Each run is a fresh process in its own
working directory; the two variants alternate (ABBA order) in one invocation, each
with 1 compile step + ``--warmup`` + ``--measure`` steps.

A step is timed the same way on both sides: wall time from fetching the batch
to the loss on the host (``.asnumpy()``). The runner's number is its summary's
``performance.step_time_median_s``. As a second view, the runner's *loop period*
(time between consecutive step events, which also covers its guards, memory
sampling and metrics writing) is compared with the bare loop's period.

    .venv/bin/python -m bench.trial_overhead             # 7 rounds, 3 warm-up + 20 measured
    .venv/bin/python -m bench.trial_overhead --quick     # 2 rounds, 2 warm-up + 8 measured

The headline is the ratio of the two medians (over rounds) of the per-run median
step time. Because noise on a shared VM only ever adds time, the ratio of the
best (minimum) runs and the median of the per-round (adjacent-pair) ratios are
printed as well; the three agree when the machine is quiet.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from bench._common import (
    add_quiet_argument,
    cli,
    load_note,
    log,
    median,
    print_table,
    run_module,
    run_trial,
    write_result,
)

NAME = "trial_overhead"
OVERRIDES = ["workload=gpt_small", "data=synthetic", "precision=fp32", "runtime.mode=graph"]
TARGET_RATIO = 1.02


# -- the bare loop (runs in its own process) --------------------------------------------------
def bare_loop(args: argparse.Namespace) -> dict:
    """Plain MindSpore: GPT + Cell train step + GeneratorDataset, nothing else."""
    import mindspore as ms
    import mindspore.dataset as ds
    import numpy as np
    from mindspore import nn, ops

    from trials.data import SyntheticTokens
    from trials.model import GPT, LanguageModelLoss

    ms.set_device("CPU")
    ms.set_context(mode=ms.GRAPH_MODE)
    ms.runtime.set_memory(optimize_level="O0")
    ms.set_seed(args.seed)
    ds.config.set_seed(args.seed)
    ds.config.set_prefetch_size(args.prefetch)

    class BareStep(nn.Cell):
        def __init__(self, loss_net, optimizer, clip_norm):
            super().__init__()
            self.optimizer = optimizer
            self.clip_norm = clip_norm
            self.grad_fn = ms.value_and_grad(loss_net, None, optimizer.parameters)

        def construct(self, tokens, labels):
            loss, grads = self.grad_fn(tokens, labels)
            grads = ops.clip_by_global_norm(grads, self.clip_norm)
            return ops.depend(loss, self.optimizer(grads))

    model = GPT(vocab_size=args.vocab_size, seq_len=args.seq_len, n_layers=args.n_layers,
                d_model=args.d_model, n_heads=args.n_heads)
    loss_net = LanguageModelLoss(model)
    optimizer = nn.AdamWeightDecay(loss_net.trainable_params(), learning_rate=args.lr,
                                   weight_decay=args.weight_decay)
    step = BareStep(loss_net, optimizer, args.clip_norm)
    step.set_jit_config(ms.JitConfig(jit_level="O0"))

    source = SyntheticTokens(args.seq_len, args.vocab_size, size=4096, seed=args.seed)
    dataset = ds.GeneratorDataset(source, ["input", "label"], shuffle=False,
                                  num_parallel_workers=1, python_multiprocessing=False)
    dataset = dataset.batch(args.batch, drop_remainder=True).repeat()
    iterator = dataset.create_tuple_iterator(num_epochs=-1, output_numpy=False)

    step_s, wait_s, ends, losses = [], [], [], []
    for _ in range(1 + args.warmup + args.measure):
        start = time.perf_counter()
        tokens, labels = next(iterator)
        fetched = time.perf_counter()
        loss = float(step(tokens, labels).asnumpy())
        done = time.perf_counter()
        step_s.append(done - start)
        wait_s.append(fetched - start)
        ends.append(done)
        losses.append(loss)
    first = 1 + args.warmup
    measured = step_s[first:]
    periods = list(np.diff(ends[first - 1:]))
    return {"compile_s": step_s[0], "step_s": measured, "data_wait_s": wait_s[first:],
            "step_time_median_s": float(np.median(measured)),
            "loop_period_median_s": float(np.median(periods)),
            "loss_start": losses[0], "loss_end": losses[-1]}


# -- the benchmark ----------------------------------------------------------------------------
def trial_settings() -> dict:
    """The composed trial config (no MindSpore import), to give the bare loop the same values."""
    from trials.contract.compose import compose
    from trials.contract.schema import micro_batch_size, to_trial_config, validate

    cfg = to_trial_config(compose("trial", OVERRIDES))
    validate(cfg)
    w, t = cfg.workload, cfg.train
    assert not w.entry and t.micro_batches == 1 and cfg.parallel.devices == 1
    return {"vocab_size": w.vocab_size, "seq_len": w.seq_len, "n_layers": w.n_layers,
            "d_model": w.d_model, "n_heads": w.n_heads, "batch": micro_batch_size(cfg),
            "lr": t.lr, "weight_decay": t.weight_decay, "clip_norm": t.clip_norm,
            "seed": t.seed, "prefetch": cfg.data.prefetch}


def loop_period_median(steps: list[dict]) -> float:
    """Median time from each measured step's event to the previous step's (the whole loop)."""
    import numpy as np

    first = next(i for i, s in enumerate(steps) if s.get("phase") == "measure")
    return float(np.median(np.diff([s["time"] for s in steps[first - 1:]])))


def run_runner(warmup: int, measure: int, wait: float) -> dict:
    run = run_trial([*OVERRIDES, f"run.warmup_steps={warmup}", f"run.measure_steps={measure}"],
                    quiet_wait_s=wait)
    run.check()
    perf = run.performance
    return {"step_time_median_s": run.step_time_median_s,
            "loop_period_median_s": loop_period_median(run.steps),
            "tokens_per_s": run.tokens_per_s, "compile_s": perf.get("compile_s"),
            "data_wait_share": perf.get("data_wait_share"),
            "measured_steps": perf.get("measured_steps"), "wall_s": run.wall_s,
            "load": run.load}


def run_bare(settings: dict, warmup: int, measure: int, wait: float) -> dict:
    args = [f"--{k.replace('_', '-')}={v}" for k, v in settings.items()]
    start = time.perf_counter()
    result = run_module("bench.trial_overhead",
                        ["--bare-worker", f"--warmup={warmup}", f"--measure={measure}", *args],
                        quiet_wait_s=wait)
    result["wall_s"] = time.perf_counter() - start - result["load"].get("waited_s", 0.0)
    result["tokens_per_s"] = settings["batch"] * settings["seq_len"] / result["step_time_median_s"]
    return result


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.trial_overhead",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="2 rounds of 2 + 8 steps")
    parser.add_argument("--rounds", type=int, help="runner/bare pairs (default 7; quick 2)")
    parser.add_argument("--warmup", type=int, help="warm-up steps (default 3; quick 2)")
    parser.add_argument("--measure", type=int, help="measured steps (default 20; quick 8)")
    add_quiet_argument(parser)
    # internal: the bare loop's own process
    parser.add_argument("--bare-worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    for key in ("vocab-size", "seq-len", "n-layers", "d-model", "n-heads", "batch", "seed",
                "prefetch"):
        parser.add_argument(f"--{key}", type=int, help=argparse.SUPPRESS)
    for key in ("lr", "weight-decay", "clip-norm"):
        parser.add_argument(f"--{key}", type=float, help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.bare_worker:
        args.out.write_text(json.dumps(bare_loop(args)))
        return

    rounds = args.rounds or (2 if args.quick else 7)
    warmup = args.warmup if args.warmup is not None else (2 if args.quick else 3)
    measure = args.measure or (8 if args.quick else 20)
    settings = trial_settings()
    log(f"{rounds} rounds, 1 compile + {warmup} warm-up + {measure} measured steps each; "
        f"{' '.join(OVERRIDES)}; bare loop: {settings}")

    runner, bare, order = [], [], []
    started = time.perf_counter()
    for i in range(rounds):
        sequence = ("runner", "bare") if i % 2 == 0 else ("bare", "runner")  # ABBA
        order.append(list(sequence))
        for variant in sequence:
            if variant == "runner":
                runner.append(run_runner(warmup, measure, args.max_wait))
                r = runner[-1]
            else:
                bare.append(run_bare(settings, warmup, measure, args.max_wait))
                r = bare[-1]
            log(f"round {i + 1} {variant:6s}: step {r['step_time_median_s'] * 1e3:7.1f} ms  "
                f"loop period {r['loop_period_median_s'] * 1e3:7.1f} ms  "
                f"({r['wall_s']:.1f} s wall, other jobs {r['load']['foreign_cores']:.2f} cores)")

    rows = []
    for i in range(rounds):
        rs, bs = runner[i]["step_time_median_s"], bare[i]["step_time_median_s"]
        rp, bp = runner[i]["loop_period_median_s"], bare[i]["loop_period_median_s"]
        rows.append([i + 1, "/".join(order[i]), rs * 1e3, bs * 1e3, rs / bs, rp * 1e3, bp * 1e3,
                     rp / bp])
    runner_step = median([r["step_time_median_s"] for r in runner])
    bare_step = median([r["step_time_median_s"] for r in bare])
    runner_period = median([r["loop_period_median_s"] for r in runner])
    bare_period = median([r["loop_period_median_s"] for r in bare])
    ratio = runner_step / bare_step
    paired = median([row[4] for row in rows])
    best_ratio = min(r["step_time_median_s"] for r in runner) / \
        min(r["step_time_median_s"] for r in bare)
    runner_wall = median([r["wall_s"] for r in runner])
    bare_wall = median([r["wall_s"] for r in bare])
    runner_compile = median([r["compile_s"] for r in runner])
    bare_compile = median([r["compile_s"] for r in bare])
    period_ratio = runner_period / bare_period
    rows.append(["median", "", runner_step * 1e3, bare_step * 1e3, ratio, runner_period * 1e3,
                 bare_period * 1e3, period_ratio])
    print()
    print_table(["round", "order", "runner ms", "bare ms", "ratio", "runner period ms",
                 "bare period ms", "period ratio"], rows)
    met = ratio <= TARGET_RATIO
    print(f"\nrunner/bare step time (ratio of medians): {ratio:.3f}x  "
          f"(median of per-round ratios {paired:.3f}x; ratio of best runs {best_ratio:.3f}x; "
          f"loop period {period_ratio:.3f}x)  "
          f"target <= {TARGET_RATIO}x: {'met' if met else 'MISSED'}")
    print(f"process wall time per run (start-up + compile + {1 + warmup + measure} steps + "
          f"exit), median: runner {runner_wall:.1f} s, bare {bare_wall:.1f} s; of which the "
          f"first (compile) step: runner {runner_compile:.2f} s, bare {bare_compile:.2f} s")
    note = load_note([r["load"] for r in runner + bare])
    print(note)
    path = write_result(NAME, {
        "quick": args.quick, "rounds": rounds, "warmup_steps": warmup, "measure_steps": measure,
        "overrides": OVERRIDES, "bare_settings": settings, "order": order,
        "runner": runner, "bare": bare,
        "runner_step_time_median_s": runner_step, "bare_step_time_median_s": bare_step,
        "ratio": ratio, "ratio_median_of_rounds": paired, "ratio_of_best": best_ratio,
        "runner_wall_median_s": runner_wall, "bare_wall_median_s": bare_wall,
        "runner_compile_median_s": runner_compile, "bare_compile_median_s": bare_compile,
        "runner_loop_period_median_s": runner_period, "bare_loop_period_median_s": bare_period,
        "loop_period_ratio": period_ratio, "target_ratio": TARGET_RATIO, "target_met": met,
        "load_note": note,
        "elapsed_s": time.perf_counter() - started})
    print(f"wrote {path}")


if __name__ == "__main__":
    cli(main)
