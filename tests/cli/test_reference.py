"""The documentation's reference pages are the code's: generated, committed, and the same
table ``COMMAND --help`` prints."""

from __future__ import annotations

import re

import pytest

from autotune import reference
from autotune.cli import COMMANDS
from autotune.help import command_help
from tests.conftest import ROOT

REFERENCE = ROOT / "docs" / "reference"


@pytest.mark.parametrize("name", sorted(reference.PAGES))
def test_the_committed_reference_page_is_what_the_code_generates(name):
    committed = (REFERENCE / name).read_text()
    # Rule: a setting, command, outcome or record changed in the code changes its page;
    # `make docs` (python -m autotune.reference docs/reference) regenerates them.
    assert committed == reference.PAGES[name]().rstrip("\n") + "\n", (
        f"docs/reference/{name} is stale: run python -m autotune.reference docs/reference")


@pytest.mark.parametrize("verb", COMMANDS)
def test_every_setting_of_a_commands_help_is_in_the_reference_with_its_default(verb):
    page = (REFERENCE / "commands.md").read_text()
    section = page.split(f"\n## {verb}\n", 1)[1].split("\n## ", 1)[0]
    shown = re.findall(r"^  (\S+?)=(.*)$", command_help(verb), flags=re.M)
    rows = dict(re.findall(r"^\| `([^`]+)` \| [^|]* \| `([^`]*)` \|", section, flags=re.M))
    # Rule: the reference's table is the help's: the same settings, the same defaults.
    assert dict(shown) == rows


def test_the_trial_program_page_names_every_exit_code():
    from trials.contract.outcomes import Outcome

    page = (REFERENCE / "trial-program.md").read_text()
    for outcome in Outcome:
        code = outcome.meaning.exit_code
        row = re.search(rf"^\| `{outcome.value}` \| (\S+) \|", page, flags=re.M)
        # Rule: each outcome's row carries its exit code (or '-': the orchestrator's).
        assert row and row.group(1) == ("-" if code is None else str(code)), outcome
