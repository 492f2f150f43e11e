"""Command line: ``python -m autotune COMMAND [--print-config] [hydra overrides]``.

    python -m autotune sweep                          # the default study (CPU, built-in GPT)
    python -m autotune plan workload=llama2_70b hardware=ascend_910b plan.nodes=4
    python -m autotune sweep workload=gpt_tiny search=tiny sweep.n_trials=4
    python -m autotune sweep sweep.study=mine sweep.storage=postgresql+psycopg2://me@db:5432/s
    python -m autotune sweep --print-config           # the composed config, nothing run
    python -m autotune report                         # tables, plots, diagnosis
    python -m autotune confirm confirm.top_k=2        # re-measure the finalists
    python -m autotune export export.out=best_job     # the winner as a production job
    python -m autotune profile                        # where the pick's step time goes
    python -m autotune commbench commbench.ranks=2    # all-reduce bandwidth over msrun
    python -m autotune soak                           # the winner run long, killed, resumed
    python -m autotune dashboard                      # optuna-dashboard, trials' files attached
    python -m autotune tune                           # the 5 stages, correctness to stability
    python -m autotune calibrate-host                 # this CPU's peak FLOP/s, measured when quiet
    python -m autotune calibrate calibrate.csv=runs.csv hardware=gpu_a100  # fit to your runs

Every command takes the same overrides and so finds the same study; one that reads a
stored study (report, export, confirm, soak, dashboard) refuses an override of what the study
ran with (its workload, hardware, data, global batch) that differs from it. Bad input
ends with one line naming the fix and exit code 2.
"""

from __future__ import annotations

import argparse
import errno
import logging
import os
import signal
import sys
import warnings
from pathlib import Path

from rich.console import Console

from autotune.help import command_module, plain
from autotune.signals import Stopped, stop_on_signals
from trials.contract.schema import ConfigError

#: The verbs, in the order ``--help`` lists them; each is ``autotune.commands.<verb>``, whose
#: ``run(composed, overrides, console)`` runs it (imported only when chosen; a hyphen in the
#: verb is an underscore in the module's name). A ``run`` that takes ``config`` is handed the
#: typed config validate_settings returned, instead of converting the composed one again.
COMMANDS = ("sweep", "plan", "report", "confirm", "export", "profile", "commbench", "soak",
            "dashboard", "tune", "calibrate-host", "calibrate")
#: The verbs that compose the search space's config-group choices too.
SEARCHING = ("sweep", "tune")


class OneLineParser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (exit code 2) like every other bad input."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def parse_args(argv: list[str]) -> argparse.Namespace:
    if argv[:1] and argv[0] in COMMANDS and {"-h", "--help"} & set(argv[1:]):
        from autotune.help import command_help

        print(command_help(argv[0]), end="")  # the command's own page, not the list of verbs
        raise SystemExit(0)
    parser = OneLineParser(prog="python -m autotune",
                           description=plain(__doc__.split("\n\n")[0]),
                           epilog=plain(__doc__.split("\n\n", 1)[1]),
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=COMMANDS)
    parser.add_argument("--print-config", action="store_true",
                        help="print the composed config (YAML) and exit")
    parser.add_argument("-v", "--verbose", action="store_true", help="log at INFO level")
    parser.add_argument("overrides", nargs="*", help="Hydra overrides, e.g. sweep.n_trials=20")
    return parser.parse_intermixed_args(argv)


def _quiet(verbose: bool) -> None:
    import optuna

    level = logging.INFO if verbose else logging.WARNING
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    optuna.logging.set_verbosity(level)
    if not verbose:
        warnings.filterwarnings("ignore", module="optuna")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    console = Console(highlight=False)
    err = Console(stderr=True, highlight=False)
    os.environ.setdefault("MPLCONFIGDIR", "/tmp/autotune-mpl")
    _quiet(args.verbose)
    try:
        with stop_on_signals():
            from omegaconf import OmegaConf

            from autotune.settings import SweepConfig, validate_settings
            from trials.contract.compose import compose

            # The commands that search compose the space's config-group choices too.
            composed = compose("sweep", args.overrides,
                               with_choices=args.command in SEARCHING,
                               schema=SweepConfig)
            config = validate_settings(composed)
            if args.print_config:
                if args.command in SEARCHING:  # all a sweep checks before it writes: its
                    # space, the baseline, the workload and its reach on these cores
                    from autotune.sweep_context import SweepContext

                    SweepContext.build(composed, config, args.overrides, environment=False)
                from autotune.study.urls import redact

                shown = OmegaConf.masked_copy(composed, [k for k in composed if k != "hydra"])
                shown.sweep.storage = redact(shown.sweep.storage)  # never a password
                console.print(OmegaConf.to_yaml(shown), end="", markup=False)
                return 0
            return run_command(args.command, composed, args.overrides, console, config=config)
    except ConfigError as exc:
        err.print(f"autotune: error: {exc}", markup=False, soft_wrap=True)
        return 2
    except Exception as exc:  # noqa: BLE001 - the faults of the machine, said in one line
        fault = environment_fault(exc)
        if fault is None:
            raise
        err.print(f"autotune: error: {fault}", markup=False, soft_wrap=True)
        return 1
    except (Stopped, KeyboardInterrupt) as exc:
        stopped = exc if isinstance(exc, Stopped) else Stopped(signal.SIGINT)
        err.print(f"autotune: stopped by {stopped.name}; {stopped_text(args.command)}",
                  markup=False, soft_wrap=True)
        return stopped.exit_code


def environment_fault(exc: Exception) -> str | None:
    """One line for a fault of the machine rather than of the input or the code (a full
    disk, a read-only one, a storage lost for longer than sweep.storage_retry_s, turned
    read-only or deleted), or None."""
    from autotune.study.disk import DiskFull, is_full
    from autotune.study.surviving import StorageLost

    if isinstance(exc, DiskFull | StorageLost):
        return str(exc)
    if is_full(exc):
        return str(DiskFull(Path(exc.filename).parent if exc.filename else Path.cwd()))
    if isinstance(exc, OSError) and exc.errno == errno.EROFS:
        where = exc.filename or Path.cwd()
        return (f"{where} is on a read-only file system: every finished trial is stored; "
                "make it writable (or set sweep.runs_dir elsewhere) and run the same command "
                "again to resume")
    return None


#: What a command stopped part-way leaves, when its module does not say (``STOPPED``).
STOPPED = "run the same command again to start it over"


def stopped_text(command: str) -> str:
    """What was kept of a stopped command, and what running it again does: each command
    says it (its module's ``STOPPED``), so the promise is true of that command."""
    module = sys.modules.get(command_module(command))
    return getattr(module, "STOPPED", STOPPED)


#: The verbs that read a study as it was run (its trials, its pick): an override that
#: describes another run is refused (autotune/study/as_run.py). ``profile`` is not one: an
#: override there profiles the composed configuration instead of the study's pick.
READS_STORED_STUDY = ("report", "export", "confirm", "soak", "dashboard")


def run_command(command: str, composed, overrides: list[str], console: Console, *,
                config=None) -> int:
    """Run the verb's module with the composed config and its typed, checked form
    (``config``: autotune.settings.SweepConfig, what ``validate_settings`` returned)."""
    import importlib

    if command in READS_STORED_STUDY:
        from autotune.study.as_run import contradicted

        problem = contradicted(command, config.sweep, composed, overrides)
        if problem:
            raise ConfigError(problem)
    module = importlib.import_module(command_module(command))
    return module.run(composed, overrides, console, config=config)
