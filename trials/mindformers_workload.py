"""MindFormers models as autotune workloads: the model and its loss from a MindFormers YAML.

``workload.entry=trials.mindformers_workload:workload`` with ``workload.options.config`` a
MindFormers config (``workload=mindformers_llama_tiny`` is a preset). The model section is
built with MindFormers' own classes; autotune then applies every knob around it as for
any workload. Needs the optional environment (``make mindformers-setup``).

What trains where (MindFormers 2.1.0, MindSpore 2.10):

* the legacy ``LlamaForCausalLM`` (``use_legacy: True``) trains on the CPU in float32 and
  with float16 compute (bfloat16 has no CPU kernels: Sub, Softmax, Gather ...);
  there it is built with ``use_rope_slice: True``, ``fused_rms_norm: False`` and no flash
  attention (the kernels the CPU has);
* the new (mcore) models of MindFormers' shipped configs (Qwen3, DeepSeek, ...) need
  Ascend; the adapter refuses them with a line that says so.
"""

from __future__ import annotations

from pathlib import Path

import mindformers  # noqa: F401  (the preflight import check names the environment)
import mindspore.dataset as ds
from mindspore import get_context, nn

from trials.contract import mindformers as mf
from trials.contract.knob_reach import DATA_KNOBS
from trials.contract.schema import DataConfig, WorkloadConfig
from trials.workload import Workload


class MindFormersWorkload(Workload):
    """A MindFormers causal LM built from the ``model`` section of its YAML."""

    data_knobs = frozenset(DATA_KNOBS)  # autotune's text pipeline (trials/data.py)

    def __init__(self, cfg: WorkloadConfig) -> None:
        self.cfg = cfg
        self.full_config, model_config = mf.workload_model_config(cfg)  # a fresh copy
        model_config.pop("type", None)
        # The dataset gives inputs and labels already shifted (autotune's text windows).
        model_config["input_sliced_sig"] = True
        self.model_config = model_config
        self.tokens_per_sample = int(model_config["seq_length"])
        self.arch = self.full_config["model"]["arch"]["type"]

    def takes_precision(self, dtype: str) -> bool:
        """MindFormers models cast themselves by their compute dtype (norms and softmax
        stay as the config says); auto_mixed_precision on top would cast them twice."""
        self.model_config["compute_dtype"] = dtype
        return True

    def build_model(self) -> nn.Cell:
        from mindformers import LlamaConfig, LlamaForCausalLM

        classes = {"LlamaForCausalLM": (LlamaForCausalLM, LlamaConfig)}
        model_class, config_class = classes[self.arch]
        model_config = dict(self.model_config)
        if get_context("device_target") == "CPU":
            # The same math through the kernels the CPU has (see CPU_MODEL_KEYS).
            model_config.update(mf.CPU_MODEL_KEYS)
        return model_class(config_class(**model_config))

    def build_loss(self, model: nn.Cell) -> nn.Cell:
        return CausalLMLoss(model)

    def build_dataset(self, data: DataConfig, *, batch_size: int, num_shards: int,
                      shard_id: int, seed: int, cache_dir: Path) -> ds.Dataset:
        from trials.data import build_dataset

        return build_dataset(data, seq_len=self.tokens_per_sample,
                             vocab_size=int(self.model_config["vocab_size"]),
                             batch_size=batch_size, num_shards=num_shards, shard_id=shard_id,
                             seed=seed, cache_dir=cache_dir)

    def blocks(self, model: nn.Cell) -> list[nn.Cell]:
        return list(model.model.layers)

    def flops_per_token(self, model: nn.Cell) -> float | None:
        from trials.model import palm_flops_per_token

        c = self.model_config
        embedding = c["vocab_size"] * c["hidden_size"]
        non_embedding = sum(p.size for p in model.trainable_params()) - embedding
        return palm_flops_per_token(non_embedding_params=non_embedding,
                                    n_layers=c["num_layers"], n_heads=c["num_heads"],
                                    head_dim=c["hidden_size"] // c["num_heads"],
                                    seq_len=c["seq_length"])


class CausalLMLoss(nn.Cell):
    """The model's own training loss of (inputs, labels): MindFormers' causal LMs return
    the mean cross-entropy in training mode."""

    def __init__(self, model: nn.Cell) -> None:
        super().__init__()
        self.model = model
        self.model.set_train(True)

    def construct(self, inputs, labels):
        return self.model(inputs, labels)


def workload(cfg: WorkloadConfig) -> Workload:
    """``workload.entry`` factory."""
    return MindFormersWorkload(cfg)
