"""Checks before the first launch that would otherwise fail every trial the same way."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml
from omegaconf import OmegaConf

from autotune.settings import SweepSettings
from trials.contract.capabilities import unsupported_reason
from trials.contract.knob_reach import BUILT_IN, Reach, config_problem, knob_problem
from trials.contract.launch import trial_env
from trials.contract.mindformers import ADAPTER_ENTRY
from trials.contract.schema import (
    CONF_DIR,
    ConfigError,
    TrialConfig,
    WorkloadConfig,
    runnable_problem,
)

#: Imports the module and looks the factory up, in the environment a trial gets; then
#: builds the workload as the trial does (trials/workload.py ``load_workload``: no model)
#: and prints what knobs it applies, or why it is not a workload (the factory raised, or
#: returned something else): the trial would fail the same way, after the study is written.
_IMPORT_CHECK = ("import importlib, json, sys\n"
                 "module = importlib.import_module(sys.argv[1])\n"
                 "factory = getattr(module, sys.argv[2])\n"
                 "try:\n"
                 "    from omegaconf import OmegaConf\n"
                 "    from trials.contract.schema import WorkloadConfig\n"
                 "    from trials.workload import load_workload, reach_of\n"
                 "    cfg = OmegaConf.to_object(OmegaConf.merge(\n"
                 "        OmegaConf.structured(WorkloadConfig), json.loads(sys.argv[3])))\n"
                 "except Exception:\n"
                 "    sys.exit(0)  # nothing to check the workload with here\n"
                 "try:\n"
                 "    built = load_workload(cfg)\n"
                 "except Exception as exc:\n"
                 "    if sys.argv[4] == 'strict':\n"
                 "        said = (str(exc).strip().splitlines() or [''])[0][:300]\n"
                 "        print('PROBLEM ' + type(exc).__name__ + ': ' + said)\n"
                 "    sys.exit(0)\n"
                 "print('REACH ' + json.dumps(reach_of(built, cfg.name).to_json()))\n")
_PROBLEM = "PROBLEM "
_REACH = "REACH "


def check_workload_entry(entry: str, *, timeout_s: float = 120.0,
                         workload: WorkloadConfig | None = None) -> Reach | None:
    """ConfigError when ``workload.entry`` cannot be imported where a trial would run, or
    its factory raises or returns no workload; else what the workload applies (None when
    it cannot be told here).

    The import runs in a child process with the trial's environment: the user's
    module may import MindSpore, which the orchestrator never does.
    """
    if not entry:
        return BUILT_IN
    module, _, attr = entry.partition(":")
    if not module or not attr:
        raise ConfigError(f"workload.entry={entry!r} must look like 'package.module:factory'")
    try:
        # In a scratch directory: an import may write there (MindFormers makes output/).
        with tempfile.TemporaryDirectory(prefix="autotune-preflight-") as scratch:
            node = OmegaConf.structured(workload or WorkloadConfig(name="workload"))
            spec = json.dumps(OmegaConf.to_container(node, enum_to_str=True))
            # The MindFormers adapter builds from files of its own: judged by its trial.
            strict = "lenient" if entry == ADAPTER_ENTRY else "strict"
            proc = subprocess.run([sys.executable, "-c", _IMPORT_CHECK, module, attr, spec,
                                   strict],
                                  env=trial_env(os.environ), capture_output=True, text=True,
                                  timeout=timeout_s, stdin=subprocess.DEVNULL, cwd=scratch)
    except subprocess.TimeoutExpired as exc:
        raise ConfigError(f"workload.entry={entry!r}: importing it took over {timeout_s:g} s; "
                          "check the module for work done at import time") from exc
    if proc.returncode != 0:
        lines = [line for line in proc.stderr.strip().splitlines() if line.strip()]
        why = lines[-1].strip() if lines else f"exit code {proc.returncode}"
        if entry == ADAPTER_ENTRY and "No module named 'mindformers'" in why:
            raise ConfigError(
                f"workload.entry={entry} needs MindFormers, which this environment lacks: "
                "run `make sweep-mindformers ARGS=...`, or `make mindformers-setup` and then "
                ".venv-mindformers/bin/python -m autotune ...")
        raise ConfigError(f"workload.entry={entry!r} cannot be imported ({why}); check the "
                          "name and PYTHONPATH")
    problem = next((x for x in proc.stdout.splitlines() if x.startswith(_PROBLEM)), None)
    if problem:
        said = problem[len(_PROBLEM):].removeprefix("ConfigError: ")
        raise ConfigError(f"workload.entry={entry!r} does not build a workload ({said}): its "
                          "factory must return a trials.workload.Workload for the config it "
                          "is given; nothing was launched")
    line = next((x for x in proc.stdout.splitlines() if x.startswith(_REACH)), None)
    return Reach.from_json(json.loads(line[len(_REACH):])) if line else None


def check_runnable(cfg: TrialConfig, *, import_entry: bool = True) -> Reach | None:
    """ConfigError when the configuration cannot run here at all (the backend, the devices)
    or its workload does not import; else what the workload applies (None: unknown).
    ``import_entry=False`` checks the configuration only: a workload of the user's is not
    imported, and what it applies is unknown (``--print-config``)."""
    problem = runnable_problem(cfg)
    if problem:
        raise ConfigError(problem)
    if cfg.workload.entry and not import_entry:
        return None
    return check_workload_entry(cfg.workload.entry, workload=cfg.workload)


def check_configs(configs: list[TrialConfig], settings: SweepSettings) -> None:
    """:func:`check_runnable` for each configuration a command is about to launch with the
    real trial program (each workload entry imported once), and what its hardware profile
    cannot run (the capability rule the sweep's proposals and the trial program apply):
    a trial re-run by ``profile``, ``soak`` or ``confirm`` in a shell without the sweep's
    PYTHONPATH, or ``profile precision=bf16`` on the CPU, is one line, before anything is
    written. Nothing for a simulated sweep's or a program of the user's own
    (``sweep.trial_command``): they run what the trial program may not."""
    if settings.simulate or settings.trial_command:
        return
    for cfg in configs:
        if problem := runnable_problem(cfg):
            raise ConfigError(problem)
        if problem := unsupported_reason(cfg):
            raise ConfigError(f"{problem}: the run would fail; choose a configuration the "
                              "profile supports, or another hardware= profile")
    for cfg in {cfg.workload.entry: cfg for cfg in configs}.values():
        check_workload_entry(cfg.workload.entry, workload=cfg.workload)


def check_reach(cfg: TrialConfig, knobs: dict[str, tuple], reach: Reach | None,
                space: str = "") -> None:
    """ConfigError naming the first knob of the baseline, or value of the search space
    ``space`` (``knobs``: override path -> values), that cannot take effect for the
    workload on this machine's cores (trials/contract/knob_reach.py), and the shipped
    spaces it can run."""
    if reach is None:
        return
    cores = os.cpu_count() or 1
    problem = config_problem(cfg, reach, cores=cores)
    if problem:
        raise ConfigError(f"the baseline: {problem}")
    for path, values in knobs.items():
        for value in values:
            problem = knob_problem(path, value, reach, cores=cores)
            if problem:
                fits = ", ".join(f"search={name}" for name in spaces_that_fit(reach, cores))
                raise ConfigError(f"search space {space}: {problem}"
                                  + (f"; or choose a space it runs: {fits}" if fits else "")
                                  + "; or sweep.simulate=true to sweep it on the cost model "
                                  "without running it")


def spaces_that_fit(reach: Reach, cores: int, conf_dir: Path = CONF_DIR) -> list[str]:
    """The shipped search spaces (conf/search/) every value of which takes effect for the
    workload on ``cores`` cores."""
    fits = []
    for path in sorted((conf_dir / "search").glob("*.yaml")):
        knobs = (yaml.safe_load(path.read_text()) or {}).get("knobs") or {}
        values = [(k, v) for k, vs in knobs.items() for v in (vs if isinstance(vs, list)
                                                             else [vs])]
        if all(knob_problem(k, v, reach, cores=cores) is None for k, v in values):
            fits.append(path.stem)
    return fits
