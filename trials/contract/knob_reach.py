"""Which knobs a workload can apply: a knob it cannot apply, or one that does nothing
for it, is refused before launch rather than searched as if it mattered.

The workload says what it supports (:class:`Reach`, from
:func:`trials.workload.reach_of`); the orchestrator learns it in a child process
(autotune/running/preflight.py) and checks the baseline and every search value, and
the trial program checks its own configuration with the same function. The
dataset-worker bound is MindSpore's: ``num_parallel_workers`` above the machine's
core count is refused by MindSpore itself ("num_parallel_workers exceeds the boundary
between 1 and N"), so no trial may be proposed with it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from trials.contract.schema import DataSource, TrialConfig
from trials.contract.vocabulary import Recompute

#: ``data.*`` knobs a pipeline may honour besides ``data.prefetch`` (which the trial
#: program applies to every pipeline through ``mindspore.dataset.config``).
DATA_KNOBS = ("num_workers", "multiprocessing", "source")


@dataclass(frozen=True)
class Reach:
    """What a workload applies. ``recompute``: it has blocks to recompute;
    ``data_knobs``: the members of :data:`DATA_KNOBS` its pipeline honours."""

    name: str
    recompute: bool
    data_knobs: frozenset[str] = field(default_factory=frozenset)

    def to_json(self) -> dict:
        return {"name": self.name, "recompute": self.recompute,
                "data_knobs": sorted(self.data_knobs)}

    @classmethod
    def from_json(cls, data: dict) -> Reach:
        return cls(str(data["name"]), bool(data["recompute"]), frozenset(data["data_knobs"]))


#: The built-in GPT (trials/workload.py: GptWorkload) applies every knob.
BUILT_IN = Reach("gpt", recompute=True, data_knobs=frozenset(DATA_KNOBS))


def knob_problem(path: str, value: Any, reach: Reach, *, cores: int) -> str | None:
    """Why ``path=value`` cannot take effect for this workload on ``cores`` cores, or None.

    ``path`` is an override path (``data`` for the data config group, whose options are
    source names).
    """
    who = f"workload {reach.name}"
    if path == "train.recompute" and _recompute(value) and not reach.recompute:
        return (f"train.recompute={_text(value)} does nothing for {who}: it declares no "
                "blocks to recompute (Workload.blocks); drop the knob")
    if path == "data.num_workers" and isinstance(value, int):
        if value > cores:
            return (f"data.num_workers={value} exceeds the {cores} cores of this machine "
                    f"(MindSpore refuses num_parallel_workers above {cores}); use 1..{cores}")
        if value != 1 and "num_workers" not in reach.data_knobs:
            return _unhonoured(path, value, who)
    if path == "data.multiprocessing" and value is True and \
            "multiprocessing" not in reach.data_knobs:
        return _unhonoured(path, value, who)
    if path in ("data", "data.source") and str(value) != DataSource.text.value \
            and "source" not in reach.data_knobs:
        return (f"{path}={value} does nothing for {who}: the text, MindRecord and synthetic "
                "sources belong to the built-in GPT; its own dataset is what it reads")
    return None


def config_problem(cfg: TrialConfig, reach: Reach, *, cores: int) -> str | None:
    """The first knob of this configuration that cannot take effect, or None."""
    values = {"train.recompute": cfg.train.recompute, "data.num_workers": cfg.data.num_workers,
              "data.multiprocessing": cfg.data.multiprocessing,
              "data.source": cfg.data.source.value}
    return next(filter(None, (knob_problem(p, v, reach, cores=cores)
                              for p, v in values.items())), None)


def _recompute(value: Any) -> bool:
    if isinstance(value, Recompute):
        return value is not Recompute.none
    return value not in (False, None, "none", Recompute.none.value)


def _text(value: Any) -> str:
    return value.value if isinstance(value, Recompute) else str(value).lower()


def _unhonoured(path: str, value: Any, who: str) -> str:
    return (f"{path}={_text(value)} does nothing for {who}: its dataset does not take it "
            f"(Workload.data_knobs); drop the knob or honour it in build_dataset")
