"""``python -m autotune export``: the chosen trial as a production job that runs as it is,
in its own directory, away from this checkout.

Writes, into a directory put in place whole (autotune/export/atomic.py: an error or a
kill leaves the previous export, never half of one):

* ``job.yaml``: the trial's fully resolved config, switched to production mode (a user's
  workload: without the built-in GPT's dimensions and text-source keys);
* ``launch.sh``: the exact command for one node (msrun with the right worker count when
  the job has more than one device); a job larger than one node of its hardware profile
  (``hardware.devices`` are per node) runs it on every node, each taking its node rank
  and the first node's address from the environment or from SLURM;
* ``env.sh``, ``requirements.txt``: which Python runs the job and what it needs
  (autotune/export/environment.py);
* ``src/``: the job's own trial program and workload module, ``SHA256SUMS`` of them
  (autotune/export/carry.py);
* ``job.sbatch``: the same job for SLURM (``sbatch job.sbatch``), one msrun per node;
* ``mindformers.yaml``: the knobs under MindFormers' keys, or the user's own MindFormers
  config with them merged in (``export.mindformers_base``); only for a MindFormers-shaped
  model (the built-in GPT, the MindFormers workload);
* ``provenance.json``: study, trial, measured metrics with spread, versions, fingerprint,
  the source commit and the digests of the carried code;
* ``CHANGES.md``: what changed against the baseline, the measured gain, the caveats;
* ``soak.png``: the soak's figure, when this trial was soaked.
"""

from __future__ import annotations

import datetime as dt
import math
import platform
import re
from importlib import metadata
from pathlib import Path

import optuna
from omegaconf import OmegaConf

from autotune.export.carry import SRC
from autotune.export.environment import launch_environment
from autotune.plan.costmodel import CostModel
from autotune.plan.predict import memory_interval
from autotune.settings import ExportSettings, SweepSettings
from autotune.study import selection
from autotune.study import storage as S
from autotune.study.records import TrialRecord
from autotune.study.schema.fingerprint import stored_fingerprint
from autotune.study.schema.soak import soak_of
from trials.contract.launch import shell_script, trial_argv
from trials.contract.mindformers import ADAPTER_ENTRY
from trials.contract.performance import Performance
from trials.contract.schema import (
    ConfigError,
    DataConfig,
    RunMode,
    TrialConfig,
    memory_budget_gib,
)
from trials.contract.units import TOKENS


def predicted_headroom(job: TrialConfig, model: CostModel) -> dict | None:
    """The cost model's peak memory of the production job and its headroom (None for a
    user workload, whose dimensions the model does not know). ``model``: the study's
    (autotune/plan/fits.py), so the prediction uses that study's fit and names it."""
    prediction = model.predict_config(job)
    if prediction is None:
        return None
    budget = memory_budget_gib(job)
    return {"peak_gib": prediction.peak_gib, "budget_gib": budget,
            "headroom_gib": budget - prediction.peak_gib,
            # The interval the guard applies (held out), not the fit's in-sample residual:
            # a fit of 8 trials read "+-0 %".
            "uncertainty": memory_interval(),
            "constants": prediction.constants.source, "breakdown_gib": prediction.memory.gib()}


#: The soak's figure, copied into the job (the study's copy is the next soak's to overwrite).
SOAK_FIGURE = "soak.png"


def stability_note(study: optuna.Study, trial: int) -> tuple[str, bytes | None]:
    """The soak of this trial (``python -m autotune soak``), or how to run one; and the
    soak's figure, to be written beside it as :data:`SOAK_FIGURE`."""
    from autotune.soak.report import soak_section

    soak = soak_of(study, trial)
    figure = Path(soak.plot if soak is not None else "")
    data = figure.read_bytes() if figure.name and figure.is_file() else None
    section = soak_section(study, trial, plot=SOAK_FIGURE if data else None)
    if section:
        return "\n" + section, data
    return ("\n## Soak\n\nNot soaked yet: `python -m autotune soak soak.trial="
            f"{trial}` runs it 10x a trial's steps, kills it with SIGKILL part-way, resumes it "
            "and reports leaks, drift, spikes and whether the resume continued the loss.\n",
            None)


def headroom_note(headroom: dict | None, simulated: bool) -> str:
    lines = []
    if headroom is not None:
        lines.append(f"- Predicted peak memory per device {headroom['peak_gib']:.2f} GiB of "
                     f"{headroom['budget_gib']:g} GiB: headroom {headroom['headroom_gib']:.2f} "
                     f"GiB (+-{100 * headroom['uncertainty']:.0f} %, {headroom['constants']}).")
    if simulated:
        lines.append("- SIMULATED: this trial's numbers are the cost model's prediction with "
                     "noise, not a measurement. Run it for real before trusting them.")
    return "\n".join(lines) + ("\n" if lines else "")


def production_config(record: TrialRecord, options: ExportSettings) -> TrialConfig:
    """The trial's resolved config, switched to a long production run."""
    if record.run_dir is None or not record.run_dir.has_config():
        raise ConfigError(f"trial {record.number} has no config.yaml in its run directory "
                          f"({record.trial_dir}): export another export.trial=N")
    cfg = record.run_dir.read_config()
    cfg.run.mode = RunMode.production
    cfg.run.steps = options.steps
    cfg.run.checkpoint_every = options.checkpoint_every
    cfg.run.checkpoint_dir = "checkpoints"
    cfg.run.metrics_path = "metrics.jsonl"
    cfg.run.resume = True
    return cfg


#: The built-in GPT's keys, which a user's workload does not read (its own model and data).
GPT_WORKLOAD_KEYS = ("arch", "n_layers", "d_model", "n_heads", "kv_heads", "ffn_dim",
                     "seq_len", "vocab_size")
GPT_DATA_KEYS = ("source", "text_dir", "max_bytes")


def own_model(job: TrialConfig) -> bool:
    """A user's workload that is neither the built-in GPT nor the MindFormers workload (both
    transformer LMs on the GPT's data sources, with MindFormers keys)."""
    return bool(job.workload.entry) and job.workload.entry != ADAPTER_ENTRY


def job_yaml(job: TrialConfig) -> str:
    """job.yaml: the resolved config; for a user's own model, only the keys it reads (the
    trial program fills what is left out with the schema's defaults, which it ignores)."""
    node = OmegaConf.to_container(OmegaConf.structured(job), enum_to_str=True)
    if own_model(job):
        for key in GPT_WORKLOAD_KEYS:
            node["workload"].pop(key)
        default = DataConfig()
        if (job.data.source, job.data.text_dir) == (default.source, default.text_dir):
            for key in GPT_DATA_KEYS:  # the text source was never chosen: not this model's
                node["data"].pop(key)
    return OmegaConf.to_yaml(OmegaConf.create(node))


def mindformers_skipped(job: TrialConfig) -> str | None:
    """Why the job gets no mindformers.yaml (CHANGES.md says it), or None."""
    if not own_model(job):
        return None
    return (f"No mindformers.yaml: workload {job.workload.name} ({job.workload.entry}) is "
            "not a MindFormers model. MindFormers' YAML describes a MindFormers transformer "
            "(model_config, run_mindformer.py); this job runs on the trial program "
            "(launch.sh) with its own model and data.")


def job_nodes(job: TrialConfig) -> int:
    """Nodes the job spans: its devices over the profile's devices per node, rounded up."""
    return math.ceil(job.parallel.devices / job.hardware.devices)


def ranks_per_node(job: TrialConfig) -> int:
    """Ranks (devices) of the job on each node; ConfigError when they do not split evenly."""
    devices, nodes = job.parallel.devices, job_nodes(job)
    if devices % nodes:
        raise ConfigError(
            f"parallel devices {devices} (dp x mp x pp = {job.parallel.split}) need {nodes} "
            f"nodes of {job.hardware.devices} ({job.hardware.name}) but do not split evenly "
            "over them: msrun starts the same number of ranks on every node")
    return devices // nodes


def launch_script(job: TrialConfig, modules: list[str] = ()) -> str:
    """launch.sh: the trial program on job.yaml, through the same recipe as every trial;
    on several nodes, this node's share of the ranks (run on every node). ``modules``:
    the workload's, which the job's Python must find besides the trial program's."""
    nodes, per_node = job_nodes(job), ranks_per_node(job)
    argv = trial_argv("job.yaml", world_size=job.parallel.devices, python="$PY",
                      master_port="$MASTER_PORT", log_dir="msrun_log", nodes=nodes,
                      node_rank="$NODE_RANK", master_addr="$MASTER_ADDR" if nodes > 1
                      else "127.0.0.1", trial_script=f"{SRC}/trials/train.py")
    comment = ("Production job exported by autotune. Extra arguments are overrides,\n"
               "e.g. run.steps=5000. Re-running resumes from the latest checkpoint.\n"
               "It ends with one line: steps, throughput, peak memory, last checkpoint.")
    if nodes > 1:
        comment += (f"\nA job on {nodes} nodes ({per_node} devices each): run this on every "
                    "node, or `sbatch job.sbatch`.\n"
                    "Every node must see this directory (job.yaml, checkpoints/) at one path.\n"
                    "Node rank: NODE_RANK=... (else SLURM_NODEID, else 0); the first node's "
                    "address:\nMASTER_ADDR=... (else the SLURM job's first host, else "
                    "127.0.0.1).")
    if job.parallel.devices > 1:
        comment += "\nmsrun's master port: MASTER_PORT=... (default 8118)."
    return shell_script(argv, comment=comment,
                        environment=launch_environment(job, list(modules)))


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def sbatch_script(job: TrialConfig, *, study: str, trial: int) -> str:
    """job.sbatch: the job for SLURM, one ``launch.sh`` (one msrun) on each of its nodes."""
    nodes, per_node = job_nodes(job), ranks_per_node(job)
    backend = job.hardware.backend.value
    lines = [
        "#!/usr/bin/env bash",
        f"# Production job exported by autotune: trial {trial} of study {study}, "
        f"{_count(job.parallel.devices, 'device')}",
        f"# on {_count(nodes, 'node')} of {job.hardware.name}, {_count(per_node, 'device')} "
        f"per node (of its {job.hardware.devices}). Submit it from this directory:",
        "#     sbatch job.sbatch [overrides of job.yaml, e.g. run.steps=5000]",
        "# Every node must see this directory (job.yaml, checkpoints/) at one path.",
        f"#SBATCH --job-name=autotune-{re.sub(r'[^A-Za-z0-9_.-]', '-', study)}-trial{trial}",
        f"#SBATCH --nodes={nodes}",
        "# msrun is MindSpore's per-node launcher: one task (one msrun) per node starts",
        "# that node's ranks.",
        "#SBATCH --ntasks-per-node=1",
    ]
    if backend == "GPU":
        lines.append(f"#SBATCH --gpus-per-node={per_node}")
    elif backend == "Ascend":
        lines += ["# Clusters name NPUs differently (gres npu, davinci, ...): adapt and "
                  "uncomment.",
                  f"##SBATCH --gres=npu:{per_node}"]
    lines += [
        "# CPUs of each node's task (its ranks and their dataset workers); the partition's",
        "# default otherwise:",
        "##SBATCH --cpus-per-task=",
        "# Time limit (e.g. 24:00:00); the partition's default otherwise:",
        "##SBATCH --time=",
        "#SBATCH --output=slurm-%j.out",
        "# Requeued (a node failure, preemption), the job resumes from the latest checkpoint",
        "# in checkpoints/ (job.yaml: run.resume=true).",
        "#SBATCH --requeue",
        "",
        "set -euo pipefail",
        "if [ ! -f launch.sh ]; then",
        '  echo "job.sbatch: submit it from its own directory (cd EXPORT && sbatch '
        'job.sbatch)" >&2',
        "  exit 1",
        "fi",
        "# Every node's msrun meets the first node's at MASTER_ADDR:MASTER_PORT (sed reads",
        "# the whole host list: no SIGPIPE under pipefail).",
        'MASTER_ADDR="$(scontrol show hostnames "$SLURM_JOB_NODELIST" | sed -n 1p)"',
        'MASTER_PORT="${MASTER_PORT:-8118}"',
        "export MASTER_ADDR MASTER_PORT",
        "# Each node's rank is its SLURM_NODEID, which srun sets per node: a NODE_RANK",
        "# carried over from the submitting shell would give every node the same rank.",
        "unset NODE_RANK",
        'srun --ntasks-per-node=1 bash launch.sh "$@"',
    ]
    return "\n".join(lines) + "\n"


def provenance(study: optuna.Study, settings: SweepSettings, record: TrialRecord,
               why: str, *, source: dict | None = None) -> dict:
    """What the job came from. ``source``: the commit and digests of the carried code
    (autotune/export/carry.py)."""
    perf = record.perf
    versions = {}
    for package in ("mindspore", "optuna", "hydra-core", "omegaconf", "numpy"):
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            versions[package] = None
    versions["python"] = platform.python_version()
    return {
        "study": settings.study,
        "storage": S.redact(S.storage_url(settings)),
        "trial": record.number,
        "chosen_because": why,
        "params": record.params,
        "metrics": {
            # THE tokens/s of the trial: the leaderboard's and the report's figure.
            Performance.TOKENS_PER_S: record.standing,
            "tokens_per_s_is": selection.throughput_label(perf.unit),
            "unit": perf.unit or TOKENS,
            # The trial's own run: step times behind it, and its MFU.
            "step_time_median_s": perf.step_time_median_s,
            "step_time_p10_s": perf.step_time_p10_s,
            "step_time_p90_s": perf.step_time_p90_s,
            "step_time_cv": perf.step_time_cv,
            "mfu": perf.mfu,
            "peak_memory_gib": record.peak_memory_gib,
            "confirmed_tokens_per_s": record.confirmed_tokens_per_s,
            "confirmed_is": selection.CONFIRMED_LABEL,
            "confirmed": record.confirmed.to_json() if record.confirmed else None,
        },
        "versions": versions,
        "source": source,
        "hardware_profile": stored_fingerprint(study)[1].hardware or None,
        "fingerprint": stored_fingerprint(study)[0],
        "host": platform.node(),
        "exported_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
    }


EXPORT_README = """# Production job: trial {trial} of study {study}
{measured}
    bash launch.sh                      # run (resumes from checkpoints/ when re-run)
    bash launch.sh run.steps=5000       # any override of job.yaml
    sbatch job.sbatch                   # the same on SLURM (submit from this directory)

The directory is the whole job: copy it anywhere and run it there. It needs a Python with
the packages of `requirements.txt` (`env.sh` says how to make one, e.g.
`python3 -m venv .venv && .venv/bin/pip install -r requirements.txt`), or an existing one:
`AUTOTUNE_PYTHON=/path/to/python bash launch.sh`. The job ends with one line: steps,
throughput (tokens/s or samples/s), peak memory and the last checkpoint.

- `launch.sh`: the command for one node. A job with more devices than one node of its
  hardware profile runs it on every node (see its header): each takes its node rank and
  the first node's address from NODE_RANK / MASTER_ADDR, else from SLURM. It names, in
  one line, a module the chosen Python cannot find.
- `env.sh`, `requirements.txt`: which Python runs the job (AUTOTUNE_PYTHON, else the
  nearest `.venv/` here or in a directory above, else `python3`) and the package versions
  the study measured with.
- `src/`: the job's own copy of the trial program (`src/trials/`) and of your workload's
  module, first on PYTHONPATH; `sha256sum -c SHA256SUMS` checks them against the export.
- `job.sbatch`: the SLURM job: its nodes, one msrun per node (`srun bash launch.sh`);
  requeued, it resumes from checkpoints/.
- `job.yaml`: the resolved configuration (schema: src/trials/contract/schema.py),
  production mode.
{mindformers}\
- `provenance.json`: where it came from (the source commit, whether the tree was dirty, the
  sha256 of the trial program and the workload) and what was measured.
- `CHANGES.md`: what changed against the baseline, and what to watch out for.
"""

MINDFORMERS_README = """\
- `mindformers.yaml`: the same job for MindFormers (`run_mindformer.py --config
  mindformers.yaml`): your config with the tuned values merged in when the export was
  given one (`export.mindformers_base=YOUR.yaml`), else a fragment of the tuned keys.
  CHANGES.md lists each change and the knobs MindFormers cannot carry as measured. On the
  CPU, `python -m trials.mindformers_run mindformers.yaml` (autotune's MindFormers
  environment) trains it with MindFormers' Trainer and a CPU overflow check.
"""


def export_readme(job: TrialConfig, *, trial: int, study: str, throughput: str = "",
                  why: str = "") -> str:
    """README.md of the job (the soak section goes after it); ``throughput``: the figure
    the trial was chosen on, labelled ("1,234 samples/s in the sweep"); ``why``: the
    study's sentence on its pick (autotune/study/story.py)."""
    measured = f"\nMeasured: {throughput}.\n" if throughput else ""
    measured += f"\nWhy this trial: {why}.\n" if why else ""
    return EXPORT_README.format(trial=trial, study=study, measured=measured, mindformers=""
                                if mindformers_skipped(job) else MINDFORMERS_README)
