"""bench.suite_durations reads pytest's own report: the phases' seconds and the counts."""

from __future__ import annotations

from bench.suite_durations import counts, durations

OUTPUT = """\
....F.s
============================= slowest durations ==============================
54.07s call     tests/sweep/test_sweep_e2e.py::test_real_sweep_with_data_parallel_trial
0.41s call     tests/cli/test_readme_commands.py::test_x[python -m autotune soak]
21.40s setup    tests/export/test_export_confirm.py::test_exported_job_runs_from_its_files_alone
=========================== short test summary info ============================
FAILED tests/trials/test_memory.py::test_peak - AssertionError
1 failed, 804 passed, 8 skipped in 1084.55s (0:18:04)
"""


def test_every_phase_is_read_slowest_first_with_its_whole_test_id():
    rows = durations(OUTPUT)
    assert [s for s, *_ in rows] == [54.07, 21.40, 0.41]
    # A parametrized id keeps its spaces; the phase is kept apart from it.
    assert rows[2] == (0.41, "call", "tests/cli/test_readme_commands.py::test_x[python -m "
                                     "autotune soak]")
    assert rows[1][1] == "setup"


def test_the_counts_are_pytests_closing_lines_summed():
    assert counts(OUTPUT) == {"failed": 1, "passed": 804, "skipped": 8}
    assert counts("2 failed, 10 passed, 1 error in 3.00s") == {"failed": 2, "passed": 10,
                                                              "error": 1}
    # make test runs two pytests (side by side, then the solo tests): both count; what one
    # left to the other (deselected) does not, nor a test's own output.
    two = (OUTPUT + "....\n====== 19 passed, 1045 deselected in 67.61s (0:01:07) ======\n"
           "a log line: 3 passed in a test's output\n")
    assert counts(two) == {"failed": 1, "passed": 823, "skipped": 8}
