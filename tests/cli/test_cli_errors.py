"""Bad input ends in one line naming the fix, exit code 2, no traceback, nothing written."""

from __future__ import annotations

import os
import sqlite3

import pytest

from autotune.cli import COMMANDS


def assert_one_line_error(code: int, err: str, *needles: str) -> None:
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("autotune: error: ")
    assert "Traceback" not in err
    for needle in needles:
        assert needle in lines[0], lines[0]


@pytest.mark.parametrize("override, needles", [
    # A misspelt key names the existing one nearest to it, among its siblings.
    ("sweep.n_trails=3", ("Could not override 'sweep.n_trails'",
                          "check its spelling: did you mean sweep.n_trials?")),
    ("hardware.peak_tflops.bf16=300", ("did you mean hardware.peak_tflops.bfloat16?",)),
    ("totally.bogus=1", ("No such key (totally.bogus): check its spelling (--print-config",)),
    ("precision=int8", ("precision/int8", "Available options in 'precision': bf16, fp16, fp32")),
    ("sweep.n_trials=many", ("sweep.n_trials=many", "could not be converted to Integer",
                             "give sweep.n_trials a whole number")),
    ("data.multiprocessing=maybe", ("give data.multiprocessing true or false",)),
    # An Optional field (null: autotune decides) names null beside its type's values.
    ("sweep.neighbours=maybe", ("give sweep.neighbours true or false, or null",)),
    ("sweep.n_trials", ("override 'sweep.n_trials' has no value: write KEY=VALUE",)),
    ("runtime.mode=eager", ("expected one of [graph, pynative]",)),
    ("sweep.pruner=xyz", ("sweep.pruner=xyz", "expected one of [slow, median, none]")),
    ("sweep.study=../escape", ("not a safe directory name",)),
    ("parallel.dp=3", ("train.global_batch=8 is not divisible",)),
    ("parallel.dp=4", ("a job of 4 devices does not fit", "has 2 devices")),
    # Old spellings of the vocabulary's words: one line naming the word to write.
    ("precision=float16", ("precision: 'float16' is not a precision name; write fp16 "
                           "(names: fp32, fp16, bf16)",)),
    ("precision=bfloat16", ("'bfloat16' is not a precision name; write bf16",)),
    ("train.recompute=true", ("train.recompute: 'true' is not a recompute mode; write full "
                              "(modes: none, selective, full, selective_op)",)),
    ("train.recompute=false", ("'false' is not a recompute mode; write none",)),
    ("train.recompute=selective", ("the trial program recomputes every block or nothing",
                                   "write full or none")),
    ("precision.dtype=float16", ("precision.dtype=float16 contradicts precision=fp32",
                                 "write precision=fp16")),
    ("parallel.split=2x1", ("parallel.split value '2x1' must look like 'DPxMPxPP'",)),
    ("hardware=gpu_h100x", ("Could not find 'hardware/gpu_h100x'. Available options in "
                            "'hardware': ascend_910b, cpu, gpu_a100, gpu_h100",)),
    # Hydra's grammar: a list the shell split at its space names the spelling that parses.
    ("sweep.n_trials=[3", ("cannot parse the override 'sweep.n_trials=[3'",
                       "a list as key=[a,b] with commas and no spaces")),
])
def test_bad_overrides(harness, override, needles):
    space = harness.space("ok", {"train.micro_batches": [1, 2]})
    code, _, err = harness.run(space, override)
    assert_one_line_error(code, err, *needles)
    # Rule: never "In 'sweep': ...", a config every command composes and none is named.
    assert "In 'sweep'" not in err
    assert not harness.runs.exists()


def test_the_vocabulary_composes_in_the_sweep(harness):
    from autotune.cli import main

    space = harness.space("ok", {"train.micro_batches": [1, 2]})
    code = main(["sweep", "--print-config", *harness.overrides(
        space, "precision=fp16", "train.recompute=full", "parallel.split=2x1x1")])
    out = harness.capsys.readouterr().out
    # Rule: the canonical words compose: the precision's dtype, the mode, the split's fields.
    assert code == 0
    for line in ("dtype: float16", "recompute: full", "dp: 2"):
        assert line in out, out
    assert not harness.runs.exists()


def test_empty_search_space(harness):
    space = harness.space("empty", {})
    code, _, err = harness.run(space)
    assert_one_line_error(code, err, "has no knobs")
    assert not harness.runs.exists()


def test_a_space_with_nothing_besides_the_baseline_is_refused(harness):
    # On the CPU profile (2 devices, no bf16) every point but the baseline breaks a rule.
    space = harness.space("lonely", {"parallel.split": ["4x1x1"], "precision": ["bf16"]})
    code, _, err = harness.run(space)
    # Rule: a sweep that can only run its baseline is refused before anything is written.
    assert_one_line_error(code, err, "nothing to search besides the baseline",
                          "parallel.split=4x1x1: split 4x1x1 needs 4 devices",
                          "under knobs: in search/lonely.yaml (in conf/, or in a "
                          "hydra.searchpath directory")
    code, _, err = harness.run(harness.space("single", {"train.micro_batches": [1]}))
    assert_one_line_error(code, err, "its only point is the baseline")
    assert not harness.runs.exists()


def test_unknown_knob_and_unknown_knob_value(harness):
    code, _, err = harness.run(harness.space("k", {"train.micro_batchs": [1, 2]}))
    assert_one_line_error(code, err, "train.micro_batchs", "not a field of train")
    code, _, err = harness.run(harness.space("v", {"precision": ["fp32", "fp8"]}))
    assert_one_line_error(code, err, "search knob precision=fp8", "Available options")
    assert not harness.runs.exists()


def test_foreign_and_broken_databases_are_left_untouched(harness, tmp_path):
    space = harness.space("ok", {"train.micro_batches": [1, 2]})
    foreign = tmp_path / "foreign.db"
    con = sqlite3.connect(foreign)
    con.execute("create table invoices (id integer)")
    con.commit()
    con.close()
    before = foreign.read_bytes()
    code, _, err = harness.run(space, f"sweep.storage=sqlite:///{foreign}")
    assert_one_line_error(code, err, "not an Optuna study database")
    assert foreign.read_bytes() == before
    broken = tmp_path / "broken.db"
    broken.write_text("this is not sqlite" * 100)
    code, _, err = harness.run(space, f"sweep.storage=sqlite:///{broken}")
    assert_one_line_error(code, err, "is not a SQLite database")


def test_unreachable_database(harness):
    space = harness.space("ok", {"train.micro_batches": [1, 2]})
    code, _, err = harness.run(space, "sweep.storage=postgresql+psycopg2://nobody:secret@127.0.0.1:9/x")
    assert_one_line_error(code, err, "cannot reach study storage", "check sweep.storage")
    assert "secret" not in err  # a password is never printed


@pytest.mark.parametrize("url, needle", [
    ("mysql+pymysql://me@127.0.0.1:3306/db", "mysql+pymysql:// is not a storage autotune"),
    ("oracle://me@db/x", "oracle:// is not a storage autotune supports"),
    ("sqlite:///:memory:", "in-memory SQLite database ends with the command"),
    ("sqlite://", "in-memory SQLite database ends with the command"),
    ("'sqlite:///file:x?mode=memory&cache=shared'", "in-memory SQLite"),
])
def test_a_storage_that_is_not_installed_and_tested_or_lives_in_memory_is_refused(
        harness, tmp_path, monkeypatch, url, needle):
    """The supported storages are a declared table (autotune/study/urls.py); the rest is
    refused before anything is written, naming the URLs to write instead."""
    here = tmp_path / "cwd"  # where a lock file of a refused URL would land
    here.mkdir()
    monkeypatch.chdir(here)
    space = harness.space("ok", {"train.micro_batches": [1, 2]})
    code, _, err = harness.run(space, f"sweep.storage={url}")
    assert_one_line_error(code, err, needle, "sqlite:////abs/path/study.db")
    assert not harness.runs.exists() and not any(here.iterdir())


def _path_settings() -> list[tuple[str, str]]:
    """(dotted key, path kind) of every setting declared a path: the table the rule reads."""
    import dataclasses
    import typing

    from autotune.settings import SweepConfig

    found = []

    def walk(schema, prefix):
        hints = typing.get_type_hints(schema)
        for f in dataclasses.fields(schema):
            key = f"{prefix}{f.name}"
            if dataclasses.is_dataclass(hints[f.name]):
                walk(hints[f.name], key + ".")
            elif "path" in f.metadata.get("autotune.rule", {}):
                found.append((key, f.metadata["autotune.rule"]["path"]))

    walk(SweepConfig, "")
    return found


PATH_SETTINGS = _path_settings()
#: The command that writes each section's paths (data.*: the sweep's trials).
WRITER = {"sweep": "sweep", "data": "sweep", "report": "report", "export": "export",
          "plan": "plan", "profile": "profile", "soak": "soak", "commbench": "commbench"}


def test_every_output_directory_setting_is_declared():
    assert {k for k, kind in PATH_SETTINGS if kind == "output_dir"} >= {
        "sweep.runs_dir", "report.out", "export.out", "plan.out", "profile.out", "soak.out",
        "commbench.out", "data.cache_dir"}


@pytest.mark.parametrize("key", [k for k, kind in PATH_SETTINGS if kind == "output_dir"])
@pytest.mark.parametrize("where, needle", [
    ("/proc/autotune-x", "/proc is a proc filesystem"),
    ("/sys/autotune-x", "/sys is a sysfs filesystem"),
    ("/dev/null", "is not a directory (a file or a device)"),
    ("{file}", "is not a directory (a file or a device)"),
    ("{file}/sub/dir", "is a file, not a directory"),
])
def test_a_directory_a_command_writes_must_be_one_it_can_create(harness, tmp_path, key,
                                                                 where, needle):
    """Every setting declared an output directory, on every kind of place that takes no
    directory: one line naming the setting, exit 2, nothing written."""
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    value = where.format(file=blocker)
    space = harness.space("ok", {"train.micro_batches": [1, 2]})
    command = WRITER[key.split(".")[0]]
    code, _, err = harness.main(command, *harness.overrides(space), f"{key}={value}")
    assert_one_line_error(code, err, f"{key}={value}: ", needle)
    assert blocker.read_text() == "" and not harness.runs.exists()


def test_unwritable_runs_dir(harness, tmp_path):
    space = harness.space("ok", {"train.micro_batches": [1, 2]})
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    code, _, err = harness.run(space, f"sweep.runs_dir={blocker}/runs")
    assert_one_line_error(code, err, "sweep.runs_dir")


def test_print_config_runs_nothing(harness):
    from autotune.cli import main

    space = harness.space("ok", {"train.micro_batches": [1, 2]})
    code = main(["sweep", "--print-config", *harness.overrides(space)])
    out = harness.capsys.readouterr().out
    assert code == 0 and "n_trials: 12" in out and "micro_batches" in out
    assert not harness.runs.exists()


def test_print_config_validates_the_space_as_the_sweep_does(harness):
    from autotune.cli import main

    space = harness.space("own", {"sweep.n_trials": [1, 2]})
    code = main(["sweep", "--print-config", *harness.overrides(space)])
    # Rule: --print-config runs the whole validation of what it shows, the space's knobs
    # too: a knob that is a setting of the sweep is refused as the sweep refuses it.
    assert_one_line_error(code, harness.capsys.readouterr().err,
                          "search knob 'sweep.n_trials' is a setting of the sweep")
    # ... and the baseline, which the sweep checks before it writes (--print-config said
    # exit 0 for a baseline the sweep then refused).
    space = harness.space("odd", {"train.micro_batches": [1, 2]},
                          baseline={"train.micro_batches": 3})
    code = main(["sweep", "--print-config", *harness.overrides(space)])
    assert_one_line_error(code, harness.capsys.readouterr().err,
                          "the baseline configuration is impossible")
    assert not harness.runs.exists()


@pytest.mark.parametrize("override, needle", [
    # Every setting is range-checked before anything is written (a sample of each section).
    ("sweep.n_trials=-3", "sweep.n_trials=-3 must be >= 1"),
    ("sweep.max_failure_rate=7", "sweep.max_failure_rate=7.0 must be >= 0 and <= 1"),
    ("sweep.stop.slow_ratio=-0.5", "sweep.stop.slow_ratio=-0.5 must be >= 0 and <= 1"),
    ("sweep.stop.slow_warmup_ratio=0.9", "must not exceed sweep.stop.slow_ratio=0.5"),
    ("sweep.heartbeat_timeout_s=1", "must exceed sweep.heartbeat_interval_s=5"),
    ("sweep.stop.wall_timeout_s=10", "is below sweep.stop.compile_timeout_s=180"),
    ("confirm.top_k=0", "confirm.top_k=0 must be >= 1"),
    ("export.min_headroom_gib=-1", "export.min_headroom_gib=-1.0 must be >= 0"),
    ("train.lr=0", "train.lr=0.0 must be > 0"),
    ("guard.spike_factor=0.5", "guard.spike_factor=0.5 must be > 1"),
    ("precision.amp_level=O9", "precision.amp_level=O9 must be one of O0, O1, O2, O3, auto"),
    ("hardware.device_memory_gib=0", "hardware.device_memory_gib=0.0 must be > 0"),
    ("+hardware.supports.fp8=true", "hardware.supports.fp8: unknown capability"),
    ("+hardware.peak_tflops.fp16=10", "hardware.peak_tflops.fp16: unknown dtype; write float16"),
    ("workload.vocab_size=100", "the text source yields byte tokens 0..255"),
    ("+sweep.n_trails=3", "unknown key 'sweep.n_trails'"),
    ("+banana=1", "unknown key 'banana'"),
])
def test_nonsense_settings_are_refused_before_anything_is_written(harness, override, needle):
    space = harness.space("ok", {"train.micro_batches": [1, 2]})
    code, _, err = harness.run(space, override)
    assert_one_line_error(code, err, needle)
    assert not harness.runs.exists()


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("override, needle", [
    # One setting of each class (a range, a choice, an unknown key, a type) in every verb:
    # the whole config is validated in one pass before any verb runs, whichever it is.
    ("confirm.repeats=0", "confirm.repeats=0 must be >= 1"),
    ("precision.amp_level=O9", "must be one of O0, O1, O2, O3, auto"),
    ("+sweep.n_trails=3", "unknown key 'sweep.n_trails'"),
    ("train.micro_batches=two", "train.micro_batches"),
])
def test_every_command_validates_its_settings(harness, command, override, needle):
    from autotune.cli import main

    space = harness.space("ok", {"train.micro_batches": [1, 2]})
    code = main([command, *harness.overrides(space, override)])
    assert_one_line_error(code, harness.capsys.readouterr().err, needle)
    assert not harness.runs.exists()


def test_free_form_options_take_a_whole_dict(harness):
    from autotune.cli import main

    space = harness.space("ok", {"train.micro_batches": [1, 2]})
    # Rule: the README's form and the '+' form both set a user workload's options.
    for override in ("workload.options={width: 1024, act: gelu}",
                     "+workload.options.width=1024"):
        code = main(["sweep", "--print-config", *harness.overrides(space, override)])
        out = harness.capsys.readouterr().out
        assert code == 0 and "width: 1024" in out, out


#: A value for every list-valued setting of the commands' schema: each may be given bare.
BARE_LIST_VALUES = {"plan.split": "8x1x1", "plan.micro_batches": "4", "plan.recompute": "full",
                    "plan.precisions": "bf16", "plan.sequence_parallel": "true",
                    "plan.optimizer_shard": "true", "commbench.sizes_kib": "64",
                    "export.mindformers_transfer": "data", "sweep.slurm.setup": "module",
                    "sweep.trial_command": "python", "tune.stages": "data"}


def test_every_list_setting_takes_a_bare_value_or_a_bare_comma_list():
    """OmegaConf refuses a scalar for a list ("int is not a ListConfig, list or tuple")
    and Hydra reads a bare comma as a sweep ("Ambiguous value"): found on plan.split, then
    on every other list of plan and export. One rule for every list of the schema."""
    import yaml
    from omegaconf import OmegaConf

    from autotune.settings import SweepConfig
    from trials.contract.compose import compose, shaped_paths

    # Rule: the table covers every list-valued setting the schema has.
    assert set(BARE_LIST_VALUES) == set(shaped_paths(SweepConfig, list))
    for key, value in BARE_LIST_VALUES.items():
        cfg = compose("sweep", [f"{key}={value}"], schema=SweepConfig)
        assert OmegaConf.select(cfg, key) == [yaml.safe_load(value)], key
    cfg = compose("sweep", ["plan.split=8x1x1,2x4x1", "plan.micro_batches=1,2", "plan.split="],
                  schema=SweepConfig)
    assert list(cfg.plan.micro_batches) == [1, 2] and list(cfg.plan.split) == []
    cfg = compose("sweep", ["plan.split=8x1x1,2x4x1", "plan.precisions=[fp16, bf16]"],
                  schema=SweepConfig)
    assert list(cfg.plan.split) == ["8x1x1", "2x4x1"] and len(cfg.plan.precisions) == 2


def test_a_storage_path_under_a_file_is_one_line(harness, tmp_path):
    space = harness.space("ok", {"train.micro_batches": [1, 2]})
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    code, _, err = harness.run(space, f"sweep.storage=sqlite:///{blocker}/sub/study.db")
    assert_one_line_error(code, err, "is a file, not a directory", "sweep.storage")
    assert blocker.read_text() == "" and not harness.runs.exists()


def test_an_unimportable_workload_entry_launches_nothing(harness):
    space = harness.space("ok", {"train.micro_batches": [1, 2]})
    overrides = [o for o in harness.overrides(space, fake=False)]
    from autotune.cli import main

    code = main(["sweep", *overrides, "workload.entry=no_such_pkg.models:make"])
    err = harness.capsys.readouterr().err
    # Rule: checked in a child process (the orchestrator never imports MindSpore) before
    # the first launch; the import error is quoted.
    assert_one_line_error(code, err, "workload.entry='no_such_pkg.models:make' cannot be "
                          "imported", "No module named 'no_such_pkg'")
    assert not harness.runs.exists()
    code = main(["sweep", *overrides, "workload.entry=tests.user_workload:no_such_factory"])
    assert_one_line_error(code, harness.capsys.readouterr().err, "no_such_factory")


@pytest.mark.slow  # the child builds the workload as a trial does: it imports MindSpore
@pytest.mark.parametrize("factory, needle", [
    ("gives_dict", "returned dict, not a trials.workload.Workload"),
    ("gives_none", "returned NoneType, not a trials.workload.Workload"),
    ("raises", "RuntimeError: no weights at /data/x"),
])
def test_a_workload_factory_that_builds_no_workload_launches_nothing(harness, tmp_path,
                                                                     monkeypatch, factory,
                                                                     needle):
    code_dir = tmp_path / "code"
    code_dir.mkdir()
    (code_dir / "bad_factories.py").write_text(
        "def gives_dict(cfg):\n    return {'model': None}\n\n"
        "def gives_none(cfg):\n    return None\n\n"
        "def raises(cfg):\n    raise RuntimeError('no weights at /data/x')\n")
    monkeypatch.setenv("PYTHONPATH", str(code_dir))
    space = harness.space("ok", {"train.micro_batches": [1, 2]})
    code, _, err = harness.main("sweep", *harness.overrides(space, fake=False),
                                f"workload.entry=bad_factories:{factory}")
    # Rule: the factory is called as a trial calls it, before the study is written.
    assert_one_line_error(code, err, f"workload.entry='bad_factories:{factory}' does not "
                          "build a workload", needle)
    assert not harness.runs.exists()


def test_a_relative_pythonpath_is_the_directory_the_command_runs_from(monkeypatch):
    """``PYTHONPATH=tests python -m autotune sweep workload.entry=user_workload:...`` (the
    README's example) imports, though the check and the trials run in other directories."""
    from autotune.running.preflight import check_workload_entry
    from tests.conftest import ROOT
    from trials.contract.launch import trial_env

    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("PYTHONPATH", "tests")
    assert str(ROOT / "tests") in trial_env(dict(os.environ))["PYTHONPATH"].split(os.pathsep)
    reach = check_workload_entry("user_workload:make_workload")
    assert reach is not None and reach.recompute, reach  # its blocks() recompute


# -- user files and data paths, validated at composition ---------------------------------------
def _user_file(harness, relative: str, text: str) -> None:
    path = harness.conf / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


@pytest.mark.parametrize("relative, text, search, extra, needles", [
    # A YAML syntax error: the file, line and column, not PyYAML's parser state alone.
    ("search/broken.yaml", "name: broken\nknobs:\n  train.micro_batches: [1, 2\n", "broken", (),
     ("broken.yaml, line 3, column 24: YAML syntax error", "fix the file's syntax")),
    # A list where the schema wants a mapping: the key, the file, the shape to write.
    ("search/listed.yaml", "name: listed\nknobs:\n  - train.micro_batches\n  - [1, 2]\n",
     "listed", (), ("listed.yaml: search.knobs is a list; it must be a mapping",)),
    ("hardware/mine.yaml", "name: mine\nsupports: [bf16]\n", "ok", ("hardware=mine",),
     ("mine.yaml: hardware.supports is a list; it must be a mapping",)),
    # A search-space value is held to its field's own rule (schema metadata), before launch.
    ("search/negative.yaml", "name: negative\nknobs:\n  train.micro_batches: [-2, 1]\n",
     "negative", (), ("search knob train.micro_batches=-2 must be >= 1",)),
    ("search/threads.yaml", "name: threads\nknobs:\n  runtime.threads: [2, -1]\n", "threads",
     (), ("search knob runtime.threads=-1 must be >= 0",)),
])
def test_bad_user_files_are_one_line_naming_the_file(harness, relative, text, search, extra,
                                                    needles):
    harness.space("ok", {"train.micro_batches": [1, 2]})
    _user_file(harness, relative, text)
    code, _, err = harness.run(search, *extra)
    assert_one_line_error(code, err, *needles)
    assert not harness.runs.exists()


def test_a_missing_search_path_is_our_one_line_only(harness, tmp_path):
    from autotune.cli import main

    space = harness.space("ok", {"train.micro_batches": [1, 2]})
    missing = tmp_path / "no-such-conf"
    code = main(["sweep", *harness.overrides(space), f"hydra.searchpath=[file://{missing}]"])
    # Rule: not Hydra's two-line warning and a run without the user's files: one line.
    assert_one_line_error(code, harness.capsys.readouterr().err,
                          f"hydra.searchpath: file://{missing} is not a directory")
    assert not harness.runs.exists()


@pytest.mark.parametrize("layout, needle", [
    (None, "does not exist (or is not a directory)"),
    ({}, "holds no text files (.py, .txt, .md, .rst"),
    ({"short.txt": "too short"}, "no text file is long enough for one window of 33 bytes"),
])
def test_a_text_dir_that_cannot_feed_a_trial_is_refused_at_composition(harness, tmp_path,
                                                                      layout, needle):
    space = harness.space("ok", {"train.micro_batches": [1, 2]})
    text_dir = tmp_path / "texts"
    if layout is not None:
        text_dir.mkdir()
        for name, body in layout.items():
            (text_dir / name).write_text(body)
    # workload=gpt_tiny: seq_len 32, so a window is 33 bytes.
    code, _, err = harness.run(space, f"data.text_dir={text_dir}", fake=False)
    assert_one_line_error(code, err, f"data.text_dir={text_dir}", needle)
    assert not harness.runs.exists()


def test_a_simulated_sweep_needs_a_peak_in_its_profile_before_anything_is_written(harness):
    space = harness.space("ok", {"train.micro_batches": [1, 2]})
    _user_file(harness, "hardware/nopeak.yaml",
               "name: nopeak\nbackend: GPU\ndevices: 1\ndevice_memory_gib: 80.0\n")
    code, _, err = harness.run(space, "hardware=nopeak", "sweep.simulate=true")
    # Rule: the fix fits the backend: an accelerator's peak is the profile's to give.
    assert_one_line_error(code, err, "sweep.simulate=true needs a step time",
                          "hardware profile nopeak (GPU) has no peak FLOP/s for float32",
                          "add peak_tflops: {float32: N} to the profile")
    assert "calibrate" not in err
    assert not harness.runs.exists()


# -- search-space knobs: settings of the trial, each value once ---------------------------------
SECTIONS = "workload, precision, hardware, runtime, parallel, train, data, run, guard"


@pytest.mark.parametrize("program, needle", [
    ("/nonexistent/prog", "/nonexistent/prog does not exist"),
    ("nosuchprog_xyz", "nosuchprog_xyz is not on PATH"),
])
def test_a_trial_command_that_cannot_start_is_refused_before_anything_runs(harness, program,
                                                                           needle):
    harness.space("one", {"train.micro_batches": [1, 2]})
    code, _, err = harness.run("one", f"sweep.trial_command=[{program}]", fake=False)
    # Rule: the program is checked before the study is created (it was a traceback, a
    # trial left RUNNING in the study and its directory behind).
    assert_one_line_error(code, err, "sweep.trial_command", needle)
    assert not harness.runs.exists()


@pytest.mark.parametrize("knobs, needles", [
    # The sweep's own settings are not knobs: a sweep that "tunes" its budget or its report.
    ({"sweep.n_trials": [1, 2]}, ("'sweep.n_trials' is a setting of the sweep", SECTIONS)),
    ({"report.out": ["a", "b"]}, ("'report.out' is a setting of the sweep", SECTIONS)),
    ({"search.devices": [1, 2]}, ("'search.devices' is a setting of the sweep", SECTIONS)),
    # A path in no schema at all.
    ({"model.width": [1, 2]}, ("'model.width' is not a setting of the trial", SECTIONS)),
    # A path into a trial section that has no such field: the section's fields are listed.
    ({"train.micro_btches": [1, 2]}, ("not a field of train", "micro_batches")),
    ({"hardware.intra_node.bandwith_gbs": [1, 2]},
     ("not a field of hardware.intra_node", "bandwidth_gbs")),
    # A section, and a path below a value.
    ({"train": [1, 2]}, ("'train' is a section, not a value", "micro_batches")),
    ({"train.lr.peak": [1, 2]}, ("goes below train.lr, which is a value",)),
    # Each value once: a repeat is a typo, not a second point.
    ({"train.micro_batches": [1, 2, 1]}, ("'train.micro_batches' lists 1 twice",)),
    ({"precision": ["fp16", "fp32", "fp16"]}, ("'precision' lists fp16 twice",)),
    ({"parallel.split": ["1x1x1", "1x1x1"]}, ("'parallel.split' lists 1x1x1 twice",)),
    # ... as the field reads it: "2" is 2 for an integer field, "graph" the mode.
    ({"runtime.threads": ["2", 2]}, ("'runtime.threads' lists 2 twice",)),
    ({"data.multiprocessing": [True, "true"]}, ("'data.multiprocessing' lists",)),
])
def test_a_knob_is_a_setting_of_the_trial_listed_once(harness, knobs, needles):
    harness.space("bad", knobs)
    code, _, err = harness.run("bad")
    # Rule: a knob path resolves in the trial's schema (TrialConfig's dataclasses) and its
    # values are distinct; else one line naming the knob and what may be tuned, nothing written.
    assert_one_line_error(code, err, "search knob", *needles)
    assert not harness.runs.exists()


@pytest.mark.parametrize("path", ["precision", "parallel.split", "train.micro_batches",
                                  "hardware.intra_node.latency_us", "workload.options.width",
                                  "run.steps"])
def test_paths_into_the_trial_schema_are_knobs(path):
    from autotune.search.space import trial_path_problem

    # Rule: groups, fields of sections (nested too), free-form dict entries and the split.
    assert trial_path_problem(path) is None


# -- a wrongly typed value in any config-group file: the file, line, key, value and type ---------
@pytest.mark.parametrize("relative, text, extra, needles", [
    ("hardware/mine.yaml", "name: mine\ndevices: two\n", ("hardware=mine",),
     ("mine.yaml, line 2: hardware.devices: 'two' is not a whole number", "'devices: 1'")),
    ("hardware/mine.yaml", "name: mine\nbackend: TPU\n", ("hardware=mine",),
     ("line 2: hardware.backend: 'TPU' is not one of CPU, GPU, Ascend",)),
    # A nested section's field: the full key, and the line where it sits in the file.
    ("hardware/mine.yaml", "name: mine\nintra_node:\n  latency_us: fast\n", ("hardware=mine",),
     ("line 3: hardware.intra_node.latency_us: 'fast' is not a number", "'latency_us: 10.0'")),
    # A key the section does not have: its keys, to check the spelling against.
    ("hardware/mine.yaml", "name: mine\ndevice: 2\n", ("hardware=mine",),
     ("line 2: hardware.device is not a key of hardware", "device_memory_gib")),
    ("precision/mine.yaml", "name: mine\nscale_window: lots\n", ("precision=mine",),
     ("mine.yaml, line 2: precision.scale_window: 'lots' is not a whole number",)),
    ("workload/mine.yaml", "name: mine\nn_layers: 2.5\n", ("workload=mine",),
     ("mine.yaml, line 2: workload.n_layers: 2.5 is not a whole number",)),
    ("data/mine.yaml", "source: text\nmultiprocessing: maybe\n", ("data=mine",),
     ("line 2: data.multiprocessing: 'maybe' is not true or false",)),
    # The search space's own file, an optional field: "or null", no default to copy.
    ("search/mine.yaml", "name: mine\ndevices: two\nknobs:\n  train.micro_batches: [1, 2]\n",
     (), ("line 2: search.devices: 'two' is not a whole number or null",
          "fix the value in the file")),
])
def test_a_wrongly_typed_value_in_a_config_file_names_file_key_value_and_type(
        harness, relative, text, extra, needles):
    harness.space("ok", {"train.micro_batches": [1, 2]})
    _user_file(harness, relative, text)
    code, _, err = harness.run("mine" if relative.startswith("search/") else "ok", *extra)
    # Rule: Hydra's "ValidationError raised while composing config" becomes the file (and
    # line), the full key, the value and what the schema's field takes, for every group.
    assert_one_line_error(code, err, str(harness.conf / relative), *needles)
    assert "raised while composing" not in err
    assert not harness.runs.exists()


def test_a_space_this_machine_cannot_run_is_refused_with_the_simulated_sweep_named(
        monkeypatch):
    from autotune.running import preflight
    from tests.fakes import trial_config
    from trials.contract.knob_reach import BUILT_IN
    from trials.contract.schema import ConfigError

    monkeypatch.setattr(preflight.os, "cpu_count", lambda: 2)
    cfg = trial_config()
    with pytest.raises(ConfigError) as caught:
        preflight.check_reach(cfg, {"data.num_workers": (1, 64)}, BUILT_IN, "accelerator")
    # Rule: the refusal names the spaces this machine runs and the simulated sweep, which
    # runs any space on the cost model (search=accelerator's own comment says so).
    text = str(caught.value)
    assert text.startswith("search space accelerator: data.num_workers=64")
    assert text.endswith("or sweep.simulate=true to sweep it on the cost model without "
                         "running it")


@pytest.mark.parametrize("command", ["report", "export", "confirm", "soak", "dashboard"])
def test_an_override_describing_another_run_than_the_stored_study_is_refused(harness,
                                                                            command):
    """A command that reads a stored study reads it as it was run: an override of what
    the study recorded (its workload, hardware, data, global batch) that differs is one
    line naming what it ran with, exit 2, nothing written; the sweep's own overrides, given
    again, pass."""
    harness.script()
    space = harness.space("ran", {"train.micro_batches": [1, 2]})
    code, _, err = harness.run(space, "sweep.n_trials=2")
    assert code == 0, err
    before = sorted(p.name for p in (harness.runs / "s").iterdir())
    code, _, err = harness.main(command, *harness.overrides(space), "workload.n_layers=7")
    assert_one_line_error(code, err, f"{command} reads study 's' as it was run, with "
                          "workload.n_layers=2", "workload.n_layers=7 would describe another run",
                          "drop it, or name the study that ran with it")
    assert sorted(p.name for p in (harness.runs / "s").iterdir()) == before
    # The same value as the run's is no contradiction, nor is the sweep's own override line.
    from autotune.settings import SweepConfig, validate_settings
    from autotune.study.as_run import contradicted
    from trials.contract.compose import compose

    for given in (["workload.n_layers=2"], []):
        overrides = [*harness.overrides(space), *given]
        composed = compose("sweep", overrides, schema=SweepConfig)
        assert contradicted(command, validate_settings(composed).sweep, composed,
                            overrides) is None
