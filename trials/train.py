"""The trial program: one short, real MindSpore training run under one knob setting.

    python -m trials.train                                   # default workload, 1 + 4 + 8 steps
    python -m trials.train workload=gpt_tiny precision=fp16 runtime.mode=pynative
    python -m trials.train train.micro_batches=2 data.num_workers=2 data.multiprocessing=true
    python -m trials.train --print-config workload=gpt_tiny
    python -m trials.train --config runs/s/trial-3/config.yaml   # a resolved config file
    python -m trials.train --config job.yaml run.mode=production run.steps=1000
    msrun --worker_num=2 --local_worker_num=2 --master_port=8118 --join=True \
        --log_dir=runs/manual/msrun_log trials/train.py parallel.dp=2   # data parallel

Metrics go to ``run.metrics_path`` as JSON lines (trials/contract/events.py); the exit
code is the outcome: 0 ok, 1 crash, 2 config_error, 3 diverged, 4 oom, 5 unsupported.
Relative paths (metrics, checkpoints, the profile) are the working directory's; started in
the repository's root, the program works in ``runs/manual/`` instead, so that nothing of a
run lands among the sources.
"""

from __future__ import annotations

import os
import sys

if __package__ in (None, ""):  # started as a script (msrun): make `trials` importable
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import argparse
import logging
import traceback
from pathlib import Path

from omegaconf import OmegaConf

from trials.contract.compose import compose, load_resolved, one_line
from trials.contract.events import EndRecord, ProfileRecord, SummaryRecord
from trials.contract.launch import PROJECT_ROOT
from trials.contract.metrics import MetricsLog
from trials.contract.outcomes import Outcome
from trials.contract.schema import (
    ConfigError,
    RunMode,
    TrialConfig,
    memory_budget_gib,
    runnable_problem,
    to_trial_config,
    validate,
)
from trials.memory import is_oom, limit_address_space


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m trials.train", description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", type=Path,
                        help="a resolved config file (from a sweep or an export) instead of conf/")
    parser.add_argument("--print-config", action="store_true",
                        help="print the composed config as YAML and exit")
    parser.add_argument("overrides", nargs="*", help="Hydra overrides, e.g. precision=fp16")
    return parser.parse_args(argv)


def load_config(args: argparse.Namespace) -> TrialConfig:
    if args.config is not None:
        node = load_resolved(args.config, args.overrides)
    else:
        node = compose("trial", args.overrides)
    try:
        cfg = to_trial_config(node)
    except Exception as exc:  # OmegaConf validation errors of a loaded file
        raise ConfigError(one_line(exc)) from exc
    validate(cfg)
    problem = runnable_problem(cfg)
    if problem:
        raise ConfigError(problem)
    return cfg


def rank_from_env() -> int:
    return int(os.environ.get("RANK_ID", "0"))


def metrics_path(cfg: TrialConfig, rank: int) -> Path:
    """Rank 0 writes the metrics file the launcher reads; other ranks a rank-tagged one."""
    path = Path(cfg.run.metrics_path)
    return path if rank == 0 else path.with_name(f"{path.stem}.rank{rank}{path.suffix}")


#: Where a run started by hand in the repository's root writes (git ignores runs/).
MANUAL_RUN_DIR = PROJECT_ROOT / "runs" / "manual"


def leave_the_sources(cwd: Path) -> Path | None:
    """A run started in the repository's root moves into MANUAL_RUN_DIR (returned); any
    other working directory (a trial's run directory, an exported job's) is kept (None)."""
    if cwd.resolve() != PROJECT_ROOT:
        return None
    MANUAL_RUN_DIR.mkdir(parents=True, exist_ok=True)
    # MindSpore's compile cache reads the entry script again by the path it was started
    # with (``msrun ... trials/train.py``): made absolute, it still finds it from there.
    script = Path(sys.argv[0])
    if not script.is_absolute() and script.exists():
        sys.argv[0] = str(script.resolve())
        main = sys.modules.get("__main__")
        if main is not None and getattr(main, "__file__", None):
            main.__file__ = sys.argv[0]
    os.chdir(MANUAL_RUN_DIR)
    return MANUAL_RUN_DIR


#: Objects whose teardown waits for the process's exit (after the end event).
KEEP_ALIVE: list = []


def run(cfg: TrialConfig, metrics: MetricsLog, *, compile_cache: dict) -> tuple[Outcome, str]:
    """Train and classify how it ended. Every failure becomes an outcome."""
    from trials.runtime.context import set_up_context
    from trials.runtime.parallel import init_parallel
    from trials.runtime.support import Unsupported, check_supported
    from trials.trainer import Diverged, Trainer

    try:
        set_up_context(cfg)
        check_supported(cfg)
        rank, world = init_parallel(cfg)
        trainer = Trainer(cfg, metrics, rank, world, applied={"compile_cache": compile_cache})
        # Alive until the process exits: its dataset workers take seconds to shut down, time
        # that must not sit between the last step and the end event.
        KEEP_ALIVE.append(trainer)
        summary = trainer.run()
    except Unsupported as exc:
        return Outcome.UNSUPPORTED, str(exc)
    except ConfigError as exc:
        return Outcome.CONFIG_ERROR, str(exc)
    except Diverged as exc:
        return Outcome.DIVERGED, str(exc)
    except (MemoryError, RuntimeError) as exc:
        if is_oom(exc):
            return Outcome.OOM, (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        traceback.print_exc()
        return Outcome.CRASH, f"{type(exc).__name__}: {str(exc).strip()[:300]}"
    except Exception as exc:  # noqa: BLE001 - anything else is a crash, with its traceback kept
        traceback.print_exc()
        return Outcome.CRASH, f"{type(exc).__name__}: {str(exc).strip()[:300]}"
    if trainer.profile is not None:
        metrics.emit(ProfileRecord(**trainer.profile))
    metrics.emit(SummaryRecord(**summary))
    if cfg.run.mode is RunMode.production and trainer.rank == 0:
        print(trainer.job_line(), flush=True)  # the job's last line (msrun tails rank 0's)
    return Outcome.OK, ""


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        cfg = load_config(args)
    except ConfigError as exc:
        print(f"config error: {exc}", file=sys.stderr)
        return Outcome.CONFIG_ERROR.exit_code
    if args.print_config:
        print(OmegaConf.to_yaml(OmegaConf.structured(cfg)), end="")
        return 0
    os.environ.setdefault("GLOG_v", "3")  # before MindSpore is imported: quiet C++ and Python logs
    rank = rank_from_env()
    moved = leave_the_sources(Path.cwd())  # after --config is read: it may be relative
    if moved is not None and rank == 0:
        print(f"started in the repository's root: writing under {moved}", file=sys.stderr)
    logging.basicConfig(level=logging.INFO, format=f"%(asctime)s [rank {rank}] %(message)s")
    scheduler = os.environ.get("MS_ROLE") == "MS_SCHED"  # msrun's scheduler runs this file too
    metrics = MetricsLog(None if scheduler else metrics_path(cfg, rank),
                         append=cfg.run.mode is RunMode.production)
    budget = memory_budget_gib(cfg)
    try:
        limit_address_space(budget * cfg.guard.address_space_factor)
    except (ValueError, OSError) as exc:
        print(f"warning: cannot limit address space: {exc}", file=sys.stderr)
    from trials.compile_cache import enable as enable_compile_cache

    outcome, reason = run(cfg, metrics, compile_cache=enable_compile_cache(cfg))
    metrics.emit(EndRecord(outcome=outcome, reason=reason))
    metrics.close()
    if outcome is not Outcome.OK:
        print(f"trial ended: {outcome.value}: {reason}", file=sys.stderr)
    sys.stdout.flush()
    sys.stderr.flush()
    if cfg.parallel.devices > 1:
        # msrun's scheduler waits for every worker to leave the cluster cleanly.
        return outcome.exit_code
    # MindSpore's atexit teardown can hang or crash after a failure; the outcome is written.
    os._exit(outcome.exit_code)


if __name__ == "__main__":
    sys.exit(main())
