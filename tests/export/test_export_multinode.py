"""A job larger than one node: msrun's multi-node argv, launch.sh on every node, job.sbatch.

No MindSpore runs: the generated scripts run for real under bash with fake ``msrun``,
``scontrol`` and ``srun`` on PATH that record what they were given.
"""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest

from autotune.export.atomic import write_atomically
from autotune.export.environment import env_script
from autotune.export.job import (
    export_readme,
    job_nodes,
    launch_script,
    sbatch_script,
)
from trials.contract.compose import compose
from trials.contract.launch import TRIAL_SCRIPT, msrun_argv, shell_script, trial_argv
from trials.contract.schema import ConfigError, TrialConfig, to_trial_config


def job(*overrides: str) -> TrialConfig:
    return to_trial_config(compose("trial", list(overrides)))


#: 16 devices on gpu_a100, whose profile has 8 per node: two nodes.
BIG = ("hardware=gpu_a100", "parallel.dp=16", "train.global_batch=32")


def test_msrun_argv_on_two_nodes_splits_the_ranks_and_names_the_node():
    argv = msrun_argv("train.py", 16, nodes=2, node_rank=1, master_addr="node-a",
                      master_port=8200, log_dir="logs")
    assert argv == ["msrun", "--worker_num=16", "--local_worker_num=8", "--node_rank=1",
                    "--master_addr=node-a", "--master_port=8200", "--join=True",
                    "--log_dir=logs", "train.py"]
    # Shell placeholders pass through as words for a script to expand.
    argv = msrun_argv("t.py", 4, nodes=4, node_rank="$NODE_RANK", master_addr="$MASTER_ADDR",
                      master_port="$MASTER_PORT")
    assert argv[1:5] == ["--worker_num=4", "--local_worker_num=1", "--node_rank=$NODE_RANK",
                         "--master_addr=$MASTER_ADDR"]


def test_one_node_argv_is_unchanged():
    expected = ["msrun", "--worker_num=4", "--local_worker_num=4", "--master_addr=127.0.0.1",
                "--master_port=9000", "--join=True", "--log_dir=l", "s.py"]
    assert msrun_argv("s.py", 4, master_port=9000, log_dir="l") == expected
    assert msrun_argv("s.py", 4, nodes=1, node_rank=3, master_port=9000, log_dir="l") == expected
    port = msrun_argv("s.py", 2)[4]  # a free port of this machine when none is given
    assert port.startswith("--master_port=") and int(port.split("=")[1]) > 0
    assert trial_argv("c.yaml", world_size=1, python="py") == [
        "py", "-m", "trials.train", "--config", "c.yaml"]


def test_several_nodes_always_go_through_msrun():
    argv = trial_argv("c.yaml", world_size=2, nodes=2, node_rank=0, master_port=8118,
                      master_addr="node-a", python="py", overrides=["run.steps=3"])
    assert argv[0] == "msrun" and "--local_worker_num=1" in argv and "--node_rank=0" in argv
    assert argv[-4:] == [str(TRIAL_SCRIPT), "--config", "c.yaml", "run.steps=3"]


@pytest.mark.parametrize("world_size, nodes", [(9, 2), (1, 2), (8, 0)])
def test_ranks_that_do_not_split_over_the_nodes_are_refused(world_size, nodes):
    with pytest.raises(ValueError, match="nodes"):
        msrun_argv("s.py", world_size, nodes=nodes, master_port=8118)


def test_several_nodes_need_one_agreed_master_port():
    # A free port picked on one node says nothing of the others.
    with pytest.raises(ValueError, match="master_port"):
        msrun_argv("s.py", 16, nodes=2, master_addr="node-a")


def test_nodes_are_the_devices_over_the_profiles_devices_per_node():
    assert job_nodes(job(*BIG)) == 2
    assert job_nodes(job("hardware=gpu_a100", "parallel.dp=8")) == 1
    assert job_nodes(job("hardware=gpu_a100", "parallel.dp=4", "parallel.mp=3",
                         "train.global_batch=8")) == 2  # 12 devices: 6 on each of 2
    with pytest.raises(ConfigError, match="split evenly"):
        launch_script(job("hardware=gpu_a100", "parallel.dp=9", "train.global_batch=18"))


def test_a_one_node_launch_script_has_no_node_logic():
    cfg = job("hardware=cpu", "parallel.dp=2")
    text = launch_script(cfg)
    assert "--worker_num=2 --local_worker_num=2 --master_addr=127.0.0.1" in text
    assert "node_rank" not in text and "SLURM" not in text and "NODE_RANK" not in text
    argv = trial_argv("job.yaml", world_size=2, python="$PY", master_port="$MASTER_PORT",
                      log_dir="msrun_log", trial_script="src/trials/train.py")
    assert text.endswith(shell_script(argv).splitlines()[-1] + "\n")


# --- the scripts run under bash, with fakes on PATH -------------------------------------

def fake_bin(tmp_path: Path) -> Path:
    """msrun and scontrol that record their arguments; srun that runs its command once
    per node of a two-node job, as SLURM does, with that node's SLURM_NODEID."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    scripts = {
        "msrun": 'printf "%s\\n" "$@" > "$CALLS/msrun.$$"\n',
        "scontrol": 'echo "$*" >> "$CALLS/scontrol"\nprintf "gpu-07\\ngpu-08\\n"\n',
        "srun": ('echo "$*" >> "$CALLS/srun"\n'
                 'while [ "${1#--}" != "$1" ]; do shift; done\n'
                 'for node in 0 1; do SLURM_NODEID=$node "$@"; done\n'),
        "python": "exit 0\n",
    }
    for name, body in scripts.items():
        path = bin_dir / name
        path.write_text("#!/usr/bin/env bash\nset -eu\n" + body)
        path.chmod(0o755)
    return bin_dir


def export_dir(tmp_path: Path, cfg: TrialConfig) -> Path:
    out = tmp_path / "export"
    write_atomically(out, {"job.yaml": "run: {}\n", "launch.sh": launch_script(cfg),
                           "env.sh": env_script(cfg),
                           "job.sbatch": sbatch_script(cfg, study="big", trial=7)},
                     overwrite=False)
    return out


def run_script(tmp_path: Path, script: Path, *args: str, **env: str
               ) -> tuple[subprocess.CompletedProcess, list[list[str]]]:
    bin_dir = tmp_path / "bin" if (tmp_path / "bin").exists() else fake_bin(tmp_path)
    calls = tmp_path / "calls"
    if calls.exists():
        for old in calls.iterdir():
            old.unlink()
    calls.mkdir(exist_ok=True)
    # AUTOTUNE_PYTHON's directory goes first on PATH in launch.sh: the fake one keeps the
    # venv's real msrun out of reach.
    base = {"PATH": f"{bin_dir}{os.pathsep}/usr/bin{os.pathsep}/bin", "CALLS": str(calls),
            "AUTOTUNE_PYTHON": str(bin_dir / "python"), "HOME": str(tmp_path)}
    proc = subprocess.run(["bash", script.name, *args], cwd=script.parent,
                          env={**base, **env}, capture_output=True, text=True, timeout=30)
    runs = [p.read_text().splitlines() for p in sorted(calls.glob("msrun.*"))]
    return proc, runs


def flag(argv: list[str], name: str) -> str:
    values = [a.split("=", 1)[1] for a in argv if a.startswith(f"--{name}=")]
    assert len(values) == 1, (name, argv)
    return values[0]


def test_the_exported_scripts_are_valid_bash_and_executable(tmp_path):
    out = export_dir(tmp_path, job(*BIG))
    for name in ("launch.sh", "job.sbatch"):
        check = subprocess.run(["bash", "-n", str(out / name)], capture_output=True, text=True)
        assert check.returncode == 0, (name, check.stderr)
        assert (out / name).stat().st_mode & stat.S_IXUSR, name


def test_launch_sh_on_a_slurm_node_takes_its_rank_and_the_first_host(tmp_path):
    out = export_dir(tmp_path, job(*BIG))
    text = (out / "launch.sh").read_text()
    assert "run this on every node, or `sbatch job.sbatch`" in text
    proc, runs = run_script(tmp_path, out / "launch.sh", "run.steps=5",
                            SLURM_NODEID="1", SLURM_JOB_NODELIST="gpu-[07-08]")
    assert proc.returncode == 0, proc.stderr
    [argv] = runs
    assert flag(argv, "worker_num") == "16" and flag(argv, "local_worker_num") == "8"
    assert flag(argv, "node_rank") == "1" and flag(argv, "master_addr") == "gpu-07"
    assert flag(argv, "master_port") == "8118" and flag(argv, "join") == "True"
    assert argv[-3:] == ["--config", "job.yaml", "run.steps=5"]
    assert (tmp_path / "calls" / "scontrol").read_text().split() == [
        "show", "hostnames", "gpu-[07-08]"]


def test_launch_sh_takes_the_environment_first_and_runs_alone_outside_slurm(tmp_path):
    out = export_dir(tmp_path, job(*BIG))
    proc, [argv] = run_script(tmp_path, out / "launch.sh")
    assert proc.returncode == 0, proc.stderr
    assert flag(argv, "node_rank") == "0" and flag(argv, "master_addr") == "127.0.0.1"
    assert not (tmp_path / "calls" / "scontrol").exists()
    proc, [argv] = run_script(tmp_path, out / "launch.sh", NODE_RANK="1",
                              MASTER_ADDR="10.0.0.5", MASTER_PORT="9100", SLURM_NODEID="0",
                              SLURM_JOB_NODELIST="gpu-[07-08]")
    assert proc.returncode == 0, proc.stderr
    assert flag(argv, "node_rank") == "1" and flag(argv, "master_addr") == "10.0.0.5"
    assert flag(argv, "master_port") == "9100"
    assert not (tmp_path / "calls" / "scontrol").exists()


def test_job_sbatch_runs_one_msrun_per_node_meeting_at_the_first_host(tmp_path):
    out = export_dir(tmp_path, job(*BIG))
    text = (out / "job.sbatch").read_text()
    directives = [line for line in text.splitlines() if line.startswith("#SBATCH ")]
    assert directives == ["#SBATCH --job-name=autotune-big-trial7", "#SBATCH --nodes=2",
                          "#SBATCH --ntasks-per-node=1", "#SBATCH --gpus-per-node=8",
                          "#SBATCH --output=slurm-%j.out", "#SBATCH --requeue"]
    # sbatch reads directives only up to the first command.
    first_command = next(i for i, line in enumerate(text.splitlines()[1:], 1)
                         if line.strip() and not line.startswith("#"))
    assert all(not line.startswith("#SBATCH") for line in text.splitlines()[first_command:])
    # A NODE_RANK left in the submitting shell must not give both nodes one rank.
    proc, runs = run_script(tmp_path, out / "job.sbatch", "run.steps=9", NODE_RANK="0",
                            SLURM_JOB_NODELIST="gpu-[07-08]")
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "calls" / "srun").read_text().split() == [
        "--ntasks-per-node=1", "bash", "launch.sh", "run.steps=9"]
    assert sorted(flag(argv, "node_rank") for argv in runs) == ["0", "1"]
    for argv in runs:
        assert flag(argv, "master_addr") == "gpu-07" and flag(argv, "master_port") == "8118"
        assert flag(argv, "local_worker_num") == "8" and argv[-1] == "run.steps=9"


def test_job_sbatch_refuses_to_run_away_from_its_directory(tmp_path):
    out = export_dir(tmp_path, job(*BIG))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "job.sbatch").write_text((out / "job.sbatch").read_text())
    proc, runs = run_script(tmp_path, elsewhere / "job.sbatch",
                            SLURM_JOB_NODELIST="gpu-[07-08]")
    assert proc.returncode == 1 and "its own directory" in proc.stderr and runs == []


def test_one_node_jobs_get_a_job_sbatch_too(tmp_path):
    out = export_dir(tmp_path, job("hardware=cpu", "parallel.dp=2"))
    text = (out / "job.sbatch").read_text()
    assert "#SBATCH --nodes=1\n" in text and "gpus-per-node" not in text
    assert "gres" not in text
    proc, runs = run_script(tmp_path, out / "job.sbatch", SLURM_JOB_NODELIST="cpu-01")
    assert proc.returncode == 0, proc.stderr
    for argv in runs:  # the fake srun runs it twice; one node needs no rank
        assert flag(argv, "worker_num") == "2" and "--node_rank" not in " ".join(argv)


def test_ascend_jobs_carry_the_npu_request_as_a_hint():
    text = sbatch_script(job("hardware=ascend_910b", "parallel.dp=16",
                             "train.global_batch=32"), study="s", trial=1)
    assert "#SBATCH --nodes=2\n" in text and "##SBATCH --gres=npu:8\n" in text
    assert "#SBATCH --gpus-per-node" not in text and "name NPUs differently" in text


def test_the_export_readme_names_job_sbatch():
    text = export_readme(job(), trial=3, study="s")
    assert "sbatch job.sbatch" in text and "every node" in text
