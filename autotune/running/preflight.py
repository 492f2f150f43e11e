"""Checks before the first launch that would otherwise fail every trial the same way."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile

from trials.contract.launch import trial_env
from trials.contract.mindformers import ADAPTER_ENTRY
from trials.contract.schema import ConfigError, TrialConfig, runnable_problem

#: Imports the module and looks the factory up, in the environment a trial gets.
_IMPORT_CHECK = ("import importlib, sys\n"
                 "module = importlib.import_module(sys.argv[1])\n"
                 "getattr(module, sys.argv[2])\n")


def check_workload_entry(entry: str, *, timeout_s: float = 120.0) -> None:
    """ConfigError when ``workload.entry`` cannot be imported where a trial would run.

    The import runs in a child process with the trial's environment: the user's
    module may import MindSpore, which the orchestrator never does.
    """
    if not entry:
        return
    module, _, attr = entry.partition(":")
    if not module or not attr:
        raise ConfigError(f"workload.entry={entry!r} must look like 'package.module:factory'")
    try:
        # In a scratch directory: an import may write there (MindFormers makes output/).
        with tempfile.TemporaryDirectory(prefix="autotune-preflight-") as scratch:
            proc = subprocess.run([sys.executable, "-c", _IMPORT_CHECK, module, attr],
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


def check_runnable(cfg: TrialConfig) -> None:
    """ConfigError when the configuration cannot run here at all (the backend, the devices)
    or its workload does not import."""
    problem = runnable_problem(cfg)
    if problem:
        raise ConfigError(problem)
    check_workload_entry(cfg.workload.entry)
