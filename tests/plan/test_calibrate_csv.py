"""``python -m autotune calibrate``: a CSV of measured runs round-trips into the profile's
stored fit that ``plan`` then uses and names; bad rows are one line; a fit that bends its
constants out of their range is refused."""

from __future__ import annotations

import csv
import dataclasses
import json
from pathlib import Path

import pytest

from autotune.cli import main
from autotune.plan import calibration
from autotune.plan.costmodel import CostModel
from autotune.plan.measured_points import MAX_ROWS, read_points
from tests.cli.test_cli_errors import assert_one_line_error
from tests.conftest import ROOT
from tests.fakes import hardware_profile

EXAMPLE = ROOT / "examples" / "calibrate" / "vtrain_a100.csv"


def a100():
    return hardware_profile("hardware=gpu_a100")


@pytest.fixture
def cache(tmp_path, monkeypatch):
    path = tmp_path / "cache"
    monkeypatch.setenv("AUTOTUNE_CACHE", str(path))
    return path


def rows() -> list[dict]:
    with EXAMPLE.open(newline="") as f:
        return list(csv.DictReader(f))


def write(path, table: list[dict]) -> str:
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(table[0]))
        writer.writeheader()
        writer.writerows(table)
    return str(path)


def test_a_csv_round_trips_into_the_profiles_fit_that_plan_names(tmp_path, cache, capsys):
    code = main(["calibrate", f"calibrate.csv={EXAMPLE}", "hardware=gpu_a100"])
    out = capsys.readouterr().out
    assert code == 0, out
    # Rule: the in-sample and the leave-one-out errors are printed, each labelled.
    assert "step time: in-sample " in out and "leave-one-out " in out
    # Rule: the fit is stored for the profile (runs measured elsewhere: no machine owns it),
    # and the profile's model loads it with its name.
    assert [p.name for p in (cache / "calibration").iterdir()] == ["gpu_a100-imported.json"]
    loaded = CostModel.for_profile(a100(), cache_dir=cache).constants
    assert loaded.source.startswith("calibrate: fit of 24 runs from vtrain_a100.csv")
    # Rule: the fit explains the runs better than the priors it started from.
    held = float(out.split("leave-one-out ")[1].split(" %")[0])
    assert held < 15.0, out
    # Rule: plan uses it and says so.
    assert main(["plan", "workload=llama2_7b", "hardware=gpu_a100", "plan.precisions=[fp16]",
                 f"plan.out={tmp_path / 'plan'}"]) == 0
    assert "constants: calibrate: fit of 24 runs" in capsys.readouterr().out


def test_the_imported_fit_is_the_profiles_alone(cache):
    prior = CostModel.for_profile(a100(), cache_dir=cache).constants
    calibration.save("gpu_a100", dataclasses.replace(prior, source="imported"), cache)
    assert calibration.load("gpu_a100", prior, cache).source == "imported"
    calibration.save("gpu_a100", dataclasses.replace(prior, source="imported again"), cache)
    assert calibration.load("gpu_a100", prior, cache).source == "imported again"
    # Rule: another profile's fit is never loaded for this one.
    other = calibration.imported_path("gpu_a100", cache).read_text()
    calibration.imported_path("cpu", cache).write_text(other)
    assert calibration.load("cpu", prior, cache) is prior


def test_a_fit_stored_before_the_roofline_is_read_only_without_shape_efficiencies(cache):
    """A fit stored before issue 33 carries ``shape_efficiency``: empty, its constants mean
    what they mean today and it is read; with shapes, they rested on them: the priors."""
    prior = CostModel.for_profile(a100(), cache_dir=cache).constants
    calibration.save("gpu_a100", dataclasses.replace(prior, source="old fit"), cache)
    path = calibration.imported_path("gpu_a100", cache)
    record = json.loads(path.read_text())
    record["constants"]["shape_efficiency"] = {}
    path.write_text(json.dumps(record))
    assert calibration.load("gpu_a100", prior, cache).source == "old fit"
    record["constants"]["shape_efficiency"] = {"float16:2048x1024": 0.5}
    path.write_text(json.dumps(record))
    assert calibration.load("gpu_a100", prior, cache) is prior


@pytest.mark.parametrize("edit, needles", [
    (lambda t: t[1].update(dp="two"), ("row 3, column dp: 'two' is not a whole number",)),
    (lambda t: t[0].update(step_s="-1"), ("row 2, column step_s", "must be a positive")),
    (lambda t: t[0].update(precision="float16"), ("row 2, column precision", "write fp16")),
    (lambda t: t[0].update(global_batch="33"), ("row 2, column global_batch",
                                                 "is not divisible by dp")),
    (lambda t: [r.pop("step_s") for r in t], ("missing column(s) step_s",)),
    (lambda t: [r.update(colour="red") for r in t], ("unknown column(s) colour",)),
    (lambda t: [r.update(shard_level="4") for r in t], ("row 2, column shard_level",
                                                         "must be 0, 1, 2 or 3")),
    (lambda t: [r.update(flash_attention="yes") for r in t], ("row 2, column flash_attention",
                                                               "must be true or false")),
    (lambda t: [r.update(context_parallel="0") for r in t], ("row 2, column context_parallel",
                                                              "must be >= 1")),
    (lambda t: [r.update(virtual_stages="2", pp="1") for r in t],
     ("row 2, column virtual_stages", "needs pp > 1")),
    (lambda t: [r.update(keeps_16bit_grads="true") for r in t],
     ("row 2, column keeps_16bit_grads", "needs fp32_main_grads true")),
])
def test_a_bad_row_is_one_line_naming_row_and_column(tmp_path, cache, capsys, edit, needles):
    table = rows()
    edit(table)
    code = main(["calibrate", f"calibrate.csv={write(tmp_path / 'bad.csv', table)}",
                 "hardware=gpu_a100"])
    assert_one_line_error(code, capsys.readouterr().err, *needles)
    assert not (cache / "calibration").exists()


def test_a_csv_separated_by_semicolons_names_its_separator(tmp_path, cache, capsys):
    """A spreadsheet's export with ';' reads as one wide column: the line says so."""
    path = tmp_path / "semi.csv"
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows()[0]), delimiter=";")
        writer.writeheader()
        writer.writerows(rows())
    code = main(["calibrate", f"calibrate.csv={path}", "hardware=gpu_a100"])
    assert_one_line_error(code, capsys.readouterr().err, "missing column(s) n_layers",
                          "separated by ';': separate the columns by commas")
    assert not (cache / "calibration").exists()


@pytest.mark.parametrize("column, text", [
    ("step_s", "nan"), ("step_s", "inf"), ("peak_gib", "-inf"), ("peak_gib", "NaN"),
    ("dp", "Infinity"), ("n_layers", "nan"),
])
def test_a_non_finite_value_is_refused_naming_row_and_column(tmp_path, cache, capsys, column,
                                                              text):
    table = [{column: "", **r} for r in rows()]  # peak_gib is optional: empty elsewhere
    table[2][column] = text
    code = main(["calibrate", f"calibrate.csv={write(tmp_path / 'bad.csv', table)}",
                 "hardware=gpu_a100"])
    # Rule: every number a run states is finite; nan/inf is no measurement (row 4: header 1).
    assert_one_line_error(code, capsys.readouterr().err, f"row 4, column {column}",
                          "is not a finite number")
    assert not (cache / "calibration").exists()


@pytest.mark.parametrize("header", [
    lambda h: [*h, "step_s"],                       # the fitted column twice
    lambda h: [*h, " dp"],                          # the same name once spaces are stripped
    lambda h: [*h, "peak_gib", "peak_gib"],         # an optional one twice
    lambda h: [h[-1], *h],                          # the first column repeated at the front
])
def test_a_column_named_twice_is_refused_naming_it(tmp_path, cache, capsys, header):
    table = rows()
    names = header(list(table[0]))
    twice = sorted({n.strip() for n in names if [m.strip() for m in names].count(n.strip()) > 1})
    path = tmp_path / "twice.csv"
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(names)
        for row in table:
            writer.writerow([row.get(n.strip(), "1") for n in names])
    code = main(["calibrate", f"calibrate.csv={path}", "hardware=gpu_a100"])
    # Rule: one column per name (csv.DictReader would silently keep the last one).
    assert_one_line_error(code, capsys.readouterr().err, f"column(s) {', '.join(twice)} appear "
                          "more than once")
    assert not (cache / "calibration").exists()


@pytest.mark.parametrize("n_rows", [MAX_ROWS + 1, 3 * MAX_ROWS])
def test_more_rows_than_the_cap_are_refused_with_the_fix(tmp_path, cache, capsys, n_rows):
    table = rows()
    table = (table * (n_rows // len(table) + 1))[:n_rows]
    code = main(["calibrate", f"calibrate.csv={write(tmp_path / 'big.csv', table)}",
                 "hardware=gpu_a100"])
    # Rule: leave-one-out is quadratic in the rows; past MAX_ROWS the fix is a sample.
    assert_one_line_error(code, capsys.readouterr().err, f"has {n_rows} runs",
                          f"at most {MAX_ROWS}", "keep a sample")
    assert not (cache / "calibration").exists()


def test_no_csv_or_a_missing_one_is_one_line(tmp_path, cache, capsys):
    assert_one_line_error(main(["calibrate", "hardware=gpu_a100"]), capsys.readouterr().err,
                          "calibrate needs calibrate.csv=PATH")
    assert_one_line_error(main(["calibrate", f"calibrate.csv={tmp_path / 'none.csv'}",
                                "hardware=gpu_a100"]), capsys.readouterr().err,
                          "cannot read calibrate.csv=")


def test_a_fit_out_of_its_plausible_range_is_refused_and_nothing_stored(tmp_path, cache,
                                                                         capsys):
    # The same runs 1,000x slower: only a compute efficiency of a few hundredths of a
    # per cent would explain them (a wrong profile, wrong dimensions).
    table = rows()
    for r in table:
        r["step_s"] = str(float(r["step_s"]) * 1000)
    code = main(["calibrate", f"calibrate.csv={write(tmp_path / 'slow.csv', table)}",
                 "hardware=gpu_a100"])
    out = capsys.readouterr().out
    assert code == 1 and "refused, nothing stored:" in out, out
    assert not calibration.imported_path("gpu_a100", cache).exists()


def test_the_optional_columns_reach_the_cost_models_job(tmp_path):
    """shard_level, virtual_stages, context_parallel, flash_attention,
    overlap_grad_reduce and reduce_in_fp32 are read into the Job the model predicts;
    optimizer_shard alone means shard level 1; empty cells keep the Job's defaults (fp32
    reduction)."""
    table = rows()[:3]
    optional = ("shard_level", "optimizer_shard", "virtual_stages", "context_parallel",
                "flash_attention", "overlap_grad_reduce", "reduce_in_fp32")
    for r in table:
        r.update({c: "" for c in optional})
    table[0].update(shard_level="3", flash_attention="true", overlap_grad_reduce="true",
                    virtual_stages="2", reduce_in_fp32="false")
    table[1].update(optimizer_shard="true")
    path = Path(write(tmp_path / "runs.csv", table))
    jobs = [m.job for m in read_points(path, a100(), lambda job: 312e12)]
    assert (jobs[0].shard_level, jobs[0].flash_attention, jobs[0].overlap_grad_reduce,
            jobs[0].virtual_stages, jobs[0].reduce_in_fp32) == (3, True, True, 2, False)
    assert jobs[1].shard_level == 1 and jobs[1].optimizer_shard
    assert (jobs[2].shard_level, jobs[2].virtual_stages, jobs[2].context_parallel,
            jobs[2].flash_attention, jobs[2].reduce_in_fp32) == (0, 1, 1, False, True)


def test_the_frameworks_memory_columns_reach_the_job(tmp_path):
    """fp32_main_grads, keeps_16bit_grads and unfused_cross_entropy describe what another
    framework keeps (Megatron-LM, DeepSpeed's BF16_Optimizer, torchtitan's loss); empty
    cells are false."""
    table = rows()[:2]
    for r in table:
        r.update(fp32_main_grads="", keeps_16bit_grads="", unfused_cross_entropy="")
    table[0].update(fp32_main_grads="true", keeps_16bit_grads="true",
                    unfused_cross_entropy="true")
    path = Path(write(tmp_path / "runs.csv", table))
    jobs = [m.job for m in read_points(path, a100(), lambda job: 312e12)]
    assert (jobs[0].fp32_main_grads, jobs[0].keeps_16bit_grads,
            jobs[0].unfused_cross_entropy) == (True, True, True)
    assert (jobs[1].fp32_main_grads, jobs[1].keeps_16bit_grads,
            jobs[1].unfused_cross_entropy) == (False, False, False)


def test_a_large_csv_says_how_far_its_refits_got():
    from autotune.plan.calibrate_csv import PROGRESS_FROM, _progress

    said: list[str] = []
    report = _progress(said.append, 250)
    for done in range(1, 251):
        report(done, 250)
    # Rule: from PROGRESS_FROM runs, a line every tenth of the refits and at the end.
    assert said[0] == "leave-one-out: 25/250 refits"
    assert said[-1] == "leave-one-out: 250/250 refits"
    assert len(said) == 10
    # Rule: a small CSV's refits take seconds: no progress lines.
    assert _progress(said.append, PROGRESS_FROM - 1) is None
