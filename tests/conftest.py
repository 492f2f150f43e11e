"""Shared fixtures: run the real trial program or the orchestrator as a user would."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from autotune.testing.fake_trial import COMMAND as FAKE_TRIAL
from autotune.testing.virtual import virtual_runner
from trials.contract.launch import trial_argv, trial_env

# make test runs the suite in two pytest-xdist workers, which start as `python -c`: MindSpore's
# graph API takes a non-empty argv[0] for the entry script whose imports its compile cache
# reads, and fails on "-c". An empty one is its "no entry script".
if sys.argv[:1] == ["-c"]:
    sys.argv[0] = ""

# tests/mindformers/ need MindFormers, which lives in its own environment: `make
# test-mindformers` runs them there (CI does); the main environment does not collect them.
collect_ignore_glob = [] if importlib.util.find_spec("mindformers") else ["mindformers/*"]

ROOT = Path(__file__).resolve().parent.parent
#: Fixed step counts (no adaptive measurement) where a test counts steps.
TINY = ["workload=gpt_tiny", "run.warmup_steps=1", "run.measure_steps=3", "run.adaptive=false"]


def project_env(**extra: str) -> dict[str, str]:
    """The trial environment of the one launch recipe, plus the tests' own cache."""
    env = trial_env(os.environ)
    env.setdefault("AUTOTUNE_CACHE", str(ROOT / ".cache" / "test"))
    env.update(extra)
    return env


#: make test runs two tests side by side, so a real run's speed here depends on the test beside
#: it: a test not about the host's load must not have its trials judged by that load (flagged,
#: re-queued, waited on for quiet). No load above every core of the host can be measured. A
#: test about load sets sweep.contention_cores after this (the later override wins); the
#: tests that compare real speeds or measure the load are marked ``solo`` and run alone.
#: (Scripted trials in virtual time meet no load either way.)
SHARED_HOST = f"sweep.contention_cores={os.cpu_count() or 1}"


#: The CPU peak the tests' own cache holds (above any GEMM figure of a 2-core host).
TESTS_PEAK_FLOPS = 5e11


@pytest.fixture(scope="session", autouse=True)
def verified_peak_in_the_tests_cache():
    """A verified CPU peak in the tests' own cache, so that a trial's MFU does not depend
    on whether other jobs load this shared machine while the tests run (the rule that
    refuses a peak measured under load has its own tests: tests/trials/test_calibrate.py)."""
    from trials.contract.machine import PeakEntry, cached_peak, peak_key, write_peak_entry

    cache = Path(project_env()["AUTOTUNE_CACHE"])
    if cache != ROOT / ".cache" / "test":
        return  # someone's own cache: not ours to seed
    for dtype in ("float32", "float16"):
        entry = cached_peak(dtype, cache)
        if entry is None or not entry.verified:
            write_peak_entry(cache, peak_key(dtype), PeakEntry(
                flops=TESTS_PEAK_FLOPS, verified=True, dtype=dtype, gemm_n=1024, repeats=5,
                attempts=1, spread=0.0, load_cores=0.0, max_load_cores=0.2,
                cores=os.cpu_count(), measured_at="by tests/conftest.py (a fixed figure)"))


#: What a process that trains with MindSpore is started as: the trial program, msrun, or an
#: exported job's copy of the trial program. (An orchestrator or a job's launch.sh started as
#: a process of its own is not looked into: its trials are its grandchildren.)
MINDSPORE_PROGRAMS = ("trials.train", "msrun", "train.py")


def starts_mindspore(argv) -> bool:
    args = [str(a) for a in ([argv] if isinstance(argv, (str, Path)) else argv)]
    return any(Path(a).name in MINDSPORE_PROGRAMS for a in args)


#: What the running test (its setup, its call and its fixtures, whatever their scope) has
#: started that trains with MindSpore.
_MINDSPORE_STARTED: list = []


class _WatchedPopen(subprocess.Popen):
    def __init__(self, args, *rest, **kwargs):
        if starts_mindspore(args):
            _MINDSPORE_STARTED.append(args)
        super().__init__(args, *rest, **kwargs)


def pytest_configure(config):
    """Every process a test starts is looked at (``subprocess.Popen``, which ``run`` and
    the launcher use)."""
    subprocess.Popen = _WatchedPopen


def pytest_runtest_setup(item):
    _MINDSPORE_STARTED.clear()  # before the test's fixtures are set up


def pytest_runtest_teardown(item):
    """A test that starts MindSpore carries the ``slow`` mark (``-m "not slow"`` is the
    suite without MindSpore)."""
    if _MINDSPORE_STARTED and item.get_closest_marker("slow") is None:
        started = _MINDSPORE_STARTED[0]
        _MINDSPORE_STARTED.clear()
        pytest.fail(f"{item.nodeid} starts MindSpore ({started}) but is not marked "
                    "@pytest.mark.slow", pytrace=False)


def read_events(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


class TrialRun:
    def __init__(self, proc: subprocess.CompletedProcess, cwd: Path) -> None:
        self.returncode = proc.returncode
        self.stdout, self.stderr = proc.stdout, proc.stderr
        self.events = read_events(cwd / "metrics.jsonl")
        self.cwd = cwd

    def of(self, kind: str) -> list[dict]:
        return [e for e in self.events if e["event"] == kind]

    @property
    def end(self) -> dict:
        return self.of("end")[-1]

    @property
    def summary(self) -> dict:
        return self.of("summary")[-1]

    @property
    def losses(self) -> list[float]:
        return [e["loss"] for e in self.of("step")]


def run_trial_in(workdir: Path, *overrides: str, args: tuple[str, ...] = (),
                 timeout: float = 240, tiny: bool = True) -> TrialRun:
    """Run ``python -m trials.train`` in ``workdir`` (created); returns a TrialRun."""
    workdir.mkdir(parents=True, exist_ok=True)
    argv = trial_argv(None, world_size=1, overrides=[*args, *(TINY if tiny else []), *overrides])
    # Output to files, not pipes, and the trial in a session of its own: dataset worker
    # processes (python_multiprocessing) may outlive a trial that ended, holding pipes
    # open (CI once waited 240 s on a trial that had exited 0). The sweep's monitor
    # reaps a trial's leftovers (trial.cleanup()); so does this harness, once the trial
    # itself has exited.
    out, err = workdir / "trial.stdout", workdir / "trial.stderr"
    with out.open("w") as stdout, err.open("w") as stderr:
        child = subprocess.Popen(argv, cwd=workdir, env=project_env(), stdout=stdout,
                                 stderr=stderr, text=True, start_new_session=True)
        try:
            child.wait(timeout=timeout)
        finally:
            _kill_session(child.pid)
            child.wait()
    proc = subprocess.CompletedProcess(argv, child.returncode, out.read_text(), err.read_text())
    return TrialRun(proc, workdir)


def _kill_session(pid: int) -> None:
    """Kill whatever the trial left in its session (it is the session's leader)."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


@pytest.fixture
def run_trial(tmp_path):
    """Run ``python -m trials.train`` in a fresh directory; returns a TrialRun."""
    counter = iter(range(1000))

    def run(*overrides: str, args: tuple[str, ...] = (), cwd: Path | None = None,
            timeout: float = 240, tiny: bool = True) -> TrialRun:
        workdir = cwd or tmp_path / f"trial-{next(counter)}"
        return run_trial_in(workdir, *overrides, args=args, timeout=timeout, tiny=tiny)

    return run


class SweepHarness:
    """Runs ``python -m autotune sweep`` in-process against a scratch study and search space."""

    def __init__(self, tmp_path: Path, monkeypatch, capsys) -> None:
        #: True: scripted trials run as processes (autotune/testing/fake_trial.py), for
        #: what only a process shows; False: in virtual time (autotune/testing/virtual.py).
        self.processes = False
        self.tmp = tmp_path
        self.monkeypatch = monkeypatch
        self.capsys = capsys
        self.conf = tmp_path / "conf"
        self.runs = tmp_path / "runs"
        monkeypatch.setenv("AUTOTUNE_CACHE", project_env()["AUTOTUNE_CACHE"])

    def space(self, name: str, knobs: dict, **extra) -> str:
        import yaml

        (self.conf / "search").mkdir(parents=True, exist_ok=True)
        body = {"name": name, "knobs": knobs, **extra}
        (self.conf / "search" / f"{name}.yaml").write_text(yaml.safe_dump(body, sort_keys=False))
        return name

    def script(self, rules: list[dict] | None = None, **opts) -> None:
        self.monkeypatch.setenv("AUTOTUNE_FAKE", json.dumps({"rules": rules or [], **opts}))

    def overrides(self, search: str, *extra: str, study: str = "s",
                  fake: bool = True) -> list[str]:
        out = [f"hydra.searchpath=[file://{self.conf}]", f"search={search}",
               f"sweep.runs_dir={self.runs}", f"sweep.study={study}", "sweep.progress=false",
               "workload=gpt_tiny", "runtime.threads=2"]
        if fake:
            out.append(f"sweep.trial_command=[{','.join(FAKE_TRIAL)}]")
        return out + [SHARED_HOST, *extra]

    def context(self, knobs: dict, *extra: str, search: str = "ctx"):
        """The checked sweep context (autotune/sweep_context.py) a sweep of ``knobs`` would
        run on, built without running it."""
        from autotune.settings import SweepConfig, validate_settings
        from autotune.sweep_context import SweepContext
        from trials.contract.compose import compose

        overrides = self.overrides(self.space(search, knobs), *extra)
        composed = compose("sweep", overrides, with_choices=True, schema=SweepConfig)
        return SweepContext.build(composed, validate_settings(composed), overrides)

    def run(self, search: str, *extra: str, study: str = "s", fake: bool = True):
        return self.main("sweep", *self.overrides(search, *extra, study=study, fake=fake))

    def main(self, *argv: str) -> tuple[int, str, str]:
        """``python -m autotune ARGV`` in this process."""
        from autotune.cli import main

        code = main(list(argv))
        out = self.capsys.readouterr()
        return code, out.out, out.err

    def study(self, study: str = "s"):
        import optuna

        return optuna.load_study(study_name=study,
                                 storage=f"sqlite:///{self.runs / study / 'study.db'}")


@pytest.fixture
def harness(tmp_path, monkeypatch, capsys):
    """Every command the test runs plays its scripted trials in virtual time, unless the
    test sets ``harness.processes``."""
    harness = SweepHarness(tmp_path, monkeypatch, capsys)
    with virtual_runner(lambda: not harness.processes) as runner:
        harness.runner = runner
        yield harness
