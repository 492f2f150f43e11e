"""trials.contract.paths: what a path setting must be by its kind (an output directory it can
create or write, an input file or directory it can read), one phrase naming the fix; and
trials.contract.config_files: a value a config-group file holds that its schema refuses, as
one line naming the file, the line, the key, the value and what the field takes."""

from __future__ import annotations

import enum
import os
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.config_store import ConfigStore
from hydra.core.global_hydra import GlobalHydra
from omegaconf import OmegaConf
from omegaconf.errors import ValidationError

from trials.contract import paths
from trials.contract.config_files import chain, config_dirs, expected, validation_problem
from trials.contract.paths import (
    INPUT_DIR,
    INPUT_FILE,
    KINDS,
    OUTPUT_DIR,
    PSEUDO_FILESYSTEMS,
    filesystem_of,
    location_problem,
)


# -- paths: an output directory ----------------------------------------------------------
def test_an_output_dir_that_does_not_exist_yet_is_accepted_under_a_writable_one(tmp_path):
    # Rule: a missing output directory is fine when its nearest existing ancestor is a
    # writable directory (the command creates it); so is one that exists.
    assert location_problem(str(tmp_path / "runs" / "deep" / "new"), OUTPUT_DIR) is None
    assert location_problem(str(tmp_path), OUTPUT_DIR) is None
    assert not (tmp_path / "runs").exists()  # checking creates nothing


def test_an_output_dir_that_is_a_file_or_lies_under_one_is_refused(tmp_path):
    taken = tmp_path / "results.json"
    taken.write_text("{}")
    # Rule: an existing file is no output directory; the phrase says to choose a directory.
    problem = location_problem(str(taken), OUTPUT_DIR)
    assert problem is not None and problem.startswith("is not a directory")
    assert "choose a directory" in problem
    # Rule: below a file nothing can be created; the phrase names that file.
    assert location_problem(str(taken / "sub" / "dir"), OUTPUT_DIR) \
        == f"cannot be created: {taken} is a file, not a directory"


def test_an_output_dir_on_the_kernels_proc_filesystem_is_refused():
    if filesystem_of(Path("/proc")) != ("/proc", "proc"):
        pytest.skip("/proc is not a proc mount on this machine")
    # Rule: /proc takes no files: the phrase names the mount, its type and what to choose.
    problem = location_problem("/proc/autotune-runs", OUTPUT_DIR)
    assert problem == ("/proc is a proc filesystem (the kernel's, which holds no files): "
                       "choose a directory on a disk")


def test_every_pseudo_filesystem_is_refused_where_it_is_mounted(tmp_path, monkeypatch):
    mounted = tmp_path / "kernel"
    mounted.mkdir()
    monkeypatch.setattr(paths, "_mounts", lambda: [(str(mounted), "sysfs"), ("/", "ext4")])
    assert "sysfs" in PSEUDO_FILESYSTEMS
    # Rule: the filesystem of the nearest existing ancestor decides, whatever its path.
    problem = location_problem(str(mounted / "out" / "deeper"), OUTPUT_DIR)
    assert problem is not None and f"{mounted} is a sysfs filesystem" in problem
    assert problem.endswith("choose a directory on a disk")
    # Rule: a disk filesystem beside it is fine.
    assert location_problem(str(tmp_path / "out"), OUTPUT_DIR) is None


def test_an_unwritable_output_location_names_the_directory_that_is_not_writable(
        tmp_path, monkeypatch):
    locked = tmp_path / "locked"
    locked.mkdir()
    real_access = os.access
    # As a read-only mount looks to the check (root passes any chmod, so it is not used).
    monkeypatch.setattr(paths.os, "access",
                        lambda p, mode: Path(p) != locked and real_access(p, mode))
    # Rule: the nearest existing ancestor is the one that must be writable, and it is named.
    problem = location_problem(str(locked / "a" / "b"), OUTPUT_DIR)
    assert problem is not None
    assert problem.startswith(f"cannot be written: {locked} is not writable")
    assert "choose another directory" in problem
    assert location_problem(str(tmp_path / "free"), OUTPUT_DIR) is None


def test_the_mount_of_a_path_is_the_longest_mount_point_it_lies_under(monkeypatch):
    monkeypatch.setattr(paths, "_mounts", lambda: [
        ("/data/fast", "tmpfs"), ("/data", "xfs"), ("/", "overlay")])
    # Rule: the deepest mount point holding the path wins.
    assert filesystem_of(Path("/data/fast/x/y")) == ("/data/fast", "tmpfs")
    assert filesystem_of(Path("/data/fast")) == ("/data/fast", "tmpfs")
    # Rule: a mount point matches whole path components only (/data/fastlane is not under
    # /data/fast, /database is not under /data).
    assert filesystem_of(Path("/data/fastlane")) == ("/data", "xfs")
    assert filesystem_of(Path("/database")) == ("/", "overlay")


def test_the_real_mount_table_places_proc_and_a_temporary_directory(tmp_path):
    if not Path("/proc/self/mounts").is_file():
        pytest.skip("no /proc/self/mounts on this machine")
    # Rule: a path under /proc is on the proc filesystem; a test's tmp_path is on none of
    # the kernel's.
    assert filesystem_of(Path("/proc/self")) == ("/proc", "proc")
    mount = filesystem_of(tmp_path)
    assert mount is not None and mount[1] not in PSEUDO_FILESYSTEMS


# -- paths: inputs -----------------------------------------------------------------------
def test_a_missing_input_file_or_dir_is_refused(tmp_path):
    missing = str(tmp_path / "nowhere.txt")
    # Rule: an input must exist; the phrase says to check the path.
    assert location_problem(missing, INPUT_FILE) == "does not exist: check the path"
    assert location_problem(missing, INPUT_DIR) == "does not exist: check the path"


def test_an_input_of_the_wrong_kind_is_refused_and_the_right_kind_accepted(tmp_path):
    data = tmp_path / "corpus.txt"
    data.write_text("text")
    # Rule: an input file must be a file, an input directory a directory.
    assert location_problem(str(tmp_path), INPUT_FILE) == "is not a file: name the file itself"
    assert location_problem(str(data), INPUT_DIR) \
        == "is not a directory: name the directory that holds the files"
    assert location_problem(str(data), INPUT_FILE) is None
    assert location_problem(str(tmp_path), INPUT_DIR) is None


def test_an_unreadable_input_is_refused(tmp_path, monkeypatch):
    secret = tmp_path / "secret.txt"
    secret.write_text("x")
    real_access = os.access
    monkeypatch.setattr(paths.os, "access",
                        lambda p, mode: Path(p) != secret and real_access(p, mode))
    # Rule: an input must be readable.
    assert location_problem(str(secret), INPUT_FILE) == "cannot be read: check its permissions"


def test_a_home_relative_path_is_expanded_before_it_is_judged(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "corpus").mkdir()
    # Rule: ~ means the user's home directory, for every kind.
    assert location_problem("~/corpus", INPUT_DIR) is None
    assert location_problem("~/corpus", INPUT_FILE) == "is not a file: name the file itself"
    assert location_problem("~/corpus/new-runs", OUTPUT_DIR) is None
    assert set(KINDS) == {OUTPUT_DIR, INPUT_DIR, INPUT_FILE}


# -- config_files: where config groups are read from -------------------------------------
def test_config_dirs_are_the_file_search_path_entries_then_conf(tmp_path):
    conf = tmp_path / "conf"
    # Rule: file:// entries and bare folders, in order, then conf/; a pkg:// entry has no
    # folder and is left out.
    assert config_dirs(["file:///srv/mine", "pkg://somepkg.conf", "/opt/theirs"], conf) \
        == [Path("/srv/mine"), Path("/opt/theirs"), conf]
    assert config_dirs([], conf) == [conf]


# -- config_files: what a field takes, in words ------------------------------------------
class Level(enum.Enum):
    low = "low"
    high = "high"


@dataclass
class Section:
    name: str = "base"
    devices: int = 1
    flag: bool = True
    level: Level = Level.low
    ratio: float | None = None
    sizes: list = field(default_factory=list)


@dataclass
class Root:
    section: Section = field(default_factory=Section)


@pytest.mark.parametrize("hint, words", [
    (int, "a whole number"), (float, "a number"), (bool, "true or false"), (str, "a string"),
    (dict, "a mapping"), (dict[str, int], "a mapping"), (list, "a list"),
    (list[int], "a list"), (int | None, "a whole number or null"),
    (Level, "one of low, high"), (Level | None, "one of low, high or null"),
    (Section, "a mapping (a section of its own)"), (Path, "a Path"),
], ids=lambda v: None if isinstance(v, str) else str(getattr(v, "__name__", v)))
def test_expected_says_what_a_field_type_takes_in_words(hint, words):
    # Rule: a type becomes the words a user reads ("or null" for an optional one).
    assert expected(hint) == words


def test_chain_walks_causes_outermost_first_and_stops_on_a_loop():
    inner = KeyError("inner")
    middle = ValueError("middle")
    middle.__context__ = inner
    outer = RuntimeError("outer")
    outer.__cause__ = middle
    outer.__context__ = TypeError("ignored: the cause comes first")
    # Rule: the explicit cause is followed before the context, outermost first.
    assert list(chain(outer)) == [outer, middle, inner]
    inner.__context__ = outer  # a cycle
    # Rule: each exception is yielded once.
    assert list(chain(outer)) == [outer, middle, inner]
    assert list(chain(None)) == []


# -- config_files: a refused value in a group file ---------------------------------------
SCHEMA = "test_contract_files_schema"
ConfigStore.instance().store(name=SCHEMA, node=Root)


def composition_error(conf: Path, body: str) -> BaseException:
    """What Hydra raises composing conf/main.yaml with section/mine.yaml holding ``body``."""
    (conf / "section").mkdir(parents=True, exist_ok=True)
    (conf / "main.yaml").write_text(
        f"defaults:\n  - {SCHEMA}\n  - section: mine\n  - _self_\n")
    (conf / "section" / "mine.yaml").write_text(body)
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(conf), version_base="1.3"):
            compose(config_name="main")
    except Exception as exc:  # noqa: BLE001 - the error under test
        return exc
    finally:
        GlobalHydra.instance().clear()
    raise AssertionError(f"composing {body!r} raised nothing")


@pytest.mark.parametrize("body, line", [
    # A wrong type names the file and line, the key, the value, the type in words and the
    # default to copy.
    ("name: mine\ndevices: two\n",
     "line 2: section.devices: 'two' is not a whole number; write e.g. 'devices: 1' "
     "(the default)"),
    ("flag: maybe\n",
     "line 1: section.flag: 'maybe' is not true or false; write e.g. 'flag: true' "
     "(the default)"),
    ("name: mine\nlevel: mid\n",
     "line 2: section.level: 'mid' is not one of low, high; write e.g. 'level: low' "
     "(the default)"),
    # No default to copy (null): the line says to fix the value.
    ("ratio: lots\n",
     "line 1: section.ratio: 'lots' is not a number or null; fix the value in the file"),
    # A key the section does not have: its keys, to check the spelling against.
    ("name: mine\n\ndevice: 2\n",
     "line 3: section.device is not a key of section; its keys are name, devices, flag, "
     "level, ratio, sizes (check the spelling)"),
], ids=["whole-number", "bool", "enum", "optional-no-default", "unknown-key"])
def test_a_refused_value_is_one_line_naming_file_line_key_value_and_type(tmp_path, body, line):
    conf = tmp_path / "conf"
    exc = composition_error(conf, body)
    # Rule: one line: "<file>, line N: <key>: <value> is not <type>; <fix>".
    assert validation_problem(exc, [conf]) == f"{conf / 'section' / 'mine.yaml'}, {line}"


def test_the_file_named_is_the_first_config_folder_that_holds_it(tmp_path):
    conf = tmp_path / "conf"
    exc = composition_error(conf, "devices: two\n")
    mine = tmp_path / "mine"
    (mine / "section").mkdir(parents=True)
    (mine / "section" / "mine.yaml").write_text("# a note\n\ndevices: two\n")
    # Rule: the search path's folders are looked at first; the line is that file's.
    assert validation_problem(exc, [mine, conf]).startswith(
        f"{mine / 'section' / 'mine.yaml'}, line 3: section.devices: 'two'")
    # Rule: when no folder holds it, the file is named by its group path and no line.
    assert validation_problem(exc, [tmp_path / "empty"]).startswith(
        "section/mine.yaml: section.devices: 'two' is not a whole number")


def test_an_error_that_is_not_a_file_validation_gives_none(tmp_path):
    cfg = OmegaConf.structured(Root)
    with pytest.raises(ValidationError) as setting:
        cfg.section.devices = "two"  # OmegaConf's own error: no composition, no file
    # Rule: only a composition's validation error of a group file is this module's; a plain
    # error or OmegaConf's outside a composition is left to its own message.
    assert validation_problem(setting.value, [tmp_path]) is None
    assert validation_problem(ValueError("In 'section/mine': nope"), [tmp_path]) is None
