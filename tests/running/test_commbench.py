"""``python -m autotune commbench``: a real all-reduce over msrun on 2 ranks, how results are
read back (newest per hardware profile, bandwidth between measured sizes), and bad input
refused before anything is written."""

from __future__ import annotations

import json
import math
import os

import pytest

from autotune.cli import main
from autotune.running import commbench as C
from tests.conftest import project_env


@pytest.fixture
def cli(capsys, monkeypatch):
    monkeypatch.setenv("AUTOTUNE_CACHE", project_env()["AUTOTUNE_CACHE"])

    def run(*overrides: str) -> tuple[int, str, str]:
        code = main(["commbench", *overrides])
        out = capsys.readouterr()
        return code, out.out, out.err

    return run


# -- the real thing ------------------------------------------------------------------------
@pytest.mark.slow
def test_two_ranks_measure_every_size(cli, tmp_path, monkeypatch):
    # commbench.out left empty: the result goes to <runs_dir>/commbench; relative to here.
    monkeypatch.chdir(tmp_path)
    code, out, err = cli("commbench.sizes_kib=[4,256]", "commbench.repeats=3",
                         "sweep.runs_dir=runs")
    assert code == 0, out + err
    runs = tmp_path / "runs"
    result = json.loads((runs / "commbench" / "commbench-cpu-2r.json").read_text())
    assert result["ranks"] == 2 and result["hardware"] == "cpu"
    assert result["mindspore"] and result["hostname"] and result["cpu_count"] >= 1
    rows = result["rows"]
    assert [r["bytes"] for r in rows] == [4 * 1024, 256 * 1024]
    for r in rows:
        assert len(r["times_s"]) == 3
        assert all(math.isfinite(t) and t > 0 for t in r["times_s"])
        assert r["p10_s"] <= r["median_s"] <= r["p90_s"]
        assert r["algbw_gbs"] == pytest.approx(r["bytes"] / r["median_s"] / 1e9)
        assert 0 < r["algbw_gbs"] and math.isfinite(r["algbw_gbs"])
        assert r["busbw_gbs"] == r["algbw_gbs"] * 2 * (2 - 1) / 2  # 2(n-1)/n, n = 2
    assert "busbw GB/s" in out and "256 KiB" in out  # the table
    # What the profiler and the report read back.
    assert C.load_commbench(runs, "cpu") == result
    assert C.bandwidth_at(result, 64 * 1024) > 0


@pytest.mark.slow
def test_a_failed_run_shows_the_workers_log_and_writes_no_result(cli, tmp_path, monkeypatch):
    broken = tmp_path / "broken.py"
    broken.write_text("raise SystemExit('commbench broke on purpose')\n")
    monkeypatch.setattr(C, "SCRIPT", broken)
    out_dir = tmp_path / "out"
    code, out, err = cli("commbench.sizes_kib=[4]", f"commbench.out={out_dir}")
    assert code == 1
    assert "commbench failed: msrun exited" in out
    assert "commbench broke on purpose" in out  # the tail of a worker's log
    assert "Traceback" not in err
    assert not (out_dir / "commbench-cpu-2r.json").exists()


# -- reading results back ------------------------------------------------------------------
def result(*rows: tuple[int, float], date: str = "2026-01-01T00:00:00+00:00") -> dict:
    return {"date": date, "rows": [{"bytes": b, "busbw_gbs": bw} for b, bw in rows]}


def test_bandwidth_is_interpolated_in_log_size_and_clamped_at_the_ends():
    r = result((1024, 1.0), (1024 ** 2, 4.0), (4 * 1024 ** 2, 10.0))
    assert C.bandwidth_at(r, 1024) == pytest.approx(1.0)
    assert C.bandwidth_at(r, 4 * 1024 ** 2) == pytest.approx(10.0)
    # 32 KiB is half-way from 1 KiB to 1 MiB in log-size.
    assert C.bandwidth_at(r, 32 * 1024) == pytest.approx(2.5)
    assert C.bandwidth_at(r, 2 * 1024 ** 2) == pytest.approx(7.0)  # half-way, 1 MiB..4 MiB
    assert C.bandwidth_at(r, 10) == pytest.approx(1.0)
    assert C.bandwidth_at(r, 1024 ** 4) == pytest.approx(10.0)
    # Row order does not matter; nothing measured or no size gives None.
    assert C.bandwidth_at(result((4 * 1024 ** 2, 10.0), (1024, 1.0)), 64 * 1024) \
        == pytest.approx(5.5)
    assert C.bandwidth_at(result(), 1024) is None
    assert C.bandwidth_at(r, 0) is None


def test_the_newest_result_of_a_hardware_profile_is_loaded(tmp_path):
    d = tmp_path / "commbench"
    d.mkdir()
    old = result((1024, 1.0), date="2026-01-01T00:00:00+00:00")
    new = result((1024, 2.0), date="2026-02-01T00:00:00+00:00")
    (d / "commbench-cpu-2r.json").write_text(json.dumps({**new, "ranks": 2}))
    (d / "commbench-cpu-4r.json").write_text(json.dumps({**old, "ranks": 4}))
    os.utime(d / "commbench-cpu-2r.json", (0, 0))  # the recorded date counts, not mtime
    # Another profile whose name starts with this one's, and a broken file: ignored.
    (d / "commbench-cpu-big-2r.json").write_text(json.dumps(
        result((1024, 9.0), date="2027-01-01T00:00:00+00:00")))
    (d / "commbench-cpu-8r.json").write_text("{not json")
    loaded = C.load_commbench(tmp_path, "cpu")
    assert loaded["ranks"] == 2 and C.bandwidth_at(loaded, 1024) == 2.0
    assert C.load_commbench(tmp_path, "cpu-big")["rows"][0]["busbw_gbs"] == 9.0
    assert C.load_commbench(tmp_path, "gpu_a100") is None
    assert C.load_commbench(tmp_path / "nowhere", "cpu") is None


# -- bad input -----------------------------------------------------------------------------
@pytest.mark.parametrize("overrides, needle", [
    (["commbench.ranks=1"], "commbench.ranks"),
    (["commbench.sizes_kib=[]"], "commbench.sizes_kib"),
    (["hardware=gpu_a100", "commbench.ranks=16"], "commbench.ranks=8 or fewer"),
])
def test_bad_input_is_one_line_and_writes_nothing(cli, tmp_path, overrides, needle):
    out_dir = tmp_path / "out"
    code, _, err = cli(*overrides, f"commbench.out={out_dir}",
                       f"sweep.runs_dir={tmp_path / 'runs'}")
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("autotune: error: "), err
    assert needle in lines[0]
    assert not out_dir.exists() and not (tmp_path / "runs").exists()


def test_a_measured_bandwidth_far_from_the_profiles_is_offered_as_an_override():
    from autotune.running.commbench import bandwidth_override, render
    from trials.contract.schema import LinkConfig

    # Rule: 0.094 GB/s measured against a profile's 2 GB/s prints the override to use; a
    # figure within 10 % of the profile's prints none.
    switch = LinkConfig(bandwidth_gbs=2.0)
    assert bandwidth_override(0.094, switch, 2) == "hardware.intra_node.bandwidth_gbs=0.094"
    assert bandwidth_override(1.9, switch, 4) is None
    assert bandwidth_override(0.5, LinkConfig(), 2) == "hardware.intra_node.bandwidth_gbs=0.5"
    # On a full mesh the profile's figure is one link's: 4 ranks drive 3 links, so 5.7 GB/s
    # of bus bandwidth agrees with 2 GB/s links, and 3 GB/s is offered as 1 GB/s a link.
    mesh = LinkConfig(bandwidth_gbs=2.0, full_mesh=True)
    assert bandwidth_override(5.7, mesh, 4) is None
    assert bandwidth_override(3.0, mesh, 4) == "hardware.intra_node.bandwidth_gbs=1"
    # A link whose library achieves 0.64 of its line rate (HCCL on a 910B's HCCS): 8 ranks
    # drive 7 links of 0.64 x 28 GB/s, 125.4 GB/s of bus bandwidth; a measured 62.7 is
    # offered as the line rate that achieves it, 14 GB/s a link.
    hccs = LinkConfig(bandwidth_gbs=28.0, full_mesh=True, achieved_fraction=0.64)
    assert bandwidth_override(125.0, hccs, 8) is None
    assert bandwidth_override(62.72, hccs, 8) == "hardware.intra_node.bandwidth_gbs=14"

    class Mesh:
        name, intra_node = "ascend_910b", hccs

    text = render({"rows": [{"size_kib": 1024, "median_s": 0.01, "p10_s": 0.009,
                             "p90_s": 0.011, "algbw_gbs": 35.8, "busbw_gbs": 62.72}],
                   "ranks": 8}, Mesh())
    assert "assumes 125.4 GB/s (7 links of 28 on its full mesh, x 0.64 its library " \
           "achieves)" in text

    class Hardware:
        name, intra_node = "cpu", switch

    rows = [{"size_kib": 1024, "median_s": 0.01, "p10_s": 0.009, "p90_s": 0.011,
             "algbw_gbs": 0.094, "busbw_gbs": 0.094}]
    assert "add hardware.intra_node.bandwidth_gbs=0.094" in render({"rows": rows, "ranks": 2},
                                                                   Hardware())
