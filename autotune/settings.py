"""Typed schema of ``conf/sweep.yaml``: the trial config plus the sweep and the search space.

The orchestrator composes the same config groups as the trial program, so
``workload=gpt_tiny`` or ``runtime.threads=2`` mean the same thing in both.
"""

from __future__ import annotations

import enum
import math
import re
from dataclasses import dataclass, field

from hydra.core.config_store import ConfigStore
from omegaconf import DictConfig, OmegaConf

from trials.contract.paths import OUTPUT_DIR, program_problem
from trials.contract.rules import ConfigError, check_fields, rule
from trials.contract.schema import DataSource, TrialConfig, to_trial_config, validate
from trials.contract.text_source import text_dir_problem
from trials.contract.vocabulary import precision_problem, recompute_problem


class Objective(str, enum.Enum):
    throughput = "throughput"  # maximise tokens/s with peak memory <= budget (a constraint)
    pareto = "pareto"  # maximise tokens/s and minimise peak memory; keeps the Pareto front


class Launcher(str, enum.Enum):
    """Where trials run."""

    local = "local"  # processes of this machine
    slurm = "slurm"  # one SLURM job per trial (nodes x devices), through submitit


class Sampler(str, enum.Enum):
    """What proposes the next point after the baseline (and queued points)."""

    tpe = "tpe"  # Optuna's TPE: learns from completed and failed trials
    random = "random"
    grid = "grid"  # every point once, in a seeded order


class Pruner(str, enum.Enum):
    """What stops a running trial early as not worth finishing (autotune/running/pruning.py)."""

    slow = "slow"  # clearly behind the best trial so far (sweep.stop.slow_ratio and friends)
    median = "median"  # Optuna's MedianPruner: below the completed trials' median at that step
    none = "none"  # never: every trial runs to its end


@dataclass
class StopRules:
    """When the orchestrator stops a trial early."""

    #: Seconds from launch to the first finished step (process start + graph compile).
    compile_timeout_s: float = field(default=180.0, metadata=rule(gt=0))
    #: Seconds without a new step after the first one: a hang.
    step_timeout_s: float = field(default=60.0, metadata=rule(gt=0))
    #: Hard cap on one trial's wall time.
    wall_timeout_s: float = field(default=900.0, metadata=rule(gt=0))
    #: Prune when tokens/s of the measured steps < slow_ratio x the best trial's tokens/s
    #: (0 = never prune as slow).
    slow_ratio: float = field(default=0.5, metadata=rule(ge=0, le=1))
    #: Before measured steps exist, prune only below this (warm-up can be much slower).
    slow_warmup_ratio: float = field(default=0.1, metadata=rule(ge=0, le=1))
    #: Steps (measured, or else warm-up) the slow rule needs before it may judge.
    slow_min_steps: int = field(default=2, metadata=rule(ge=1))


@dataclass
class PredictSettings:
    """The cost model inside the sweep (autotune/plan/)."""

    #: Rule out, before launch, points whose predicted memory exceeds the budget even at
    #: the optimistic end of its interval (the model's held-out error,
    #: autotune/plan/predict.py); a point inside the interval is launched, flagged tight.
    rule_out_oom: bool = True
    #: Refit the cost model after a trial whose measured peak or step time is off its
    #: prediction by more than this fraction.
    oom_margin: float = field(default=0.1, metadata=rule(ge=0, le=10))
    #: Launch the k configurations with the best predicted tokens/s next, once per study,
    #: as soon as the model is trusted (``trust_time_error`` or ``trust_rank``); 0 = let
    #: the sampler choose.
    enqueue_best: int = field(default=3, metadata=rule(ge=0))
    #: The model is trusted to seed the search when its step-time error (the imported fit's
    #: leave-one-out error, or the study's fit's residual) is at most this. 1 (the default):
    #: as soon as it predicts, the profile's priors (error 0.3) included: its picks are
    #: measured like any proposal, one at a time, each from the model as refitted by then,
    #: and on the recorded landscapes a gate at 0.15 only delayed the optimum (GPT: 5.4 ->
    #: 3.2 % of the grid's trial-seconds to within 3 %; BENCHMARKS.md "Search efficiency").
    #: 0.15 seeds only from a model whose error is measured that low.
    trust_time_error: float = field(default=1.0, metadata=rule(ge=0))
    #: ... or when, over the study's own measured trials (5 or more), each one predicted by
    #: a fit of the others ranks them with Spearman's rho at least this: a model that ranks
    #: configurations it was not fitted on is worth seeding from even when its seconds are
    #: off (on the recorded CPU landscape its error is ~19 % in-sample, its order right).
    trust_rank: float = field(default=0.8, metadata=rule(ge=-1, le=1))
    #: After the first ``enqueue_best`` seeds, queue the model's best unseen point every
    #: other launch while it stays trusted (the sampler proposes the others). No pick, seed
    #: or follow, is one the slow rule would stop at its prediction's optimistic end.
    follow: bool = True
    #: Refit the model's constants from the study's measured trials as they finish.
    refit: bool = True


@dataclass
class RaceSettings:
    """Racing (autotune/search/racing.py): configurations within noise of the best are
    re-measured beside it, in interleaved rounds: each new trial before the sampler is told
    (``rounds``), and the finalists once the budget is spent (``finalists``)."""

    #: At most this many rounds of (best, new) re-runs, ending at the first round after
    #: which one is separably faster; 0 = no racing. Off by default: BENCHMARKS.md,
    #: "Search efficiency on a recorded landscape", shows what it costs and what it buys.
    rounds: int = field(default=0, metadata=rule(ge=0, le=10))
    #: When the budget is spent, the best and those of the ``finalists`` fastest that are
    #: within noise of it run again, in interleaved rounds, until one is separably fastest
    #: (the pick must not rest on one lucky run); 0 or 1 = no final race. The noise decides
    #: how many enter; this only bounds them.
    finalists: int = field(default=8, metadata=rule(ge=0, le=10))
    #: At most this many rounds of the final race, and never more runs in all than the
    #: sweep's launches (``n_trials``); 0 = no final race.
    final_rounds: int = field(default=6, metadata=rule(ge=0, le=10))


@dataclass
class SlurmSettings:
    """``sweep.launcher=slurm``: how each trial's job is requested (sbatch's own names)."""

    #: Partition; empty = the cluster's default.
    partition: str = ""
    account: str = ""
    qos: str = ""
    #: The job's time limit in minutes (SLURM ends it as TIMEOUT past this).
    time_min: int = field(default=60, metadata=rule(ge=1))
    #: CPUs per device (on a CPU-only cluster: per rank) of each node's task.
    cpus_per_device: int = field(default=1, metadata=rule(ge=1))
    #: Memory per node in GiB; null = the partition's default.
    mem_gib: float | None = field(default=None, metadata=rule(gt=0))
    #: Nodes one trial may span (each with the hardware profile's devices).
    max_nodes: int = field(default=1, metadata=rule(ge=1, le=1024))
    #: More sbatch parameters, e.g. {constraint: a100, exclusive: true}.
    extra: dict = field(default_factory=dict)
    #: Shell lines run before the trial in the job (module load ..., source env).
    setup: list = field(default_factory=list)


@dataclass
class SweepSettings:
    """How the search runs and where the study lives."""

    #: Study name; also the directory under runs_dir. Letters, digits, '.', '_', '-'.
    study: str = "default"
    #: Real trial launches in total, across resumes and workers.
    n_trials: int = field(default=12, metadata=rule(ge=1))
    #: Optuna storage URL; empty = SQLite at <runs_dir>/<study>/study.db.
    storage: str = ""
    #: How long a sweep keeps retrying a storage that went away (a database restart, a
    #: failover, a lock) before it stops; the running trial keeps running meanwhile.
    storage_retry_s: float = field(default=60.0, metadata=rule(ge=0))
    #: Seconds one connection attempt to a database server may take (PostgreSQL).
    storage_connect_timeout_s: float = field(default=10.0, metadata=rule(gt=0))
    runs_dir: str = field(default="runs", metadata=rule(path=OUTPUT_DIR))
    objective: Objective = Objective.throughput
    #: Sampler seed; each (re)start adds the number of trials already in the study.
    seed: int = field(default=0, metadata=rule(ge=0))
    sampler: Sampler = Sampler.tpe
    #: What stops a running trial early for its tokens/s so far: slow, median or none.
    pruner: Pruner = Pruner.slow
    #: TPE startup trials before the model takes over.
    n_startup_trials: int = field(default=6, metadata=rule(ge=0))
    #: After the baseline, try each single-knob change of it (in the space's knob order,
    #: the data knobs first for a data-bound baseline, last for one whose pipeline keeps
    #: up) before sampling: true, false, or null (the default) where the cost model cannot
    #: time the workload (no terms for it, a ``workload.entry``), so that each knob is
    #: measured once where nothing predicts its effect; where the model times it, its
    #: predicted best points go first instead.
    neighbours: bool | None = None
    #: End the sweep when more than this fraction of launches failed (crash/hang/timeout).
    max_failure_rate: float = field(default=0.5, metadata=rule(ge=0, le=1))
    #: ...but only once this many trials were launched.
    min_trials_for_failure_rate: int = field(default=4, metadata=rule(ge=1))
    #: Accept a study whose fingerprint (space, workload, hardware) differs.
    allow_changed_space: bool = False
    #: Seconds between heartbeats; a RUNNING trial silent for heartbeat_timeout_s is a zombie.
    heartbeat_interval_s: float = field(default=5.0, metadata=rule(gt=0))
    heartbeat_timeout_s: float = field(default=60.0, metadata=rule(gt=0))
    #: Program that runs one trial (argv list); empty = the MindSpore trial program.
    trial_command: list = field(default_factory=list)
    #: Where trials run: local processes, or SLURM jobs (sweep.slurm).
    launcher: Launcher = Launcher.local
    #: Trials in flight at once. Locally each gets its own devices of the hardware
    #: profile (and its own CPU cores); with SLURM, jobs in flight.
    parallel_trials: int = field(default=1, metadata=rule(ge=1, le=256))
    slurm: SlurmSettings = field(default_factory=SlurmSettings)
    stop: StopRules = field(default_factory=StopRules)
    predict: PredictSettings = field(default_factory=PredictSettings)
    race: RaceSettings = field(default_factory=RaceSettings)
    #: Re-measure the baseline after every this many launches (0 = never), so that each
    #: trial's gain is measured against a baseline run close to it in time: a machine
    #: whose speed drifts moves both alike. Not counted in n_trials.
    baseline_every: int = field(default=4, metadata=rule(ge=0))
    #: Run simulated trials (the cost model's prediction plus measured noise) instead of
    #: MindSpore: for spaces this machine cannot run. Marked simulated everywhere.
    simulate: bool = False
    #: Show the progress bar (off when output is not a terminal).
    progress: bool = True
    #: A run during which other processes used more than this many cores (over its
    #: measured steps) is flagged as measured under load ("load" in the leaderboard).
    #: 0.5: this 2-core VM's clean benchmark runs saw 0.00-0.26 cores of other load,
    #: while at 0.6-1.6 cores identical code differed by -25..+17 %
    #: (docs/benchmarks-history.md: "Trial program", "Seam refactor overhead").
    #: It counts cores, not a share: raise it on a large shared host.
    contention_cores: float = field(default=0.5, metadata=rule(ge=0))
    #: A trial stopped (slow, hang, timeout) while the host was contended is re-queued
    #: once; before it runs again the sweep waits up to this long for the host to be quiet
    #: (seconds).
    quiet_wait_s: float = field(default=60.0, metadata=rule(ge=0))


@dataclass
class SearchConfig:
    """Which knobs to explore: override path -> list of values.

    ``parallel.split`` is one choice over "dp x mp x pp" strings such as "2x1x1"
    (dependent knobs are one categorical over valid combinations).
    """

    name: str = "default"
    knobs: dict = field(default_factory=dict)
    #: Baseline values of knobs whose composed value is not a point of this space
    #: (e.g. ``parallel.split: "8x1x1"`` for an 8-device space); the rest come from the
    #: composed configuration.
    baseline: dict = field(default_factory=dict)
    #: Devices a job must use (dp x mp x pp); null = at most the hardware profile's devices.
    devices: int | None = field(default=None, metadata=rule(ge=1))


@dataclass
class ReportSettings:
    """``python -m autotune report``."""

    #: Output directory; empty = <runs_dir>/<study>/report.
    out: str = field(default="", metadata=rule(path=OUTPUT_DIR))


@dataclass
class ConfirmSettings:
    """``python -m autotune confirm``: re-measure the finalists, interleaved."""

    #: How many of the fastest distinct configurations to re-run, besides the baseline.
    top_k: int = field(default=3, metadata=rule(ge=1))
    #: Runs of each, interleaved (A B C A B C ...).
    repeats: int = field(default=3, metadata=rule(ge=1))


@dataclass
class ExportSettings:
    """``python -m autotune export``: the chosen trial as a production job."""

    #: Output directory; empty = <runs_dir>/<study>/export.
    out: str = field(default="", metadata=rule(path=OUTPUT_DIR))
    #: Trial number to export; null = the study's pick (the sentence every command prints).
    trial: int | None = field(default=None, metadata=rule(ge=0))
    #: Choose by confirmed medians where `confirm` has run.
    use_confirmed: bool = True
    #: Export the configuration with the fewest changes from the baseline among those the
    #: fastest is not separable from (the baseline when the gain is within noise).
    prefer_simpler: bool = True
    #: Pareto studies: the fastest trial with at least this much memory headroom (GiB).
    min_headroom_gib: float = field(default=0.0, metadata=rule(ge=0))
    #: Write into a non-empty output directory.
    overwrite: bool = False
    #: Production run of the exported job: total steps and checkpoint interval.
    steps: int = field(default=1000, metadata=rule(ge=1))
    checkpoint_every: int = field(default=100, metadata=rule(ge=1))
    #: Your full MindFormers YAML: mindformers.yaml is then it with the tuned values merged
    #: in (empty: a fragment of the tuned keys; a MindFormers workload's own config).
    mindformers_base: str = ""
    #: Precision keys of legacy or new (mcore) MindFormers model configs; auto = the base's.
    mindformers_style: str = field(default="auto",
                                   metadata=rule(one_of=("auto", "legacy", "mcore")))
    #: MindFormers keys to set last, dotted: {output_dir: /data/out, runner_config.epochs: 3}.
    mindformers_overrides: dict = field(default_factory=dict)
    #: What may go into a base whose model (layers, hidden, heads, sequence) or hardware
    #: is not the tuned workload's (refused otherwise): groups of MINDFORMERS_TRANSFER_GROUPS
    #: or dotted keys of the exported files, e.g. [data, memory, training.max_norm].
    #: context.device_target and max_device_memory change only when named (hardware).
    mindformers_transfer: list = field(default_factory=list)


#: Groups of tuned values ``export.mindformers_transfer`` names
#: (autotune/export/mindformers_transfer.py maps each MindFormers key to one).
MINDFORMERS_TRANSFER_GROUPS = ("parallel", "batch", "optimizer", "precision", "memory",
                               "runtime", "data", "run", "hardware")


@dataclass
class PlanSettings:
    """``python -m autotune plan``: every configuration of the workload on a cluster, ranked."""

    #: Nodes of the hardware profile (each with ``hardware.devices`` devices).
    nodes: int = field(default=1, metadata=rule(ge=1))
    #: Output directory; empty = <runs_dir>/plan/<workload>-<hardware>-<nodes>n, and
    #: -<digest> of the plan settings and overrides that shape it where any differ.
    out: str = field(default="", metadata=rule(path=OUTPUT_DIR))
    #: Sequences per optimizer step; null = train.global_batch.
    global_batch: int | None = field(default=None, metadata=rule(ge=1))
    #: Splits to plan, as "DPxMPxPP" (each must use every device of the cluster); empty =
    #: every dp x mp x pp split of the cluster. Every list here also takes bare values
    #: (plan.split=8x4x12 is plan.split=[8x4x12]; trials/contract/compose.py).
    split: list = field(default_factory=list)
    #: What to enumerate besides the splits. Micro-batch counts: empty = every power of
    #: two that divides the per-replica batch.
    micro_batches: list = field(default_factory=list)
    #: Recompute modes (none, selective, full, selective_op), as train.recompute spells them.
    recompute: list = field(default_factory=lambda: ["none", "selective", "full"])
    #: Sequence parallel (activations split over the model-parallel ranks) off and on;
    #: [true] plans only with it.
    sequence_parallel: list = field(default_factory=lambda: [False, True])
    #: The optimizer states split over the data-parallel ranks (ZeRO-1, MindSpore's
    #: parallel optimizer) off and on; [true] plans only with it.
    optimizer_shard: list = field(default_factory=lambda: [False, True])
    #: Precision names (fp32, fp16, bf16), as the precision group spells them; empty =
    #: every precision the profile can run.
    precisions: list = field(default_factory=list)
    #: Rows shown on the terminal and in plan.png.
    show: int = field(default=15, metadata=rule(ge=1))


@dataclass
class CalibrateSettings:
    """``python -m autotune calibrate``: fit the cost model to runs measured elsewhere."""

    #: A CSV of measured runs (autotune/plan/measured_points.py names the columns).
    csv: str = ""
    #: Store the fit for the hardware profile, where ``plan`` and the sweep find it.
    store: bool = True


@dataclass
class ProfileSettings:
    """``python -m autotune profile``: one configuration under mindspore.profiler."""

    #: Trial of the study to profile, as it ran; null = the study's pick, or the composed
    #: configuration where an override sets what the pick lacks or there is no study.
    trial: int | None = field(default=None, metadata=rule(ge=0))
    #: Profiled steps, after warm-up and measurement (the profiler costs time: 10-20).
    steps: int = field(default=10, metadata=rule(ge=1, le=100))
    #: Output directory; empty = <runs_dir>/<study>/profile/trial-N, or composed (and
    #: -<digest> of its trial overrides where it has any).
    out: str = field(default="", metadata=rule(path=OUTPUT_DIR))
    #: The sweep profiles its winner at the end...
    after_sweep: bool = True
    #: ...when that is expected to cost under this share of the sweep's time.
    max_sweep_share: float = field(default=0.1, metadata=rule(ge=0, le=1))


@dataclass
class CommbenchSettings:
    """``python -m autotune commbench``: all-reduce bandwidth over msrun."""

    #: Ranks (processes) on this node; at most the hardware profile's devices on an
    #: accelerator, any number >= 2 on the CPU.
    ranks: int = field(default=2, metadata=rule(ge=2, le=64))
    #: Message sizes in KiB (float32 tensors).
    sizes_kib: list = field(default_factory=lambda: [4, 64, 1024, 8192, 65536])
    #: Timed all-reduces per size, after ``warmup`` untimed ones.
    repeats: int = field(default=10, metadata=rule(ge=1, le=1000))
    #: Untimed all-reduces per size first (the first call sets up the communicator).
    warmup: int = field(default=2, metadata=rule(ge=0, le=100))
    #: Output directory; empty = <runs_dir>/commbench.
    out: str = field(default="", metadata=rule(path=OUTPUT_DIR))


@dataclass
class SoakSettings:
    """``python -m autotune soak``: the chosen configuration run long, killed and resumed."""

    #: Trial to soak; null = the one ``export`` would choose.
    trial: int | None = field(default=None, metadata=rule(ge=0))
    #: Optimizer steps; null = 10 x the trial's own steps (warm-up + measured).
    steps: int | None = field(default=None, metadata=rule(ge=10))
    #: Time budget in minutes instead of a step count; null = use steps.
    minutes: float | None = field(default=None, metadata=rule(gt=0))
    #: kill -9 the run once this fraction of its steps is done, then resume it from the
    #: latest checkpoint; 0 = no kill.
    kill_at: float = field(default=0.5, metadata=rule(ge=0, lt=1))
    #: Checkpoint interval; null = steps / 10.
    checkpoint_every: int | None = field(default=None, metadata=rule(ge=1))
    #: The resumed loss curve must match the killed one's replayed steps within this
    #: relative tolerance.
    resume_tolerance: float = field(default=0.01, metadata=rule(gt=0, lt=1))
    #: Host-memory growth (MiB per 100 steps) above which, with a slope separable from
    #: noise, the run is said to leak.
    leak_mib_per_100_steps: float = field(default=20.0, metadata=rule(gt=0))
    #: Output directory; empty = <runs_dir>/<study>/soak/trial-NNNN (the soaked trial's).
    out: str = field(default="", metadata=rule(path=OUTPUT_DIR))


#: The stages of ``tune``, in the order they run (autotune/commands/tune.py).
STAGES = ("correctness", "memory", "data", "throughput", "stability")


@dataclass
class DashboardSettings:
    """``python -m autotune dashboard``: optuna-dashboard on the study, with its artifacts."""

    #: Address to listen on; 127.0.0.1 = this machine only (0.0.0.0: every interface).
    host: str = "127.0.0.1"
    #: Port to listen on; 0 = any free port (the URL printed names it).
    port: int = field(default=8080, metadata=rule(ge=0, le=65535))


@dataclass
class TuneSettings:
    """``python -m autotune tune``: the tuning order as stages, each stored on the study."""

    #: Stages to run, in this order; a finished stage is skipped on resume.
    stages: list = field(default_factory=lambda: list(STAGES))
    #: Correctness: steps of each precision's loss curve (same seed, same data).
    correctness_steps: int = field(default=30, metadata=rule(ge=6, le=1000))
    #: ...a reduced precision whose smoothed loss differs from fp32's by more than this
    #: (relative) at any point of the curve's second half is ruled out.
    loss_tolerance: float = field(default=0.05, metadata=rule(gt=0, lt=1))
    #: Memory: a configuration fits when its predicted peak leaves this much headroom.
    headroom: float = field(default=0.1, metadata=rule(ge=0, lt=1))


@dataclass
class SweepConfig(TrialConfig):
    sweep: SweepSettings = field(default_factory=SweepSettings)
    search: SearchConfig = field(default_factory=SearchConfig)
    report: ReportSettings = field(default_factory=ReportSettings)
    confirm: ConfirmSettings = field(default_factory=ConfirmSettings)
    export: ExportSettings = field(default_factory=ExportSettings)
    plan: PlanSettings = field(default_factory=PlanSettings)
    calibrate: CalibrateSettings = field(default_factory=CalibrateSettings)
    profile: ProfileSettings = field(default_factory=ProfileSettings)
    commbench: CommbenchSettings = field(default_factory=CommbenchSettings)
    soak: SoakSettings = field(default_factory=SoakSettings)
    tune: TuneSettings = field(default_factory=TuneSettings)
    dashboard: DashboardSettings = field(default_factory=DashboardSettings)


ConfigStore.instance().store(name="sweep_schema", node=SweepConfig)


#: The sections of SweepConfig that are not the trial's, in the order they are checked.
SETTINGS_KEYS = ("sweep", "search", "report", "confirm", "export", "plan", "calibrate",
                 "profile", "commbench", "soak", "tune", "dashboard")


def validate_settings(composed: DictConfig) -> SweepConfig:
    """Every field of the composed sweep config: ranges, then the rules that span fields.

    Called by every command before anything is written; ConfigError names the override.
    """
    node = OmegaConf.masked_copy(composed, [k for k in composed if k != "hydra"])
    try:
        cfg = OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(SweepConfig), node))
    except Exception as exc:  # OmegaConf validation errors (a value of the wrong type)
        from trials.contract.compose import one_line

        raise ConfigError(one_line(exc)) from exc
    for key in SETTINGS_KEYS:
        check_fields(getattr(cfg, key), key)
    validate(to_trial_config(composed))
    _check_data(cfg)
    s, stop = cfg.sweep, cfg.sweep.stop
    if s.heartbeat_timeout_s <= s.heartbeat_interval_s:
        raise ConfigError(f"sweep.heartbeat_timeout_s={s.heartbeat_timeout_s:g} must exceed "
                          f"sweep.heartbeat_interval_s={s.heartbeat_interval_s:g}, or live "
                          "trials would be taken for zombies")
    if stop.wall_timeout_s < stop.compile_timeout_s:
        raise ConfigError(f"sweep.stop.wall_timeout_s={stop.wall_timeout_s:g} is below "
                          f"sweep.stop.compile_timeout_s={stop.compile_timeout_s:g}: no trial "
                          "could finish compiling; raise it")
    if stop.slow_warmup_ratio > stop.slow_ratio:
        raise ConfigError(f"sweep.stop.slow_warmup_ratio={stop.slow_warmup_ratio:g} must not "
                          f"exceed sweep.stop.slow_ratio={stop.slow_ratio:g} (warm-up is "
                          "judged more leniently)")
    if not all(isinstance(line, str) for line in s.slurm.setup):
        raise ConfigError("sweep.slurm.setup must be a list of shell lines (strings)")
    if s.trial_command and not all(isinstance(w, str) and w for w in s.trial_command):
        raise ConfigError("sweep.trial_command must be a list of non-empty strings "
                          "(argv), e.g. sweep.trial_command=[python,my_trial.py]")
    if s.trial_command and (problem := program_problem(s.trial_command[0])):
        raise ConfigError(f"sweep.trial_command: {s.trial_command[0]} {problem}")
    if s.simulate:
        # A simulated trial's time is computed, not measured: other processes cannot slow
        # it, so none of its runs is judged as measured under load (flagged "load 1.5",
        # its gains widened to -86..+460 %, re-queued for a quiet host).
        s.contention_cores = math.inf
    _check_plan(cfg.plan)
    _check_lists(cfg)
    return cfg


_DOTTED_KEY = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")


def _check_lists(cfg: SweepConfig) -> None:
    sizes = cfg.commbench.sizes_kib
    if not sizes or not all(isinstance(v, int | float) and 0 < v <= 4 * 1024 * 1024
                            for v in sizes):
        raise ConfigError(f"commbench.sizes_kib={sizes}: each size must be a number of KiB "
                          "in (0, 4194304], and the list not empty")
    transfer = cfg.export.mindformers_transfer
    bad = [v for v in transfer if not isinstance(v, str)
           or not (v in MINDFORMERS_TRANSFER_GROUPS or _DOTTED_KEY.fullmatch(v))]
    if bad:
        raise ConfigError(f"export.mindformers_transfer={transfer}: {bad[0]!r} is neither a "
                          f"group ({', '.join(MINDFORMERS_TRANSFER_GROUPS)}) nor a dotted "
                          "MindFormers key (e.g. train_dataset.prefetch_size)")
    stages = cfg.tune.stages
    if not stages or any(s not in STAGES for s in stages) or len(set(stages)) != len(stages):
        raise ConfigError(f"tune.stages={stages}: a non-empty list of distinct stages out of "
                          f"{', '.join(STAGES)}")
    if list(stages) != sorted(stages, key=STAGES.index):
        raise ConfigError(f"tune.stages={stages}: stages run in the order "
                          f"{', '.join(STAGES)}; list them in that order")


def _check_data(cfg: SweepConfig) -> None:
    """The data the trials read must be there before any trial starts (a user workload
    reads its own)."""
    data = cfg.data
    if data.text_dir and data.source is not DataSource.synthetic and not cfg.workload.entry:
        problem = text_dir_problem(data.text_dir, seq_len=cfg.workload.seq_len,
                                   max_bytes=data.max_bytes)
        if problem:
            raise ConfigError(problem)


def _check_plan(plan: PlanSettings) -> None:
    # Precisions and recompute modes are words of the vocabulary: a misspelt one is named
    # with the word to write (plan.precisions=[float16] -> fp16).
    for key, values, problem_of in (("plan.precisions", plan.precisions, precision_problem),
                                    ("plan.recompute", plan.recompute, recompute_problem)):
        problem = next(filter(None, (problem_of(v, key) for v in values)), None)
        if problem:
            raise ConfigError(problem)
    lists = {"plan.micro_batches": (plan.micro_batches, lambda v: isinstance(v, int) and v >= 1,
                                    "positive integers"),
             "plan.recompute": (plan.recompute, lambda v: True,
                                "none, selective, full or selective_op"),
             "plan.sequence_parallel": (plan.sequence_parallel, lambda v: isinstance(v, bool),
                                        "true or false"),
             "plan.optimizer_shard": (plan.optimizer_shard, lambda v: isinstance(v, bool),
                                      "true or false")}
    for key, (values, ok, what) in lists.items():
        bad = [v for v in values if not ok(v)]
        if bad or (not values and key != "plan.micro_batches"):
            raise ConfigError(f"{key}={values}: each value must be {what} (and the list "
                              "not empty)")
