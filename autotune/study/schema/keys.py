"""Every attribute key the study stores: the one owner of their spelling.

Trial-level keys are Optuna user attributes of one trial; study-level keys are user
attributes of the study. Two study-level keys predate the ``autotune.`` prefix
(:data:`COST_MODEL_FIT`, :data:`PREDICTED_SEEDED`): renaming them would orphan what old
studies stored, so they keep their spelling.
"""

from __future__ import annotations

# -- trial-level ---------------------------------------------------------------------------
#: Optuna's own system attribute of an enqueued trial: the params it was enqueued with.
FIXED_PARAMS = "fixed_params"
REASON = "reason"  # an Outcome value (trials/contract/outcomes.py)
DETAIL = "detail"  # one line of explanation
LAUNCHED = "launched"  # True when a process ran (counts against n_trials)
ROLE = "role"  # baseline, neighbour, sampled, predicted, probe, retry, nearest
REUSED_FROM = "reused_from"
TRIAL_DIR = "trial_dir"
SCORECARD = "scorecard"  # the four layers (schema.scorecard.Scorecard)
MICRO_BATCH_SIZE = "micro_batch_size"
WALL_S = "wall_s"
LOG_TAIL = "log_tail"
HEARTBEAT = "heartbeat"
WORKER = "worker"  # the orchestrator that runs it (schema.worker.Worker)
PLACEMENT = "placement"  # the devices and cores of a concurrent trial ("devices 0,1 cores 0")
PROCESS = "process"  # the trial's processes, to kill later (schema.worker.TrialProcess)
PREDICTION = "prediction"  # the cost model's prediction before launch (schema.Prediction)
MEMORY_FIT = "memory_fit"  # fits / tight / over: the budget against the predicted interval
#: Not stored on the trial: where TrialRecord.attrs keeps the trial's entry of
#: :data:`CONFIRM_VERDICTS` (a ConfirmVerdict's JSON).
CONFIRM = "confirm"
CONDITIONS = "conditions"  # the host's state over its run (autotune/study/conditions.py)
#: On a re-queued trial: its configuration was stopped under load once already.
CONTENDED_RETRY = "contended_retry"
IMPRECISE = "imprecise"  # the baseline missed run.target_interval: "interval +-17.1 % > ..."
RETRY_OF = "retry_of"  # on a re-queued trial: the number of the trial it retries

# -- study-level ---------------------------------------------------------------------------
#: confirm's verdict per finalist, keyed by trial number (schema.ConfirmVerdict).
CONFIRM_VERDICTS = "autotune.confirm"
#: The order the finalists ran in, round by round, in the latest confirm.
CONFIRM_ORDER = "autotune.confirm_order"
#: The latest confirm: its id, plan, failed runs, whether it finished (schema.ConfirmRun).
CONFIRM_RUN = "autotune.confirm_run"
#: More runs of a trial's configuration (a finished Optuna trial cannot change), keyed by
#: trial number: lists of schema.Repeat.
REPEATS = "autotune.repeats"
#: The budget (sweep.n_trials) whose final race finished (autotune/search/racing.py): a
#: resumed sweep with that budget does not race again.
FINAL_RACE = "autotune.final_race"
#: Profiles, keyed by trial number (schema.ProfileResult).
PROFILES = "autotune.profile"
#: The latest soak's result (schema.SoakVerdict).
SOAK = "autotune.soak"
#: Each tuning stage's result, keyed by stage name (schema.StageResult).
STAGES = "autotune.stages"
#: The hash of what the study's figures depend on, and its parts (autotune/study/storage.py).
FINGERPRINT = "autotune.fingerprint"
FINGERPRINT_PARTS = "autotune.fingerprint_parts"
#: The sweep's stop rules as it ran them (sweep.stop).
STOP_RULES = "autotune.stop_rules"
#: Figures published to the Optuna artifact store (autotune/study/artifacts.py).
PUBLISHED = "autotune.published"
#: The cost model's constants fitted to the study's trials (autotune/plan/fits.py).
COST_MODEL_FIT = "cost_model_fit"
#: The cost model's predicted points enqueued once (autotune/search/proposals.py).
PREDICTED_SEEDED = "predicted_seeded"

# -- values of ROLE --------------------------------------------------------------------------
BASELINE_ROLE = "baseline"  # the space's baseline, enqueued first
NEIGHBOUR_ROLE = "neighbour"  # one knob away from the baseline (sweep.neighbours)
PREDICTED_ROLE = "predicted"  # the cost model's best predictions, enqueued once
PROBE_ROLE = "probe"  # the model's best point resting on a time term no trial has timed
NEAREST_ROLE = "nearest"  # the sampler repeated measured points: the nearest unmeasured one
SAMPLED_ROLE = "sampled"  # proposed by the sampler
RETRY_ROLE = "retry"  # a lost trial's configuration, re-queued
#: Why a trial of each role was proposed, as the sweep's progress lines say it (a trial
#: without a role is the sampler's).
PROPOSED_AS = {BASELINE_ROLE: "the baseline", NEIGHBOUR_ROLE: "a neighbour of the baseline",
               PREDICTED_ROLE: "the cost model's pick",
               PROBE_ROLE: "the cost model's pick, to time a term no trial has timed",
               RETRY_ROLE: "a lost trial, again",
               NEAREST_ROLE: "the sampler's, the nearest unmeasured to its pick"}
