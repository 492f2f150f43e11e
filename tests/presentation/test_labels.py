"""autotune.presentation.labels: short knob names for tables and progress lines."""

from __future__ import annotations

from autotune.presentation.labels import mib_text, params_label, short


def test_known_knobs_have_their_short_name_and_others_their_last_part():
    # Rule: a knob in SHORT_NAMES reads as its short name.
    assert short("train.micro_batches") == "micro" and short("precision") == "prec"
    # Rule: any other knob reads as the last part of its override path.
    assert short("workload.seq_len") == "seq_len" and short("lr") == "lr"


def test_params_label_is_one_line_in_the_points_order():
    # Rule: "name=value" pairs, space separated, in the order the point gives them.
    assert params_label({"runtime.threads": 2, "train.micro_batches": 4}) == "thr=2 micro=4"
    assert params_label({}) == ""


def test_a_size_under_a_mib_reads_in_kib():
    # Rule: the CPU allocator's curve of a tiny model is KiB, not "0.0 MiB".
    assert mib_text(0.0361) == "37.0 KiB" and mib_text(2048.25) == "2,048.2 MiB"
    assert mib_text(1.0) == "1.0 MiB"
