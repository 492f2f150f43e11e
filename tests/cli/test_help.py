"""autotune.help: a command's --help page is its docstring and the settings it reads, each
with its default and its #: comment from autotune.settings."""

from __future__ import annotations

from dataclasses import dataclass, field

from autotune.help import command_help, field_notes, plain, settings_lines, settings_rows


def test_plain_drops_rst_literals_and_roles_across_lines():
    # Rule: ``x`` -> x (also across a line break) and :mod:`x` / :func:`~x` -> x.
    assert plain("run ``python -m\nautotune`` see :mod:`autotune.settings` and "
                 ":func:`~a.b`") == "run python -m\nautotune see autotune.settings and a.b"


@dataclass
class Inner:
    #: Depth of the thing.
    depth: int = 2


@dataclass
class Demo:
    #: First line of the note,
    #: second line.
    name: str = ""
    # a plain comment is not a note
    flag: bool = True
    off: object = None
    inner: Inner = field(default_factory=Inner)


def test_field_notes_join_the_hash_colon_lines_just_above_a_field():
    # Rule: consecutive #: lines are one sentence for the field below; plain # is not one.
    assert field_notes(Demo) == {"name": "First line of the note, second line."}


def test_settings_lines_show_defaults_as_written_on_the_command_line():
    lines = settings_lines(settings_rows(Demo, "demo"))
    # Rule: "" -> '', booleans lower case, None -> null; nested groups expanded by path.
    assert "  demo.name=''" in lines and "  demo.flag=true" in lines
    assert "  demo.off=null" in lines and "  demo.inner.depth=2" in lines
    # Rule: the note is printed under its field, indented.
    note = lines[lines.index("  demo.name=''") + 1]
    assert note == "      First line of the note, second line."


def test_a_commands_page_has_its_usage_docstring_and_its_settings_group():
    page = command_help("profile")
    # Rule: the usage line, then the command's settings with defaults and their notes.
    assert page.startswith("usage: python -m autotune profile ")
    assert "  profile.steps=10" in page and "  profile.after_sweep=true" in page
    assert "Profiled steps, after warm-up and measurement" in page
    # Rule: a command that reads no settings group (calibrate-host) lists none.
    assert "Its settings" not in command_help("calibrate-host")
