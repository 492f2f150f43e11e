"""Every `python -m autotune ...` command line the README shows runs as shown.

Each runs with ``--print-config`` (composition and the whole validation, nothing
launched); the commands that run trials for real are exercised end to end by
test_export_confirm.py and test_sweep_e2e.py. Placeholders a reader replaces
(``/path/to/conf``, ``/path/to/code``) are replaced with real directories.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, project_env

README = (ROOT / "README.md").read_text()


def readme_commands() -> list[str]:
    """`python -m autotune` lines of code blocks (continuations joined) and inline spans."""
    found = []
    for block in re.findall(r"```bash\n(.*?)```", README, flags=re.S):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.split("#", 1)[0].strip()
            if "python -m autotune" in line:
                found.append(line)
    found += re.findall(r"`([^`\n]*python -m autotune[^`\n]*)`", README)
    return list(dict.fromkeys(found))


COMMANDS = readme_commands()


def test_the_readme_shows_every_command():
    verbs = {c.split("python -m autotune", 1)[1].split()[0] for c in COMMANDS}
    assert verbs == {"sweep", "plan", "report", "confirm", "export", "profile", "commbench",
                     "soak", "tune"}, COMMANDS


@pytest.mark.parametrize("line", COMMANDS)
def test_readme_command_line_composes_and_validates(line, tmp_path):
    conf = tmp_path / "conf"
    (conf / "search").mkdir(parents=True)
    (conf / "search" / "mine.yaml").write_text("name: mine\nknobs:\n  runtime.threads: [1, 2]\n")
    code = tmp_path / "code"
    code.mkdir()
    line = line.replace("/path/to/conf", str(conf)).replace("/path/to/code", str(code))
    env = project_env()
    words = shlex.split(line)
    while "=" in words[0]:  # leading VAR=value assignments
        name, value = words.pop(0).split("=", 1)
        env[name] = value
    # .venv-mindformers/bin/python: the same program; its composition is checked here.
    assert Path(words[0]).name == "python" and words[1:3] == ["-m", "autotune"], line
    argv = [sys.executable, *words[1:], "--print-config"]
    proc = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, f"{line}\n{proc.stderr}"
    assert "sweep:" in proc.stdout and not proc.stderr.strip(), proc.stderr


def test_help_lists_the_commands():
    proc = subprocess.run([sys.executable, "-m", "autotune", "--help"], cwd=ROOT,
                          env=project_env(), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0
    for verb in ("sweep", "plan", "report", "confirm", "export", "profile", "commbench", "soak",
                 "tune"):
        assert verb in proc.stdout
