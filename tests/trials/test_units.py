"""A workload's unit (tokens or samples) names its throughput in every line a person
reads: the sweep's progress lines and leaderboard, the report, the export's README."""

from __future__ import annotations

from autotune.cli import main
from trials.contract.units import rate


def test_rate_names_the_unit():
    # Rule: one spelling per unit; a record without one (an older trial) counts tokens.
    assert rate("samples") == "samples/s" and rate(None) == "tokens/s"
    assert rate("tokens", short=True) == "tok/s" and rate("samples", short=True) == "samples/s"


def test_a_samples_workload_says_samples_everywhere(harness, tmp_path):
    harness.script(unit="samples")
    space = harness.space("thr", {"runtime.threads": [2, 1]})
    code, out, err = harness.run(space, "sweep.n_trials=2", "sweep.baseline_every=1")
    assert code == 0, err
    # Rule: progress lines, the baseline's re-measurement, the leaderboard's header and its
    # label, the pick: samples/s.
    assert "trial   0 ok" in out and "2,000 samples/s" in out
    assert "re-measured: 2,000 samples/s" in out, out
    assert "samples/s = every run the sweep measured of the trial, pooled" in out
    assert "tok/s" not in out and "tokens/s" not in out, out
    assert main(["report", *harness.overrides(space)]) == 0
    harness.capsys.readouterr()
    report = harness.runs / "s" / "report"
    index = (report / "index.md").read_text()
    assert "max samples/s with peak memory" in index and "2,000 samples/s" in index
    assert "tokens/s" not in index, index
    assert "samples/s" in (report / "experiments.csv").read_text().splitlines()[0]
    out_dir = tmp_path / "job"
    assert main(["export", *harness.overrides(space), f"export.out={out_dir}"]) == 0
    # Rule: the exported job's README and CHANGES.md give the figure in samples/s too.
    assert "Measured: 2,000 samples/s in the sweep (geometric mean of 2 runs)." in (
        out_dir / "README.md").read_text()
    assert "tok/s" not in (out_dir / "CHANGES.md").read_text()


def test_a_token_workload_keeps_tokens(harness):
    harness.script()
    space = harness.space("thr", {"runtime.threads": [2, 1]})
    code, out, err = harness.run(space, "sweep.n_trials=2")
    assert code == 0, err
    # Rule: the control: without a recorded unit every figure stays in tokens.
    assert "2,000 tok/s" in out and "samples/s" not in out
