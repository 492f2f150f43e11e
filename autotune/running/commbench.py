"""``python -m autotune commbench``: what the interconnect can do, measured.

    python -m autotune commbench                               # 2 ranks, 4 KiB .. 64 MiB
    python -m autotune commbench commbench.ranks=4 commbench.sizes_kib=[64,65536]

Runs ``trials/commbench.py`` on ``commbench.ranks`` processes of this node through msrun
(the same recipe as a data-parallel trial: :func:`trials.contract.launch.msrun_argv`),
which all-reduces float32 tensors of each size and times them. Prints a table of median
time and algorithm / bus bandwidth per size and writes
``<out>/commbench-<hardware>-<ranks>r.json``. The profiler and the report judge a
trial's gradient all-reduce against it: :func:`load_commbench` finds the newest result
of a hardware profile, :func:`bandwidth_at` reads the bus bandwidth at a message size.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import socket
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from autotune.settings import CommbenchSettings, SweepSettings
from trials.contract.launch import PROJECT_ROOT, msrun_argv, trial_env
from trials.contract.machine import cpu_model
from trials.contract.schema import Backend, ConfigError, HardwareConfig, LinkConfig

#: The program every rank runs (a path: the orchestrator does not import trials' code).
SCRIPT = PROJECT_ROOT / "trials" / "commbench.py"
#: Prefix of the progress lines that trials/commbench.py prints on rank 0.
PROGRESS = "commbench:"
#: The whole msrun run; the defaults take ~30 s on 2 CPU cores (64 MiB: ~0.6 s a repeat).
TIMEOUT_S = 600.0
#: How often the run is checked for progress and its end.
POLL_S = 0.5
#: Log lines shown per worker when the run fails.
TAIL_LINES = 20
#: Where the results are found by default, under ``sweep.runs_dir``.
SUBDIR = "commbench"


def result_name(hardware: str, ranks: int) -> str:
    return f"commbench-{hardware}-{ranks}r.json"


def check(settings: CommbenchSettings, hw: HardwareConfig) -> None:
    """What the settings' ranges cannot say; ConfigError names the fix."""
    if settings.ranks < 2:  # the settings' range says so too: an all-reduce needs two
        raise ConfigError(f"commbench.ranks={settings.ranks}: an all-reduce needs at least "
                          "2 ranks; set commbench.ranks=2 or more")
    if not settings.sizes_kib:
        raise ConfigError("commbench.sizes_kib is empty: give message sizes in KiB, e.g. "
                          "commbench.sizes_kib=[4,1024,65536]")
    if hw.backend is not Backend.CPU and settings.ranks > hw.devices:
        raise ConfigError(f"commbench.ranks={settings.ranks} exceeds the {hw.devices} "
                          f"devices of hardware={hw.name} (one rank per device): set "
                          f"commbench.ranks={hw.devices} or fewer")
    if shutil.which("msrun", path=trial_env(os.environ)["PATH"]) is None:
        raise ConfigError("msrun not found next to this Python: install MindSpore into this "
                          "environment (make .venv)")


def out_dir(settings: CommbenchSettings, sweep: SweepSettings) -> Path:
    return Path(settings.out) if settings.out else Path(sweep.runs_dir) / SUBDIR


def bench_argv(settings: CommbenchSettings, backend: Backend, work: Path) -> list[str]:
    """msrun running trials/commbench.py; rank 0 writes ``work/rank0.json``."""
    return [*msrun_argv(SCRIPT, settings.ranks, log_dir=work / "msrun_log"),
            "--sizes-kib", *(f"{float(s):g}" for s in settings.sizes_kib),
            "--repeats", str(settings.repeats), "--warmup", str(settings.warmup),
            "--backend", backend.value, "--out", str(work / "rank0.json")]


def prepare(out: Path, work: Path) -> None:
    """The output directory, and a fresh log directory (no stale worker logs)."""
    try:
        out.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
    except OSError as exc:
        raise ConfigError(f"cannot write to {out} ({exc.strerror or exc}): choose a "
                          "writable commbench.out=PATH") from exc










def assemble(raw: dict, settings: CommbenchSettings, hw: HardwareConfig,
             wall_s: float) -> dict:
    """The stored result: rank 0's measurement plus where and when it was taken."""
    return {"hardware": hw.name, "backend": hw.backend.value, "ranks": settings.ranks,
            "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "hostname": socket.gethostname(), "cpu_count": os.cpu_count(),
            "cpu_model": cpu_model(), "mindspore": raw.get("mindspore"),
            "api": raw.get("api"), "repeats": settings.repeats, "warmup": settings.warmup,
            "wall_s": wall_s,
            "profile_bandwidth_gbs": hw.intra_node.bandwidth_gbs, "rows": raw["rows"]}


def size_label(size_kib: float) -> str:
    return f"{size_kib / 1024:g} MiB" if size_kib >= 1024 else f"{size_kib:g} KiB"


def render(result: dict, hw: HardwareConfig) -> str:
    lines = [f"{'size':>10}  {'median ms':>10}  {'p10..p90 ms':>19}  {'algbw GB/s':>10}  "
             f"{'busbw GB/s':>10}"]
    for r in result["rows"]:
        spread = f"{1e3 * r['p10_s']:.3f}..{1e3 * r['p90_s']:.3f}"
        lines.append(f"{size_label(r['size_kib']):>10}  {1e3 * r['median_s']:>10.3f}  "
                     f"{spread:>19}  {r['algbw_gbs']:>10.4g}  {r['busbw_gbs']:>10.4g}")
    top = max(result["rows"], key=lambda r: r["busbw_gbs"])
    link, ranks = hw.intra_node, result["ranks"]
    expected = link.bus_bandwidth_gbs(ranks)
    assumed = ("no figure" if expected is None
               else f"{expected:.4g} GB/s{assumed_terms(link, ranks)}")
    lines.append(f"peak bus bandwidth {top['busbw_gbs']:.4g} GB/s at "
                 f"{size_label(top['size_kib'])}; the hardware={hw.name} profile assumes "
                 f"{assumed} (intra_node)")
    if override := bandwidth_override(top["busbw_gbs"], link, ranks):
        lines.append(f"to plan and predict with the measured figure, add {override} (or set it "
                     f"in conf/hardware/{hw.name}.yaml)")
    return "\n".join(lines)


def assumed_terms(link: LinkConfig, ranks: int) -> str:
    """What the profile's bus bandwidth is made of, where it is not one line rate: the full
    mesh's links, and the share of the line rate its library achieves."""
    terms = []
    if link.links(ranks) > 1:
        terms.append(f"{link.links(ranks)} links of {link.bandwidth_gbs:g} on its full mesh")
    if link.achieved_fraction != 1.0:
        terms.append(f"x {link.achieved_fraction:g} its library achieves")
    return f" ({', '.join(terms)})" if terms else ""


#: How far the measured bus bandwidth may sit from the profile's before commbench offers
#: its own figure: beyond the few per cent its repeats move by.
OVERRIDE_MISMATCH = 0.10


def bandwidth_override(measured_gbs: float, link: LinkConfig, ranks: int) -> str | None:
    """The override that puts the measured peak bus bandwidth of ``ranks`` devices into the
    hardware profile (the cost model's all-reduce divides by bus bandwidth,
    ``LinkConfig.bus_bandwidth_gbs``: on a full mesh, the figure is one link's, the bus
    bandwidth over its ranks - 1 links; a link's line rate, which its
    ``achieved_fraction`` scales), when the profile's figure is missing or off by
    more than OVERRIDE_MISMATCH; None when they agree."""
    expected = link.bus_bandwidth_gbs(ranks)
    if measured_gbs <= 0:
        return None
    if expected and abs(measured_gbs / expected - 1) <= OVERRIDE_MISMATCH:
        return None
    line_rate = measured_gbs / (link.links(ranks) * link.achieved_fraction)
    return f"hardware.intra_node.bandwidth_gbs={line_rate:.3g}"


# -- reading results back (profiler, report) ---------------------------------------------
def load_commbench(runs_dir: Path, hardware: str) -> dict | None:
    """The newest commbench result of a hardware profile under ``runs_dir`` (any number of
    ranks), or None. Only the default ``commbench.out`` is looked at."""
    pattern = re.compile(rf"commbench-{re.escape(hardware)}-(\d+)r\.json")
    found = []
    for path in (Path(runs_dir) / SUBDIR).glob(f"commbench-{hardware}-*r.json"):
        if not pattern.fullmatch(path.name):
            continue  # another profile whose name starts with this one's
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and data.get("rows"):
            found.append((str(data.get("date", "")), path.stat().st_mtime, data))
    return max(found, key=lambda f: f[:2])[2] if found else None


def bandwidth_at(result: dict, nbytes: float) -> float | None:
    """Bus bandwidth (GB/s) of an all-reduce of ``nbytes``: linear in log(size) between
    the measured sizes (they are spaced by factors, not by bytes), the nearest measured
    size's outside them. None without a measurement."""
    rows = sorted((r for r in (result or {}).get("rows", []) if r.get("bytes", 0) > 0),
                  key=lambda r: r["bytes"])
    if not rows or not nbytes or nbytes <= 0 or not math.isfinite(nbytes):
        return None
    sizes = np.log([r["bytes"] for r in rows])
    return float(np.interp(math.log(nbytes), sizes, [r["busbw_gbs"] for r in rows]))

