"""A trial's memory is what its processes really hold, counted once: the proportional set
size (PSS) of the trial process and its dataset workers, summed (trials/memory.py)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import project_env
from trials.contract.launch import trial_argv
from trials.memory import PeakMemory, trial_memory_kib

#: The acceptance margin: the recorded peak within this share of the PSS read from /proc.
WITHIN = 0.15


def _kib(path: Path, field: str) -> int:
    for line in path.read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def _tree(pid: int) -> list[int]:
    """The process and all its descendants, by their parent pid (``/proc/*/stat``)."""
    parents: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    out, pending = [], [pid]
    while pending:
        p = pending.pop()
        out.append(p)
        pending.extend(parents.get(p, []))
    return out


def _read(pids: list[int]) -> tuple[float, float]:
    """(PSS summed, RSS summed) of the processes, in GiB; those gone meanwhile count 0."""
    pss = rss = 0
    for pid in pids:
        try:
            pss += _kib(Path(f"/proc/{pid}/smaps_rollup"), "Pss")
            rss += _kib(Path(f"/proc/{pid}/status"), "VmRSS")
        except OSError:
            pass
    return pss / 2**20, rss / 2**20


def test_the_trial_memory_of_one_process_is_its_pss():
    own = _kib(Path("/proc/self/smaps_rollup"), "Pss")
    # Rule: a process without children holds its proportional set size (read twice: the
    # reader itself allocates a little).
    pss, anon = trial_memory_kib()
    assert pss == pytest.approx(own, rel=0.05) and 0 < anon <= pss
    memory = PeakMemory()
    assert memory.sample() >= memory.anon_gib > 0


@pytest.mark.slow
@pytest.mark.parametrize("workload", [["workload=image_cnn"],
                                      ["workload=gpt_tiny", "data=synthetic"]],
                         ids=["image_cnn", "gpt_synthetic"])
def test_a_trial_with_dataset_worker_processes_reports_its_pss_as_its_peak(tmp_path, workload):
    """Two dataset worker processes (image_cnn: two for its source and two for its map):
    the peak the trial records is within 15 % of the PSS of its processes read from /proc
    while it ran, where their RSS summed counts the pages the workers share with the trial
    process again in every worker. (No pipeline probe: its copy of the pipeline, timed and
    stopped before training, would add its workers to what this test samples from /proc
    in the first seconds.)"""
    overrides = [*workload, "data.num_workers=2", "data.multiprocessing=true",
                 "run.warmup_steps=1", "run.measure_steps=40", "run.adaptive=false",
                 "run.probe_batches=0"]
    argv = trial_argv(None, world_size=1, overrides=overrides)
    with (tmp_path / "stdout").open("w") as out, (tmp_path / "stderr").open("w") as err:
        trial = subprocess.Popen(argv, cwd=tmp_path, env=project_env(), stdout=out,
                                 stderr=err, start_new_session=True)
        pss_max = rss_max = 0.0
        n_max = 0
        deadline = time.monotonic() + 240
        try:
            while trial.poll() is None and time.monotonic() < deadline:
                pids = _tree(trial.pid)
                pss, rss = _read(pids)
                if pss > pss_max:
                    pss_max, n_max = pss, len(pids)
                rss_max = max(rss_max, rss)
                time.sleep(0.05)
        finally:
            try:  # what the trial left in its session (it is the session's leader)
                os.killpg(trial.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            trial.wait()
    assert trial.returncode == 0, (tmp_path / "stderr").read_text()[-2000:]
    events = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    [summary] = [e for e in events if e["event"] == "summary"]
    peak = summary["resources"]["peak_rss_gib_max_rank"]
    print(f"recorded peak {peak:.3f} GiB; read from /proc: PSS {pss_max:.3f} GiB over "
          f"{n_max} processes, RSS summed {rss_max:.3f} GiB")
    assert n_max >= 3  # the trial process and its workers were read
    # Rule: the recorded peak is the trial's PSS, within 15 % ...
    assert peak == pytest.approx(pss_max, rel=WITHIN)
    # ... not its RSS summed, which counts the shared pages once per worker.
    assert rss_max > (1 + 2 * WITHIN) * pss_max
