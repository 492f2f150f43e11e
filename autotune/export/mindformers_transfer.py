"""Which tuned values may go into a MindFormers base config (``export.mindformers_base``).

Values tuned on one model and machine are measurements of that model and machine: a
batch size, a split or a recompute choice found for a 2-layer model on a CPU says
nothing about a 7B model on Ascend. So a base whose model (layers, hidden size, heads,
sequence length) or hardware is not the tuned workload's is refused, unless
``export.mindformers_transfer`` names what may go in (groups such as ``data`` or
``memory``, or dotted keys). ``context.device_target`` and ``context.max_device_memory``
are the base's own and change only when named (``hardware`` or the key), even when the
model and device match.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from autotune.settings import MINDFORMERS_TRANSFER_GROUPS
from trials.contract import mindformers as mf
from trials.contract.schema import Backend, ConfigError, TrialConfig

#: The group of each tuned key, by its longest dotted prefix here, in both schemas.
_GROUPS = {
    # static graph (mindformers.yaml)
    "seed": "run", "callbacks": "run",
    "use_parallel": "parallel", "parallel": "parallel", "parallel_config": "parallel",
    "runner_config.gradient_accumulation_steps": "parallel",
    "runner_config.batch_size": "batch",
    "context.mode": "runtime", "context.jit_config": "runtime",
    "context.memory_optimize_level": "memory", "recompute_config": "memory",
    "context.device_target": "hardware", "context.max_device_memory": "hardware",
    # The CPU's kernels (no fused RmsNorm, no flash attention): tied to the hardware.
    **{f"model.model_config.{key}": "hardware" for key in mf.CPU_MODEL_KEYS},
    "model.model_config": "precision", "runner_wrapper.scale_sense": "precision",
    "runner_wrapper": "optimizer", "optimizer": "optimizer", "lr_schedule": "optimizer",
    "train_dataset": "data",
    # PyNative TrainConfig (mindformers_train.yaml)
    "training.seed": "run", "training.steps": "run", "checkpoint": "run",
    "training.local_batch_size": "batch", "training.global_batch_size": "batch",
    "training.max_norm": "optimizer", "training.use_skip_step_on_nan": "precision",
    "parallelism": "parallel", "recompute": "memory", "lr_scheduler": "optimizer",
    "model": "precision",
}
#: Keys that stay the base's unless named: the machine it was written for.
PROTECTED = ("context.device_target", "context.max_device_memory")


def group_of(key: str) -> str | None:
    parts = key.split(".")
    for n in range(len(parts), 0, -1):
        group = _GROUPS.get(".".join(parts[:n]))
        if group:
            return group
    return None


def leaves(tree: dict, prefix: str = "") -> dict[str, object]:
    """Dotted key -> value of every non-mapping value (lists are values)."""
    out: dict[str, object] = {}
    for key, value in tree.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            out.update(leaves(value, f"{name}."))
        else:
            out[name] = value
    return out


def nest(flat: dict[str, object]) -> dict:
    out: dict = {}
    for key, value in flat.items():
        node = out
        *parents, last = key.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = value
    return out


@dataclass
class Transfer:
    """What of the tuned values goes into one base, and why."""

    #: How the base differs from the tuned workload (empty: same model and hardware).
    differences: list[str]
    #: The groups and keys of ``export.mindformers_transfer``.
    named: tuple[str, ...] = ()
    notes: list[str] = field(default_factory=list)

    def keeps(self, key: str) -> bool:
        if any(key == n or key.startswith(f"{n}.") for n in self.named):
            return True
        if key in PROTECTED:
            return "hardware" in self.named
        return group_of(key) in self.named if self.named else not self.differences

    def select(self, tuned: dict, base: dict) -> dict:
        """The tuned keys that go in; a note for each group kept as the base has it."""
        flat, base_flat = leaves(tuned), leaves(base)
        kept = {k: v for k, v in flat.items() if self.keeps(k)}
        held = sorted({group_of(k) or k for k, v in flat.items()
                       if k not in kept and base_flat.get(k, v) != v})
        if held:
            self.notes.append(f"kept as your config has them: {', '.join(held)} (name what may "
                              "change in export.mindformers_transfer=[...])")
        return nest(kept)


def check_names(transfer: list) -> None:
    """ConfigError for a name of ``export.mindformers_transfer`` the export never writes."""
    unknown = [n for n in transfer if n not in MINDFORMERS_TRANSFER_GROUPS and not group_of(n)]
    if unknown:
        raise ConfigError(f"export.mindformers_transfer: {unknown[0]!r} is no group "
                          f"({', '.join(MINDFORMERS_TRANSFER_GROUPS)}) and no key the export "
                          "writes (e.g. train_dataset.prefetch_size, training.max_norm)")


def check_transfer(job: TrialConfig, base: dict, kind: str, *, transfer: list,
                   what: str) -> Transfer:
    """The :class:`Transfer` into ``base``; ConfigError (one line) when the base's model
    or hardware is not the tuned workload's and nothing is named to transfer."""
    check_names(transfer)
    differences = _differences(job, base, kind)
    if differences and not transfer:
        raise ConfigError(
            f"{what}: {'; '.join(differences)}, so the values tuned there need not hold for "
            f"it: name what may transfer, e.g. export.mindformers_transfer=[data,memory] "
            f"(groups: {', '.join(MINDFORMERS_TRANSFER_GROUPS)}; or dotted keys), or tune "
            "that model on that hardware")
    result = Transfer(differences, tuple(transfer))
    if differences:
        result.notes.append(f"your config differs from the tuned workload "
                            f"({'; '.join(differences)}): only {', '.join(transfer)} "
                            "transferred")
    return result


def _differences(job: TrialConfig, base: dict, kind: str) -> list[str]:
    model = base["model"]["model_config"] if kind == mf.STATIC else base["model"]
    w = job.workload
    tuned = {"layers": w.n_layers, "hidden": w.d_model, "heads": w.n_heads,
             "sequence": w.seq_len}
    dims = mf.model_dims(model)
    off = [d for d, v in dims.items() if tuned[d] != v]
    out = []
    if off:
        out.append("its model has " + ", ".join(f"{d} {dims[d]}" for d in off)
                   + f" where the tuned workload {w.name} has "
                   + ", ".join(f"{tuned[d]}" for d in off))
    device = (base.get("context") or {}).get("device_target") or mf.DEFAULT_DEVICE_TARGET
    if str(device).lower() != job.hardware.backend.value.lower():
        out.append(f"it runs on {device} where the values were tuned on "
                   f"{job.hardware.backend.value}"
                   + (f" ({job.hardware.name})" if job.hardware.backend is not Backend.CPU
                      else ""))
    return out
