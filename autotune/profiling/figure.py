"""The "Where the time goes" figure: the step split, the top operators, the memory curve."""

from __future__ import annotations

from pathlib import Path

from matplotlib.figure import Figure

from autotune.presentation.figures import save
from autotune.presentation.labels import mib_text
from trials.contract.breakdown import CATEGORIES
from trials.contract.events import ProfileRecord

COLOURS = {"forward": "tab:blue", "backward": "tab:orange", "optimizer": "tab:green",
           "communication": "tab:red", "data_wait": "tab:purple", "idle": "tab:gray",
           "between_steps": "tab:olive"}


def where_the_time_goes(profile: ProfileRecord, path: Path, *, title: str) -> Path:
    fig = Figure(figsize=(13, 4.2), layout="constrained")
    split, ops, mem = fig.subplots(1, 3, gridspec_kw={"width_ratios": [1, 2, 2]})
    step_ms = 1e3 * profile.step_s
    left = 0.0
    for cat in CATEGORIES:
        ms = 1e3 * profile.seconds.get(cat, 0.0)
        split.bar(0, ms, bottom=left, color=COLOURS[cat], label=f"{cat} {ms:.1f} ms")
        left += ms
    split.set_xticks([])
    split.set_ylabel("ms per step")
    split.set_title(f"step {step_ms:.1f} ms")
    split.legend(fontsize=7, loc="upper right", bbox_to_anchor=(1.0, -0.02))
    top = profile.top_ops
    names = [f"{r.type} ({r.category})" for r in top][::-1]
    ops.barh(names, [100 * r.share for r in top][::-1],
             color=[COLOURS.get(r.category, "tab:gray") for r in top][::-1])
    ops.set_xlabel("% of the step")
    ops.set_title("top operators")
    ops.tick_params(axis="y", labelsize=7)
    m = profile.memory
    if m.t_s:
        mem.plot(m.t_s, m.mib, lw=0.8)
        mem.axhline(m.mean_mib, color="tab:gray", ls="--", lw=0.8,
                    label=f"mean {mib_text(m.mean_mib)}")
        mem.legend(fontsize=7)
    mem.set_xlabel("s into the profiled steps")
    mem.set_ylabel("MiB")
    mem.set_title(f"memory: {m.source or 'none'}")
    fig.suptitle(title)
    return save(fig, path)
