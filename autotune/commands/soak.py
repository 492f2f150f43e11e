"""``python -m autotune soak``: the chosen configuration run long, killed, resumed, judged.

    python -m autotune soak                          # the export choice, 10 x its steps
    python -m autotune soak soak.trial=3 soak.steps=2000
    python -m autotune soak soak.minutes=30          # a time budget, converted to steps up front
    python -m autotune soak run.inject_leak_mib=2    # fault injection: the leak detector must fire

The trial's own resolved ``config.yaml`` runs in production mode in ``<out>/run``
(metrics, checkpoints every ``soak.checkpoint_every`` steps, logs). Once
``soak.kill_at`` of the steps are done and a checkpoint exists, the whole trial is
killed with SIGKILL, half-way between two checkpoints so that the resumed run replays
some steps, and relaunched with the same command (``run.resume=true``). The resumed
run must replay the killed run's steps after its checkpoint within
``soak.resume_tolerance``; then the stitched run is judged for loss spikes,
overflow and skipped updates, tokens/s drift and host-memory growth
(autotune/soak/stability.py). Printed, written to ``<out>/soak.json`` and
``<out>/soak.png`` (``<out>``: ``soak.out``, else ``<runs_dir>/<study>/soak/trial-NNNN``),
and stored on the study as that trial's soak (``autotune.soak``: each trial's latest, read
by ``tune``, ``report`` and :func:`soak_section` for the exported job's README). A soak with
``run.inject_leak_mib`` tests the detectors, not the trial: it writes to
``soak/trial-NNNN-injected`` and is not stored.

Choices worth knowing:

* ``soak.minutes`` is turned into a step count before launch, from the trial's
  measured step time (the mean) and its launch overhead (printed): the kill point, the
  checkpoint interval and the analysis need the count up front, and the trainer has no
  graceful stop by time (a clock cut would lose the final checkpoint and summary).
* Overrides of the soak command are not merged into the trial's config, so the soak
  runs exactly the configuration that was measured; the one trial knob passed on is
  ``run.inject_leak_mib`` (when non-zero), the fault injection that tests the detector.
* Exit code 0 whenever the soak ran to its end, findings (a leak, drift, a resume that
  did not match) included: they are data. 1 when the run failed twice, or failed to
  start, or the resumed run made no step.
"""

from __future__ import annotations

import json
import shutil
import time

from omegaconf import DictConfig
from rich.console import Console

from autotune.running.preflight import check_configs
from autotune.running.repeat import copy_config
from autotune.running.runner import runner_for
from autotune.settings import SoakSettings, SweepConfig, SweepSettings
from autotune.soak.attempts import clocks_for, run_attempts
from autotune.soak.plan import output_dir, pick_trial, plan_soak
from autotune.soak.report import SOAK_KEY, plot, render, soak_section, summarise
from autotune.study import storage as S
from autotune.study.layout import SoakFiles, StudyLayout
from autotune.study.records import load_records
from autotune.study.schema.soak import store_soak
from trials.contract.trial_dir import TrialDir

__all__ = ["SOAK_KEY", "run_soak", "soak_section"]


def run_soak(composed: DictConfig, console: Console, config: SweepConfig) -> int:
    settings: SweepSettings = config.sweep
    options: SoakSettings = config.soak

    def say(text: str) -> None:
        console.print(text, markup=False, highlight=False, soft_wrap=True)

    study = S.load_existing(settings)
    records = load_records(study, layout=StudyLayout.of(settings))
    record, why = pick_trial(study, records, composed, options)
    # A fault injection tests the detectors, not the trial: kept apart, never its result.
    injected = float(composed.run.inject_leak_mib) > 0
    out = output_dir(settings, options, record.number, injected=injected)
    files = SoakFiles(out)
    run_dir = files.run
    source = record.run_dir
    plan = plan_soak(record, why, source.read_config(), options, files=files,
                     leak_mib=float(composed.run.inject_leak_mib))
    runner = runner_for(settings)
    check_configs([source.read_config()], settings)
    # Everything is validated: from here on the soak writes.
    shutil.rmtree(run_dir, ignore_errors=True)
    copy_config(source, TrialDir(run_dir))
    kill_text = (f"kill -9 after step {plan.planned_kill - 1} (>= {plan.kill_at:g} of the "
                 f"steps, {plan.replay} past a checkpoint)" if plan.planned_kill else "no kill")
    say(f"soak: trial {plan.trial}, the one export chooses: {why}" if options.trial is None
        else f"soak: trial {plan.trial}, as requested")
    say(f"soak: trial {plan.trial}: {plan.steps} steps ({plan.steps_from}), "
        f"checkpoint every {plan.checkpoint_every}, {kill_text}; in {run_dir}")
    extra = [o for o in plan.overrides if o.startswith("run.inject_leak_mib")]
    if extra:
        say(f"  fault injection: {' '.join(extra)}")
    started = time.time()
    attempts, failed = run_attempts(plan, TrialDir(run_dir), runner,
                                    clocks_for(plan, settings), say)
    verdict = summarise(plan, attempts, failed, options, time.time() - started, out,
                        contention_cores=settings.contention_cores)
    plot(attempts, verdict, files.plot)
    files.result.write_text(json.dumps(verdict.to_json(), indent=2) + "\n")
    if injected:
        say(f"fault injection: not stored as trial {plan.trial}'s soak (tune, export and "
            "report read the trial's own)")
    else:
        store_soak(study, verdict)
    say(render(verdict))
    say(f"wrote {files.result} and {files.plot}")
    return verdict.exit_code




#: What ``autotune`` says when it is stopped during a soak. A soak does not resume: its
#: kill drill and analysis span the whole run, so the same command starts it over.
STOPPED = ("the soak run was killed; a soak does not resume: run the same command again "
           "to start it over from step 0")


def run(composed: DictConfig, overrides: list[str], console: Console, *,
        config: SweepConfig) -> int:
    return run_soak(composed, console, config)
