"""What took effect, as MindSpore reports it back: the ``applied`` block of the start event.

Every value comes from MindSpore's own state, never from the trial config, so a knob
that was silently dropped shows up as MindSpore's default:

- mode, device, memory level: ``mindspore.get_context``;
- prefetch size, dataset seed: ``mindspore.dataset.config`` getters;
- dataset workers: the pipeline as MindSpore's IR serialises it (``Dataset.to_json``);
- jit level: the ``jit_config_dict`` each step Cell hands to the graph compiler;
- recompute: the Cells ``Cell.recompute`` marked (its ``output_recompute`` flag);
- compute dtype: the mixed-precision flags ``auto_mixed_precision`` set on the Dense
  layers (the parameters stay fp32 under every amp level, so their dtype says nothing);
- CPU threads: MindSpore 2.10 has no getter for the value, only for whether its runtime
  holds one (the check ``threads_num`` itself makes); the value is reported only then.
"""

from __future__ import annotations

import mindspore as ms
import mindspore.dataset as ds
from mindspore import nn

from trials.contract.schema import Backend, TrialConfig

#: Pipeline ops whose workers are the trial's knob (``data.num_workers``); Batch and
#: Repeat run with MindSpore's own defaults.
_PASS_THROUGH_OPS = ("Batch", "Repeat")


def applied_settings(cfg: TrialConfig, *, step_cells: list[nn.Cell],
                     dataset: ds.Dataset) -> dict:
    """The knob values as MindSpore reports them back (what really took effect)."""
    mode = ms.get_context("mode")
    out = {
        "device_target": ms.get_context("device_target"),
        "mode": "graph" if mode == ms.GRAPH_MODE else "pynative",
        "memory_optimize_level": f"O{ms.get_context('memory_optimize_level')}",
        "jit_level": jit_level(step_cells),
        "recomputed_blocks": len(recomputed_cells(step_cells)),
        "dense_compute_dtype": dense_compute_dtype(step_cells),
        "prefetch_size": ds.config.get_prefetch_size(),
        "dataset_seed": ds.config.get_seed(),
        "dataset_workers": dataset_workers(dataset),
    }
    if cfg.hardware.backend is Backend.CPU:
        out["cpu_threads"] = cfg.runtime.threads if _op_threads_configured() else None
    return out


def jit_level(cells: list[nn.Cell]) -> str | None:
    """The jit level the step Cells compile with; None when none carries one (PyNative)."""
    levels = {(cell.jit_config_dict or {}).get("jit_level") for cell in cells}
    if len(levels) > 1:
        return "mixed"
    return levels.pop() if levels else None


def recomputed_cells(cells: list[nn.Cell]) -> list[str]:
    """Names of the Cells ``recompute()`` was called on (their sub-cells are not counted);
    a Cell two step Cells share counts once."""
    marked = {id(sub): name for cell in cells for name, sub in cell.cells_and_names()
              if "output_recompute" in sub.get_flags()}
    return list(marked.values())


def dense_compute_dtype(cells: list[nn.Cell]) -> str:
    """The dtype every Dense layer computes in ("mixed" when they differ)."""
    found = set()
    for cell in cells:
        for _, sub in cell.cells_and_names():
            if isinstance(sub, nn.Dense):
                flags = sub.get_flags()
                found.add(next((name for name in ("fp16", "bf16") if flags.get(name)), "fp32"))
    if len(found) > 1:
        return "mixed"
    return found.pop() if found else "fp32"


def dataset_workers(dataset: ds.Dataset) -> dict[str, int] | None:
    """Workers of each pipeline op that does the trial's data work, e.g. {"Map": 2}.

    None when the pipeline cannot be serialised (a user workload's custom op): the
    value is not guessed from the config.
    """
    try:
        node = dataset.to_json()
    except (RuntimeError, TypeError, ValueError):
        return None
    workers: dict[str, int] = {}
    stack = [node]
    while stack:
        node = stack.pop()
        stack.extend(node.get("children", []))
        if node.get("op_type") not in _PASS_THROUGH_OPS and "num_parallel_workers" in node:
            workers[node["op_type"]] = node["num_parallel_workers"]
    return workers


def _op_threads_configured() -> bool:
    # The only read-back MindSpore 2.10 offers for threads_num (no public getter).
    from mindspore._c_expression import RuntimeConf

    return RuntimeConf.get_instance().is_op_threads_num_configured()
