"""SLURM as the trial launcher (``sweep.launcher=slurm``), through submitit.

Each trial is one SLURM job of N nodes with one task per node. Each task runs
:class:`NodeTask`, which starts the node's ``msrun`` (MindSpore's per-node
launcher) with the node rank SLURM gave it and the job's first host as the
master; a one-node trial of one device runs the trial program directly. The
orchestrator follows the trial through its metrics file on the shared
filesystem, as locally, and through the job's state; a stop cancels the job.

Why submitit (facebookincubator/submitit, the library under Hydra's own
hydra-submitit-launcher): it writes the sbatch script from named parameters,
submits it, reads job states through ``sacct``, cancels through ``scancel`` and
gives each task its node rank and the job's host list (``JobEnvironment``). Those
are the parts a hand-written launcher gets wrong by parsing ``sbatch``,
``squeue`` and host-list syntax (``node[01-04,07]``) itself. Its cost: it needs
SLURM accounting (``sacct``), which every production cluster has and which
``.ci/slurm-up`` sets up (slurmdbd). We use only its plumbing, not its pickled
results: outcomes come from our metrics file and the job's state.

How SLURM's end of a job maps onto autotune's outcomes (:func:`slurm_outcome`):
out of memory -> ``oom``; time limit -> ``timeout``; node failure or preemption
-> retried once with a new job, then ``crash``; cancelled by anyone but this
orchestrator -> ``crash`` naming who.
"""

from __future__ import annotations

import math
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass

from autotune.running.devices import UNPLACED, Placement
from autotune.running.job import FollowedFile, TrialJob
from autotune.running.launcher import kill_marked
from autotune.settings import SlurmSettings
from autotune.study.reaping import worker_identity
from autotune.study.schema.worker import TrialProcess
from trials.contract.launch import trial_argv, trial_env
from trials.contract.outcomes import Outcome
from trials.contract.schema import ConfigError, TrialConfig
from trials.contract.trial_dir import TrialDir

#: Seconds between two reads of a job's state (each is one ``sacct`` call).
POLL_S = 1.0
#: Job states in which the job has not ended (it may still be queued).
ACTIVE = {"PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "REQUEUED", "REQUEUE_HOLD",
          "REQUEUE_FED", "RESIZING", "SUSPENDED", "SIGNALING", "STAGE_OUT", "STOPPED",
          "UNKNOWN", "READY"}
QUEUED = {"PENDING", "CONFIGURING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "UNKNOWN",
          "READY"}
#: Ends that say nothing about the configuration: the node, not the trial, failed.
LOST_TO_THE_NODE = {"NODE_FAIL", "PREEMPTED", "BOOT_FAIL"}
TIMEOUT_S = 30


def _run(argv: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT_S)


def check_cluster(settings: SlurmSettings) -> None:
    """Before anything is submitted: SLURM answers, the partition exists, accounting
    works. A ConfigError naming the fix otherwise."""
    if shutil.which("sinfo") is None or shutil.which("sbatch") is None:
        raise ConfigError("sweep.launcher=slurm, but no SLURM client (sinfo, sbatch) is on "
                          "PATH here: run the sweep on a login node of the cluster, or use "
                          "sweep.launcher=local")
    try:
        info = _run(["sinfo", "-h", "-o", "%R"])
    except subprocess.TimeoutExpired:
        info = None
    if info is None or info.returncode != 0:
        why = "no answer" if info is None else (info.stderr.strip().splitlines() or ["?"])[0]
        raise ConfigError(f"sweep.launcher=slurm, but the SLURM controller is not reachable "
                          f"(sinfo: {why}); start it (.ci/slurm-up on one machine) or use "
                          "sweep.launcher=local")
    partitions = sorted({p.strip() for p in info.stdout.split() if p.strip()})
    if settings.partition and settings.partition not in partitions:
        raise ConfigError(f"sweep.slurm.partition={settings.partition!r} does not exist on "
                          f"this cluster; partitions: {', '.join(partitions) or 'none'}")
    acct = _run(["sacct", "-n", "-X", "-j", "1", "-o", "JobID"])
    if acct.returncode != 0:
        why = (acct.stderr.strip().splitlines() or ["?"])[0]
        raise ConfigError(f"sweep.launcher=slurm needs SLURM accounting to read job states "
                          f"(sacct: {why}); ask the admins for slurmdbd (.ci/slurm-up sets "
                          "it up on one machine)")


def nodes_for(devices: int, devices_per_node: int) -> int:
    return max(1, math.ceil(devices / devices_per_node))


@dataclass
class NodeTask:
    """What each node's task of a trial's job runs (pickled by submitit, run on the node):
    the node's msrun, with the node rank and master address SLURM gives the job."""

    config: str
    trial_dir: str
    marker: str
    world_size: int
    nodes: int
    trial_command: list
    python: str
    overrides: tuple = ()

    def __call__(self) -> int:
        import submitit

        job = submitit.JobEnvironment()
        run_dir = TrialDir(self.trial_dir)
        # msrun's master listens on the first node; a port from the job id keeps the
        # nodes agreed without talking, and two jobs on one node apart.
        port = 20000 + int(job.job_id.split("_")[0]) % 20000
        argv = trial_argv(self.config, world_size=self.world_size, nodes=self.nodes,
                          node_rank=job.node, master_addr=job.hostnames[0], master_port=port,
                          trial_command=self.trial_command, python=self.python,
                          log_dir=run_dir.msrun_log, overrides=self.overrides)
        suffix = "" if job.node == 0 else f".node{job.node}"
        with open(run_dir.path / f"stdout{suffix}.log", "ab") as out, \
                open(run_dir.path / f"stderr{suffix}.log", "ab") as err:
            return subprocess.call(argv, cwd=run_dir.path, stdout=out, stderr=err,
                                   stdin=subprocess.DEVNULL,
                                   env=trial_env(os.environ, marker=self.marker,
                                                 python=self.python))


def job_parameters(settings: SlurmSettings, cfg: TrialConfig, name: str) -> dict:
    """The submitit (sbatch) parameters of one trial's job."""
    devices = cfg.parallel.devices
    nodes = nodes_for(devices, cfg.hardware.devices)
    per_node = devices // nodes
    params = {"job_name": name, "nodes": nodes, "ntasks_per_node": 1,
              "cpus_per_task": per_node * settings.cpus_per_device, "time": settings.time_min,
              # A preempted trial is retried by the orchestrator as a new job it can see,
              # not silently requeued by SLURM under the same id.
              "additional_parameters": {"no-requeue": True, **settings.extra}}
    if cfg.hardware.backend == "GPU":
        params["gpus_per_node"] = per_node
    for key in ("partition", "account", "qos"):
        if getattr(settings, key):
            params[key] = getattr(settings, key)
    if settings.mem_gib:
        params["mem"] = f"{int(settings.mem_gib * 1024)}M"
    if settings.setup:
        params["setup"] = list(settings.setup)
    return params


def slurm_outcome(state: str, *, cancelled_by_us: bool, time_min: int
                  ) -> tuple[Outcome, str, bool] | None:
    """What a finished job's state says about the trial: (outcome, detail, retry once), or
    None when the state says nothing beyond the trial's own end record and exit code."""
    word = state.split()[0] if state else ""
    if word == "OUT_OF_MEMORY":
        return Outcome.OOM, "SLURM ended the job: out of memory (OUT_OF_MEMORY)", False
    if word == "TIMEOUT":
        return Outcome.TIMEOUT, (f"SLURM ended the job at its time limit (sweep.slurm.time_min="
                                 f"{time_min}); raise it or lower the trial's steps"), False
    if word in LOST_TO_THE_NODE:
        return Outcome.CRASH, f"the job's node was lost ({state}), not the configuration", True
    if word == "CANCELLED" and not cancelled_by_us:
        return Outcome.CRASH, (f"the job was cancelled outside autotune ({state}: scancel by "
                               "that user id, or an administrator)"), False
    return None


class SlurmTrial(FollowedFile):
    """One trial's job, followed like a local process (see job.RunningTrial): its records
    come from the metrics file on the shared filesystem, its end from the job's state."""

    def __init__(self, job: TrialJob, slurm_job, marker: str, time_min: int) -> None:
        super().__init__(job, marker)
        self.slurm_job = slurm_job  # submitit's handle
        self.time_min = time_min
        self.started: float | None = None
        self.state = "PENDING"
        self._cancelled_by_us = False
        self._read_at = 0.0

    @property
    def job_id(self) -> str:
        return str(self.slurm_job.job_id)

    def _refresh(self) -> None:
        now = time.monotonic()  # the follow loop's clock (FollowedFile.now)
        if now - self._read_at < POLL_S:
            return
        self._read_at = now
        self.state = self.slurm_job.get_info(mode="force").get("State", "UNKNOWN") or "UNKNOWN"
        if self.started is None and self.state.split()[0] not in QUEUED:
            self.started = now

    def poll(self) -> int | None:
        """None while the job is queued or running; its exit code once it ended."""
        self._refresh()
        if self.state.split()[0] in ACTIVE:
            return None
        return 0 if self.state == "COMPLETED" else 1

    def stop(self, grace_s: float = 2.0) -> None:
        self._cancelled_by_us = True
        _run(["scancel", self.job_id])
        self.cleanup()

    def kill(self) -> None:
        """SIGKILL every process of the job at once, as a crashed node would."""
        self._cancelled_by_us = True
        _run(["scancel", "--signal=KILL", "--full", self.job_id])
        _run(["scancel", self.job_id])
        self.cleanup()

    def cleanup(self) -> None:
        # A one-host cluster (and a node shared with the orchestrator): its leftovers here.
        kill_marked(self.marker)

    def verdict(self) -> tuple[Outcome, str, bool] | None:
        state = self.state
        if state.split()[0] == "FAILED":
            # Work runs in a job step (srun): the memory kill shows on the step's row
            # (``123.0 OUT_OF_MEMORY``) while the job's own row says FAILED.
            steps = _run(["sacct", "-n", "-P", "-j", self.job_id, "-o", "State"]).stdout.split()
            if "OUT_OF_MEMORY" in steps:
                state = "OUT_OF_MEMORY"
        return slurm_outcome(state, cancelled_by_us=self._cancelled_by_us,
                             time_min=self.time_min)

    def record(self) -> TrialProcess:
        return TrialProcess(host=worker_identity().host, marker=self.marker,
                            slurm_job=self.job_id)


class SlurmRunner:
    """Trials as SLURM jobs (``sweep.launcher=slurm``): one job of N nodes per run, whatever
    runs it (the sweep, racing, confirm, profile, soak). The cluster gives the devices, so a
    placement is not used."""

    def __init__(self, settings: SlurmSettings, study: str, program: list[str]) -> None:
        self.settings = settings
        self.study = study
        self.program = list(program)

    def start(self, job: TrialJob, placement: Placement = UNPLACED) -> SlurmTrial:
        import submitit

        job.prepare()
        marker = job.new_marker()
        executor = submitit.SlurmExecutor(folder=job.dir.slurm, python=sys.executable)
        name = "autotune-" + job.name.replace("/", "-")
        executor.update_parameters(**job_parameters(self.settings, job.cfg, name))
        world = job.world_size
        task = NodeTask(config=str(job.dir.config), trial_dir=str(job.dir.path), marker=marker,
                        world_size=world, nodes=nodes_for(world, job.cfg.hardware.devices),
                        trial_command=list(self.program), python=sys.executable,
                        overrides=tuple(job.overrides))
        return SlurmTrial(job, executor.submit(task), marker, self.settings.time_min)


def cancel_job(job_id: str) -> int:
    """Cancel a job a lost orchestrator left behind; 1 if it was still there."""
    try:
        alive = _run(["squeue", "-h", "-j", job_id, "-o", "%i"])
    except (OSError, subprocess.TimeoutExpired):
        return 0
    if alive.returncode != 0 or not alive.stdout.strip():
        return 0
    _run(["scancel", job_id])
    return 1
