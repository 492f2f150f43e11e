"""``python -m autotune soak``: the stability analysis on synthetic steps, the soak's pure
pieces, and one real soak (MindSpore on the CPU) with an injected leak, a kill -9 and a
resume."""

from __future__ import annotations

import json
import math
from types import SimpleNamespace

import numpy as np
import pytest
from scipy import stats

from autotune.commands import soak
from autotune.soak import attempts as soak_attempts
from autotune.soak import plan as soak_plan
from autotune.soak import stability
from autotune.soak.stability import analyse, resume_check
from autotune.stages.verdicts import soak_issues
from autotune.study.schema.soak import SoakVerdict, last_soak, store_soak
from tests.export.test_export_confirm import STUDY, autotune
from trials.contract.events import Phase, StepRecord
from trials.contract.schema import ConfigError

MIB = 1 / 1024  # GiB


def steps(n: int, *, start: int = 0, loss=None, rss=None, step_s=None, seed: int = 0,
          **flags) -> list[StepRecord]:
    """Synthetic production steps: ``loss``/``rss``/``step_s`` are functions of the step
    (rss in GiB); ``flags``: step -> dict of overflow/updated/clipped."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(start, start + n):
        out.append(StepRecord(
            step=i, phase=Phase.COMPILE if i == start else Phase.TRAIN,
            loss=loss(i) if loss else 3.0 + 0.05 * rng.standard_normal(),
            grad_norm=1.0, step_s=step_s(i) if step_s else 0.03 * (1 + 0.02 * rng.random()),
            data_wait_s=0.0, tokens=256, peak_rss_gib=1.0,
            rss_gib=rss(i) if rss else 0.5 + 0.2 * MIB * rng.standard_normal(),
            **flags.get(str(i), {})))
    return out


def judge(records, **kw):
    return analyse(records, spike_factor=stability.SPIKE_FACTOR,
                   leak_mib_per_100_steps=20.0, tokens_per_step=None, **kw)


# -- memory -----------------------------------------------------------------------------------
def test_an_injected_leak_is_detected_with_its_slope():
    rng = np.random.default_rng(1)
    noise = rng.standard_normal(300) * 0.5 * MIB
    r = judge(steps(300, rss=lambda i: 0.5 + 2 * MIB * i + noise[i]))
    m = r.memory
    assert m.leak and r.flags.leak
    assert m.slope_low <= 200 <= m.slope_high and m.slope_low > 150
    assert any(v.startswith("host memory: LEAK: +200") for v in stability.verdicts(r))


def test_flat_rss_with_noise_and_warmup_growth_is_no_leak():
    rng = np.random.default_rng(2)
    noise = rng.standard_normal(300) * 1.0 * MIB
    # The dataset and allocator warm up over the first 20 steps (+60 MiB), then RSS is flat.
    r = judge(steps(300, rss=lambda i: 0.5 + min(i, 20) * 3 * MIB + noise[i]))
    m = r.memory
    assert m.judged and not m.leak
    assert abs(m.slope_mib_per_100_steps) < 5 and m.slope_low < 20
    assert any(v.startswith("host memory: no leak") for v in stability.verdicts(r))


def test_memory_is_fitted_within_each_process_across_a_restart():
    # Each process leaks 2 MiB/step from its own, reset, baseline: the sawtooth across the
    # restart must not hide the slope.
    first = steps(120, rss=lambda i: 0.5 + 2 * MIB * i)
    second = steps(120, start=100, rss=lambda i: 0.5 + 2 * MIB * (i - 100))
    stitched = [s for s in first if s.step < 100] + second
    pooled = judge(stitched, restarts=[100]).memory
    assert pooled.processes == 2 and pooled.leak
    assert pooled.slope_mib_per_100_steps == pytest.approx(200, rel=0.01)


def test_blocked_theil_sen_is_scipys_for_one_block():
    rng = np.random.default_rng(3)
    x = np.arange(60, dtype=float)
    y = 0.7 * x + rng.standard_normal(60).round(1)  # rounded: ties, as RSS in KiB has
    ours = stability.blocked_theil_sen([(x, y)])
    ref = stats.theilslopes(y, x, alpha=0.95)
    assert (ours.slope, ours.low, ours.high) == pytest.approx(
        (ref.slope, ref.low_slope, ref.high_slope))


# -- loss -------------------------------------------------------------------------------------
def test_loss_spikes_are_counted_where_they_happen():
    base = steps(200, loss=lambda i: 5 * math.exp(-i / 30) + 2.5 + 0.05 * math.sin(i))
    spiked = [s if s.step not in (60, 150) else StepRecord(**{**s.__dict__, "loss": 3 * s.loss})
              for s in base]
    r = judge(spiked)
    assert r.loss.spikes == 2 and r.loss.spike_steps == [60, 150]
    assert r.flags.spikes


def test_a_fast_falling_loss_has_no_spikes():
    r = judge(steps(200, loss=lambda i: 8 * math.exp(-i / 10) + 2.0 + 0.03 * math.cos(i)))
    assert r.loss.spikes == 0 and not r.flags.spikes
    assert stability.verdicts(r)[0].startswith("loss spikes: 0 in 200 steps")


def test_a_loss_that_rises_over_the_second_half_is_flagged():
    # Learns for 100 steps, then climbs 2.7 -> 3.1 (the shape of a learning rate too high
    # for a long run), with noise: RISING, and tune's stability stage names it.
    rise = judge(steps(200, loss=lambda i: (5 * math.exp(-i / 20) + 2.7 if i < 100
                                           else 2.7 + 0.004 * (i - 100))
                       + 0.03 * math.sin(7 * i)))
    trend = rise.loss_trend
    assert rise.flags.loss_rising and trend.low > 0 and trend.change_pct > 10
    line = next(v for v in stability.verdicts(rise) if v.startswith("loss over the second half"))
    assert "(steps 100-199): RISING" in line
    assert "the loss RISES over the run's second half" in soak_issues(
        SoakVerdict(finished=True, loss_rising=True))
    # A loss still falling, or flat with noise, is not.
    fall = judge(steps(200, loss=lambda i: 5 * math.exp(-i / 60) + 2.5 + 0.03 * math.sin(i)))
    assert not fall.flags.loss_rising
    assert "(steps 100-199): falling" in "\n".join(stability.verdicts(fall))
    flat = judge(steps(200, seed=3))  # 3.0 + noise
    assert not flat.flags.loss_rising and not flat.loss_trend.change_pct > 5


def test_overflow_skip_and_nonfinite_rates():
    flags = {str(i): {"overflow": True, "updated": False} for i in (10, 11, 12, 13)}
    records = steps(100, **flags)
    records[50] = StepRecord(**{**records[50].__dict__, "loss": math.nan})
    r = judge(records)
    assert r.rates.overflow == pytest.approx(0.04)
    assert r.rates.skipped_updates == pytest.approx(0.04)
    assert r.loss.nonfinite == 1 and r.flags.nonfinite
    clean = judge(steps(100))
    assert clean.rates.overflow == 0 and clean.rates.skipped_updates == 0


# -- throughput -------------------------------------------------------------------------------
def test_tokens_per_s_drift_is_detected():
    rng = np.random.default_rng(4)
    noise = 1 + 0.02 * rng.standard_normal(300)
    # step time grows 25 % over the run: tokens/s falls by a fifth
    r = judge(steps(300, step_s=lambda i: 0.03 * (1 + 0.25 * i / 300) * noise[i]))
    t = r.throughput
    assert t.drifting and r.flags.drift
    assert t.drift_high < 0 and t.decile_change_pct < -10
    assert any(v.startswith("tokens/s DRIFTS") for v in stability.verdicts(r))
    # Rule: an image job's soak names its rate in samples, in the verdict and the tune line.
    images = judge(steps(300, step_s=lambda i: 0.03 * (1 + 0.25 * i / 300) * noise[i]),
                   unit="samples")
    drift = next(v for v in stability.verdicts(images) if "DRIFTS" in v)
    assert drift.startswith("samples/s DRIFTS") and "tok" not in drift
    assert soak_issues(SoakVerdict(finished=True, drift=True, unit="samples")) == [
        "samples/s DRIFTS"]


def test_steady_tokens_per_s_is_no_drift():
    rng = np.random.default_rng(5)
    noise = 1 + 0.05 * rng.standard_normal(300)
    r = judge(steps(300, step_s=lambda i: 0.03 * noise[i]))
    t = r.throughput
    assert t.judged and not t.drifting
    assert t.drift_low < 0 < t.drift_high or abs(t.decile_change_pct) < 5


def test_a_slope_and_deciles_that_disagree_are_no_drift():
    # Found by a new user's soak: "-7.44 %/100 steps (CI -10.17..-4.05), first decile 803 ->
    # last 845 (+5.2 %)" was called a drift. Here tokens/s sits at 800 for the first
    # steady steps, jumps to 1,000, declines to 700, and recovers to 850 at the end.
    def tps(i: int) -> float:
        if i < 60:
            return 800.0
        if i < 270:
            return 1000.0 - 300.0 * (i - 60) / 210
        return 850.0

    r = judge(steps(300, step_s=lambda i: 0.03 * 1000 / tps(i)))
    t = r.throughput
    # Rule: the slope falls and its interval excludes 0, the deciles rise by over 5 %:
    # the two measures disagree, so neither direction is called a drift.
    assert t.drift_high < 0 and t.decile_change_pct > 5
    assert not t.drifting and not r.flags.drift
    assert any(v.startswith("tokens/s steady") for v in stability.verdicts(r))


# -- kill and resume --------------------------------------------------------------------------
def _curve(i: int) -> float:
    return 4 * math.exp(-i / 40) + 2.5 + 0.05 * math.sin(3 * i)


def test_resume_that_replays_identically_continues():
    killed = steps(56, loss=_curve)          # killed after step 55, checkpoint at 50
    resumed = steps(50, start=50, loss=_curve)
    r = resume_check(killed, resumed, 0.01)
    assert r.resume_step == 50 and r.compared == 6 and r.compared_steps[0] == 50
    assert r.identical and r.max_rel_diff == 0 and r.matched and r.continued
    assert r.within_trend is True
    assert "bit-identical" in r.verdict


def test_resume_that_diverges_from_the_killed_run_is_flagged():
    killed = steps(56, loss=_curve)
    resumed = steps(50, start=50, loss=lambda i: _curve(i) * 1.05)
    r = resume_check(killed, resumed, 0.01)
    assert r.compared == 6 and r.max_rel_diff == pytest.approx(0.05 / 1.05, rel=1e-6)
    assert not r.matched and not r.continued
    assert "DID NOT continue" in r.verdict


def test_resume_without_replayed_steps_falls_back_to_the_trend():
    killed = steps(50, loss=_curve)
    on_trend = resume_check(killed, steps(20, start=50, loss=_curve), 0.01)
    assert on_trend.compared == 0 and on_trend.continued
    jumped = resume_check(killed, steps(20, start=50, loss=lambda i: _curve(i) + 2.0), 0.01)
    assert jumped.within_trend is False and not jumped.continued


# -- the soak's own pieces --------------------------------------------------------------------
def test_the_kill_lands_half_way_between_checkpoints():
    assert soak_plan.planned_kill(40, 10, 20, 5) == 25
    assert soak_plan.planned_kill(380, 38, 190, 19) == 209
    assert soak_plan.planned_kill(40, 4, 20, 2) == 22
    assert soak_plan.planned_kill(40, 40, 20, 20) is None  # no checkpoint before the end
    plan = SimpleNamespace(kill_from=20, steps=40, checkpoint_every=10, replay=5)
    assert not soak_attempts.should_kill(20, 20, plan)  # just past a checkpoint: nothing to replay
    assert soak_attempts.should_kill(26, 20, plan)
    assert not soak_attempts.should_kill(26, None, plan)  # no checkpoint seen yet


def test_stitch_keeps_each_launch_up_to_where_the_next_resumed():
    first = soak_attempts.Attempt(index=0, steps=steps(26), killed=True)
    second = soak_attempts.Attempt(index=1, start_step=20, steps=steps(20, start=20))
    stitched, restarts = soak_attempts.stitch([first, second])
    assert [s.step for s in stitched] == list(range(40)) and restarts == [20]
    assert stitched[25] is second.steps[5]


def test_pick_trial_names_the_fix():
    study = SimpleNamespace(study_name="s")
    failed = SimpleNamespace(number=0, ok=False, reason_text="crash", reused_from=None,
                             state="FAIL", reason=None, detail="")
    options = SimpleNamespace(trial=None)
    with pytest.raises(ConfigError, match="run the sweep first"):
        soak_plan.pick_trial(study, [failed], None, options)
    done = SimpleNamespace(number=1, ok=True, reason_text="ok", reused_from=None)
    with pytest.raises(ConfigError, match=r"soak.trial=0: trial 0 ended crash.*soaked: 1 "):
        soak_plan.pick_trial(study, [failed, done], None, SimpleNamespace(trial=0))
    with pytest.raises(ConfigError, match=r"soak.trial=9: no such trial"):
        soak_plan.pick_trial(study, [failed, done], None, SimpleNamespace(trial=9))


# -- one real soak ----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def soaked(tmp_path_factory):
    """A one-trial real study, then a 40-step soak with a 2 MiB/step injected leak."""
    base = tmp_path_factory.mktemp("soak")
    common = [*STUDY, f"sweep.runs_dir={base / 'runs'}", "sweep.progress=false"]
    proc = autotune("sweep", *common, "sweep.n_trials=1")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    out = base / "soak"
    proc = autotune("soak", *common, f"soak.out={out}", "soak.steps=40",
                    "soak.checkpoint_every=10", "run.inject_leak_mib=2")
    return base, common, out, proc


@pytest.mark.slow
def test_real_soak_detects_the_leak_kills_and_resumes(soaked):
    base, _, out, proc = soaked
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "kill -9 after step" in proc.stdout and "resumed at step 20" in proc.stdout
    result = SoakVerdict.from_json(json.loads((out / "soak.json").read_text()))
    assert result.trial == 0 and result.steps == 40 and result.finished
    assert result.overrides[-1] == "run.inject_leak_mib=2"
    memory = result.analysis.memory
    assert result.leak and memory.leak and memory.slope_mib_per_100_steps > 100
    # Killed 5 steps past the checkpoint at step 20; the resumed run replays those steps.
    assert result.kill.after_step >= 24 and result.kill.checkpoint_step == 20
    resume = result.resume
    assert resume.resume_step == 20 and resume.compared >= 1
    assert resume.max_rel_diff <= resume.tolerance and resume.continued
    assert result.steps_trained == 40
    assert [a.killed for a in result.attempts] == [True, False]
    assert (out / "soak.png").stat().st_size > 10_000
    import optuna

    study = optuna.load_study(study_name="real",
                              storage=f"sqlite:///{base / 'runs' / 'real' / 'study.db'}")
    # Rule: a fault injection tests the detectors, not the trial: it is not stored as the
    # trial's soak (tune took it as trial 0's stability, export wrote its leak into the
    # job's README), and it says so.
    assert last_soak(study) is None
    assert "fault injection: not stored as trial 0's soak" in proc.stdout


@pytest.mark.slow
def test_soak_of_a_missing_trial_is_a_config_error_that_writes_nothing(soaked, tmp_path):
    _, common, _, _ = soaked
    out = tmp_path / "never"
    proc = autotune("soak", *common, f"soak.out={out}", "soak.trial=7")
    assert proc.returncode == 2
    assert "soak.trial=7: no such trial" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and not out.exists()


@pytest.mark.slow
def test_the_soak_reaches_the_report_and_the_exported_jobs_readme(soaked):
    import optuna

    base, common, out, _ = soaked
    # The fixture's soak injected its leak and was not stored; stored as a soak of trial 0
    # (what a soak without injection stores), its verdict reaches report and export.
    study = optuna.load_study(study_name="real",
                              storage=f"sqlite:///{base / 'runs' / 'real' / 'study.db'}")
    store_soak(study, SoakVerdict.from_json(json.loads((out / "soak.json").read_text())))
    section = soak.soak_section(study, 0)
    assert section.startswith("## Soak") and "**leak**" in section
    assert soak.soak_section(study, 1) == ""
    proc = autotune("report", *common)
    assert proc.returncode == 0, proc.stderr[-2000:]
    index = (base / "runs" / "real" / "report" / "index.md").read_text()
    assert "## Soak" in index and "**leak**" in index
    job = base / "job"
    proc = autotune("export", *common, f"export.out={job}")
    assert proc.returncode == 0, proc.stderr[-2000:]
    readme = (job / "README.md").read_text()
    assert "## Soak" in readme and "**leak**" in readme and "kill -9 after step" in readme
    # Rule: the section follows the whole file list (its last bullet, mindformers_train.yaml).
    assert readme.index("`mindformers_train.yaml`") < readme.index("## Soak")
    # Rule: the figure sits inside the job (the study's is the next soak's to overwrite).
    out = base / "soak"
    assert (job / "soak.png").read_bytes() == (out / "soak.png").read_bytes()
    assert "[![Soak](soak.png)](soak.png)" in readme and str(out) not in readme


def test_soak_progress_names_the_workloads_unit():
    said = []
    progress = soak_attempts.Progress(said.append, 10, "samples")
    for s in steps(10):
        progress(s)
    # Rule: a line every tenth of the run, its rate in the workload's unit.
    assert len(said) == 10 and all("samples/s" in line and "tok" not in line for line in said)
    tokens = []
    control = soak_attempts.Progress(tokens.append, 10)  # no unit recorded: tokens
    for s in steps(10):
        control(s)
    assert all("tok/s" in line for line in tokens)
