"""Export a real tiny study as a production job and run it; confirm the finalists; a
second profile is a run of its own."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import uuid

import pytest

from autotune.study.schema.worker import stored_worker
from tests.conftest import ROOT, SHARED_HOST, project_env, read_events

STUDY = ["workload=gpt_tiny", "search=tiny", "sweep.study=real", "run.warmup_steps=1",
         "run.measure_steps=3", SHARED_HOST]


def autotune(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "autotune", *args], cwd=ROOT,
                          env=project_env(), capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def real_study(tmp_path_factory):
    runs = tmp_path_factory.mktemp("study") / "runs"
    common = [*STUDY, f"sweep.runs_dir={runs}", "sweep.progress=false"]
    # Nothing stopped as slow: a tiny model's steps scatter on a busy machine, and these
    # tests need two completed trials.
    proc = autotune("sweep", *common, "sweep.n_trials=2", "sweep.neighbours=true",
                    "sweep.stop.slow_ratio=0", "sweep.stop.slow_warmup_ratio=0")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return runs, common


@pytest.mark.slow
def test_exported_job_runs_from_its_files_alone(real_study, tmp_path):
    runs, common = real_study
    out = tmp_path / "export"
    proc = autotune("export", *common, f"export.out={out}")
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in out.iterdir()) == [
        "CHANGES.md", "README.md", "SHA256SUMS", "env.sh", "job.sbatch", "job.yaml",
        "launch.sh", "mindformers.yaml", "mindformers_train.yaml", "provenance.json",
        "requirements.txt", "src"]
    provenance = json.loads((out / "provenance.json").read_text())
    assert provenance["study"] == "real" and provenance["versions"]["mindspore"] == "2.10.0"
    assert provenance["metrics"]["tokens_per_s"] > 0 and provenance["fingerprint"]
    assert len(provenance["source"]["commit"]) == 40
    import yaml

    mf = yaml.safe_load((out / "mindformers.yaml").read_text())
    job = yaml.safe_load((out / "job.yaml").read_text())
    # Rule: the MindFormers keys carry the exported job's values, not just their names.
    assert mf["context"]["mode"] == (0 if job["runtime"]["mode"] == "graph" else 1)
    assert mf["context"]["jit_config"]["jit_level"] == job["runtime"]["jit_level"]
    assert mf["context"]["memory_optimize_level"] == job["runtime"]["memory_optimize_level"]
    assert mf["parallel_config"] == {"data_parallel": job["parallel"]["dp"],
                                     "model_parallel": job["parallel"]["mp"],
                                     "pipeline_stage": job["parallel"]["pp"],
                                     "micro_batch_num": 1}
    # MindFormers' global batch: batch_size x accumulation x data parallel.
    runner = mf["runner_config"]
    assert runner["batch_size"] * runner["gradient_accumulation_steps"] * \
        job["parallel"]["dp"] == job["train"]["global_batch"]
    assert mf["runner_wrapper"]["max_grad_norm"] == job["train"]["clip_norm"]
    assert mf["lr_schedule"]["learning_rate"] == job["train"]["lr"]
    assert mf["recompute_config"]["recompute"] is (job["train"]["recompute"] == "full")
    assert mf["train_dataset"]["num_parallel_workers"] == job["data"]["num_workers"]
    assert mf["model"]["model_config"]["compute_dtype"] == job["precision"]["dtype"]
    # The job must not depend on the study's run directory nor on this checkout: copied
    # away, it runs from elsewhere with no PYTHONPATH, on its own copy of the trial program.
    moved = tmp_path / "elsewhere"
    shutil.copytree(out, moved)
    job = run_copied_job(moved, "run.steps=3", "run.checkpoint_every=2", cwd=tmp_path)
    assert job.returncode == 0, job.stderr[-2000:]
    assert (moved / "src" / "trials" / "__pycache__").is_dir()  # it imported the job's copy
    [summary] = [line for line in job.stdout.splitlines() if line.startswith("job done:")]
    assert re.fullmatch(r"job done: steps 1-3 of 3 \(3 this run\), [\d,]+ tokens/s \(median "
                        r"step [\d.]+ s\), peak RSS [\d.]+ GiB, last checkpoint "
                        + re.escape(str(moved / "checkpoints" / "step-00000003.safetensors")),
                        summary), summary
    events = read_events(moved / "metrics.jsonl")
    assert [e["step"] for e in events if e["event"] == "step"] == [0, 1, 2]
    assert events[-1]["outcome"] == "ok"
    assert sorted(p.name for p in (moved / "checkpoints").iterdir()) == [
        "step-00000002.safetensors", "step-00000003.safetensors"]


def run_copied_job(job_dir, *overrides: str, cwd) -> subprocess.CompletedProcess:
    """``launch.sh`` of a copied job in a clean environment: no PYTHONPATH, nothing of this
    checkout but its interpreter, given as the job's Python (AUTOTUNE_PYTHON), and the
    tests' cache (a verified CPU peak, not code)."""
    env = {"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", str(cwd)),
           "AUTOTUNE_PYTHON": sys.executable,
           "AUTOTUNE_CACHE": project_env()["AUTOTUNE_CACHE"]}
    return subprocess.run(["bash", str(job_dir / "launch.sh"), *overrides], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


@pytest.mark.slow
def test_export_refuses_a_non_empty_directory(real_study, tmp_path):
    _, common = real_study
    out = tmp_path / "taken"
    out.mkdir()
    (out / "mine.txt").write_text("keep me")
    proc = autotune("export", *common, f"export.out={out}")
    assert proc.returncode == 2
    assert "export.overwrite=true" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert [p.name for p in out.iterdir()] == ["mine.txt"]
    proc = autotune("export", *common, f"export.out={out}", "export.overwrite=true")
    assert proc.returncode == 0 and (out / "job.yaml").exists()


@pytest.mark.slow
def test_confirm_measures_the_baseline_beside_the_finalists_and_export_follows_the_test(
        real_study, tmp_path):
    _, common = real_study
    proc = autotune("confirm", *common, "confirm.top_k=2", "confirm.repeats=2")
    assert proc.returncode == 0, proc.stderr
    # The study's two trials are the baseline and one more: its row is the only test (no
    # "top two" line repeating it).
    assert "top two" not in proc.stdout and "vs baseline (paired t-test)" in proc.stdout
    assert "(baseline) round 1" in proc.stdout
    import optuna

    runs = [c.split("=", 1)[1] for c in common if c.startswith("sweep.runs_dir=")][0]
    study = optuna.load_study(study_name="real", storage=f"sqlite:///{runs}/real/study.db")
    from autotune.commands.confirm import WIDE_INTERVAL
    from autotune.study.schema.confirm import confirm_verdicts

    confirmed = confirm_verdicts(study)
    assert 0 in confirmed  # the baseline, trial 0, is always re-measured
    wide = any(v.vs_baseline.high - v.vs_baseline.low > WIDE_INTERVAL
               for v in confirmed.values() if v.vs_baseline is not None)
    # 2 rounds: a wide interval is said to be too wide to read, a narrow one is not.
    assert ("rests on 2 round(s)" in proc.stdout) == wide, proc.stdout
    for number, verdict in confirmed.items():
        assert len(verdict.tokens_per_s) == 2
        assert verdict.min <= verdict.median <= verdict.max
        if number != 0:  # each finalist is tested against it, with the numbers kept
            test = verdict.vs_baseline
            assert test.rounds == 2 and 0 <= test.p_value <= 1
            assert test.low <= test.ratio <= test.high
    # The re-runs are kept as repeats of the trials, marked as confirm's (they compare
    # with each other; the baseline may also hold the sweep's re-measurements of it).
    from autotune.study.schema.repeats import stored_repeats

    repeats = stored_repeats(study)
    ran = {n: [r for r in repeats[n] if r.confirm] for n in confirmed}
    assert all(len(ran[n]) == 2 and ran[n][0].performance.step_times_s for n in confirmed)
    out = tmp_path / "export"
    proc = autotune("export", *common, f"export.out={out}")
    assert proc.returncode == 0
    best = max(confirmed, key=lambda k: confirmed[k].median)
    exported = json.loads((out / "provenance.json").read_text())["trial"]
    test = confirmed[best].vs_baseline
    if best == 0 or (test.real and test.ratio > 0):
        # ... or a configuration with fewer changes that the winner is not separable from.
        assert exported == best or "knob(s) where #" in proc.stdout
    else:  # the winner is not separable from the baseline: the baseline is exported
        assert exported == 0 and "within noise" in proc.stdout


# -- real MindSpore: every run a fresh measurement -------------------------------------------
# On the module's real study after the tests above (file order). A stopped confirm's
# resume is tests/study/test_confirm.py's (scripted trials: the rule is the orchestrator's).


@pytest.mark.slow
def test_a_second_profile_measures_anew(real_study):
    runs, common = real_study
    seen = []
    for _ in range(2):
        proc = autotune("profile", *common, "profile.trial=0", "profile.steps=3")
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
        out = runs / "real" / "profile" / "trial-0000"
        result = json.loads((out / "profile.json").read_text())
        lines = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
        seen.append((result["profile"]["step_s"], {line["run"] for line in lines}))
    # Rule: the second profile's metrics are its own run's (one run id, not the first's),
    # and its step time is a new measurement, not the first one read again.
    (first_s, first_ids), (second_s, second_ids) = seen
    assert len(first_ids) == 1 and len(second_ids) == 1 and first_ids != second_ids
    assert first_s != second_s


def _postgres_url(password: str) -> tuple[str, str]:
    import psycopg2

    name = f"autotune_test_{uuid.uuid4().hex[:8]}"
    try:
        con = psycopg2.connect(host="127.0.0.1", port=5432, user="postgres", dbname="postgres",
                               connect_timeout=3)
    except psycopg2.OperationalError as exc:
        pytest.skip(f"no PostgreSQL on 127.0.0.1:5432 ({exc})")
    con.autocommit = True
    con.cursor().execute(f"create database {name}")
    con.close()
    return name, f"postgresql+psycopg2://postgres:{password}@127.0.0.1:5432/{name}"


def test_storage_password_never_reaches_exported_files(harness, tmp_path):
    password = "s3cret-Pa55"
    name, url = _postgres_url(password)
    harness.script()
    space = harness.space("pg", {"train.micro_batches": [1, 2]})
    code, out, err = harness.run(space, f"sweep.storage={url}", "sweep.n_trials=2")
    assert code == 0, err
    assert password not in out and "postgres:***@" in out
    from autotune.cli import main

    export_dir = tmp_path / "export"
    code = main(["export", *harness.overrides(space, f"sweep.storage={url}"),
                 f"export.out={export_dir}"])
    assert code == 0
    for path in export_dir.rglob("*"):  # the job's files, its src/ copies and figures too
        if path.is_file():
            assert password.encode() not in path.read_bytes(), path
    assert "***" in (export_dir / "provenance.json").read_text()
    import psycopg2

    con = psycopg2.connect(host="127.0.0.1", user="postgres", dbname="postgres")
    con.autocommit = True
    con.cursor().execute(f"drop database if exists {name} with (force)")
    con.close()


def test_two_orchestrators_share_one_postgresql_study(harness):
    import json as _json

    import optuna

    name, url = _postgres_url("pw")
    space = harness.space("shared", {"train.micro_batches": [1, 2, 4],
                                     "runtime.threads": [2, 1], "data.num_workers": [1, 2]})
    argv = [sys.executable, "-m", "autotune", "sweep",
            *harness.overrides(space, f"sweep.storage={url}", "sweep.n_trials=6")]
    env = project_env(AUTOTUNE_FAKE=_json.dumps({"steps": 6, "step_sleep": 0.1}))
    workers = [subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outputs = [w.communicate(timeout=300) for w in workers]
    assert [w.returncode for w in workers] == [0, 0], outputs
    study = optuna.load_study(study_name="s", storage=url)
    trials = study.trials
    launched = [t for t in trials if t.user_attrs.get("launched")]
    # Rule: the budget is a total over workers; numbering is shared and never restarts.
    assert len(launched) == 6
    assert [t.number for t in trials] == list(range(len(trials)))
    assert len({stored_worker(t.user_attrs).pid for t in launched}) == 2  # both worked
    assert all(t.state.is_finished() for t in trials)
    import psycopg2

    con = psycopg2.connect(host="127.0.0.1", user="postgres", dbname="postgres")
    con.autocommit = True
    con.cursor().execute(f"drop database if exists {name} with (force)")
    con.close()
