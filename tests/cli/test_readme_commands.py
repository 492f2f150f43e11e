"""Every `python -m autotune ...` command line the README and the documentation show runs
as shown.

Each runs with ``--print-config`` (composition and the whole validation, nothing
launched). Those that take seconds run for real as written: ``plan`` and ``calibrate``,
and ``report`` and the ``export`` lines on a default study of scripted trials, each with
the exit code the README gives it. The commands that run trials for minutes are exercised
end to end by test_export_confirm.py, test_sweep_e2e.py and the tests of each command.
Placeholders a reader replaces (``/path/to/conf``, ``/path/to/code``) are replaced with
real directories.
The help's examples compose the same way, and every command it lists dispatches to
code that exists (each refuses a bad input from its own module).
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from autotune.reference import GENERATED
from autotune.testing.fake_trial import COMMAND as FAKE_TRIAL
from autotune.testing.virtual import virtual_runner
from tests.conftest import ROOT, project_env

#: The pages a reader follows: the README and the documentation site's sources. Left out:
#: the generated reference (its text is the commands' own help, composed by
#: test_help_examples_compose) and the benchmarks' history (a dated record of commands as
#: they were then, not instructions).
PAGES = [ROOT / "README.md", *(
    page for page in sorted((ROOT / "docs").rglob("*.md"))
    if page.name != "benchmarks-history.md" and not page.read_text().startswith(GENERATED))]
README = "\n\n".join(page.read_text() for page in PAGES)


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
    # (`python -m autotune --help` and `... COMMAND --help` are lines too, of no one verb.)
    verbs = {word for c in COMMANDS
             if not (word := c.split("python -m autotune", 1)[1].split()[0]).startswith("-")
             and not word.isupper()}
    assert verbs == {"sweep", "plan", "report", "confirm", "export", "profile", "commbench",
                     "soak", "dashboard", "tune", "calibrate-host", "calibrate"}, COMMANDS


@pytest.mark.parametrize("line", COMMANDS)
def test_readme_command_line_composes_and_validates(line, tmp_path, monkeypatch, capsys):
    """Each line as the shell splits it, run in this process (``autotune.cli.main`` is what
    ``python -m autotune`` runs; the fast command below runs one as a process)."""
    from autotune.cli import main

    conf = tmp_path / "conf"
    (conf / "search").mkdir(parents=True)
    (conf / "search" / "mine.yaml").write_text("name: mine\nknobs:\n  runtime.threads: [1, 2]\n")
    code = tmp_path / "code"
    code.mkdir()
    line = line.replace("/path/to/conf", str(conf)).replace("/path/to/code", str(code))
    words = shlex.split(line)
    while "=" in words[0]:  # leading VAR=value assignments
        name, value = words.pop(0).split("=", 1)
        monkeypatch.setenv(name, value)
    # .venv-mindformers/bin/python: the same program; its composition is checked here.
    assert Path(words[0]).name == "python" and words[1:3] == ["-m", "autotune"], line
    monkeypatch.chdir(tmp_path)
    if "--help" in words:  # a help page: printed, nothing composed
        with pytest.raises(SystemExit) as exit_:
            main(words[3:])
        assert exit_.value.code in (0, None) and capsys.readouterr().out.startswith("usage: ")
        return
    assert main([*words[3:], "--print-config"]) == 0, f"{line}\n{capsys.readouterr().err}"
    out = capsys.readouterr()
    assert "sweep:" in out.out and not out.err.strip(), out.err


def help_text() -> str:
    proc = subprocess.run([sys.executable, "-m", "autotune", "--help"], cwd=ROOT,
                          env=project_env(), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


#: Per command, input that composes and validates but that the command's own module
#: rejects before it runs anything, and a phrase of its error. Reaching that error proves
#: ``python -m autotune COMMAND`` dispatches to a module and function that exist.
DISPATCH = {
    "sweep": (["sweep.parallel_trials=3"], "sweep.parallel_trials=3 trials side by side"),
    "tune": (["sweep.parallel_trials=3"], "sweep.parallel_trials=3 trials side by side"),
    "plan": (["plan.split=[3x1x1]"], "uses 3 devices; the cluster has"),
    "commbench": (["hardware=ascend_910b", "commbench.ranks=64"],
                  "commbench.ranks=64 exceeds the 8 devices"),
    "report": ([], "no study database"),
    "confirm": ([], "no study database"),
    "export": ([], "no study database"),
    "profile": (["profile.trial=1"], "no study database"),
    "soak": ([], "no study database"),
    "dashboard": ([], "no study database"),
    "calibrate-host": (["hardware=ascend_910b"], "calibrate-host measures this machine's CPU"),
    "calibrate": ([], "calibrate needs calibrate.csv=PATH"),
}


def test_help_lists_the_commands():
    text = help_text()
    commands = re.search(r"\{([a-z,-]+)\}", text).group(1).split(",")
    examples = re.findall(r"^\s*python -m autotune ([a-z-]+)", text, flags=re.M)
    for verb in ("sweep", "plan", "report", "confirm", "export", "profile", "commbench", "soak",
                 "dashboard", "tune", "calibrate-host", "calibrate"):
        assert verb in commands
    # Rule: every example in the help names a command the parser accepts, and every
    # command has an example.
    assert set(examples) <= set(commands), set(examples) - set(commands)
    assert set(commands) <= set(examples), set(commands) - set(examples)
    # Every command the parser accepts has a dispatch case below (a new one needs one).
    assert set(commands) == set(DISPATCH)


def test_help_is_plain_text():
    # Rule: --help shows no reStructuredText markup (``literal``), only what to type.
    assert "``" not in help_text()


@pytest.mark.parametrize("command", sorted(DISPATCH))
def test_each_command_has_its_own_help(command, capsys):
    from autotune.cli import main

    with pytest.raises(SystemExit) as ended:
        main([command, "--help"])
    text = capsys.readouterr().out
    assert ended.value.code == 0
    # Rule: COMMAND --help is that command's page, plain text: its usage and what it does,
    # not the list of every verb.
    assert text.startswith(f"usage: python -m autotune {command} ")
    assert f"python -m autotune {command}:" in text and "{sweep,plan" not in text
    assert "``" not in text
    if command == "confirm":
        # Rule: each setting with its default and the comment written above its field.
        assert "confirm.top_k=3" in text and "How many of the fastest" in text


def test_help_examples_compose(capsys):
    from autotune.cli import main

    lines = re.findall(r"^\s*python -m autotune (.*?)(?:\s+#.*)?$", help_text(), flags=re.M)
    assert len(lines) >= len(DISPATCH)
    for line in lines:
        words = [w for w in shlex.split(line) if w != "--print-config"]
        code = main([*words, "--print-config"])
        out = capsys.readouterr()
        # Rule: each example of the help composes and validates as shown.
        assert code == 0, f"{line}\n{out.err}"


@pytest.mark.parametrize("command", sorted(DISPATCH))
def test_every_command_dispatches(command, tmp_path, capsys):
    from autotune.cli import main

    overrides, needle = DISPATCH[command]
    runs = tmp_path / "runs"
    code = main([command, f"sweep.runs_dir={runs}", "sweep.study=nothing-here", *overrides])
    err = capsys.readouterr().err
    # Rule: the command's own module ran and refused the input: one line naming the fix,
    # exit code 2, no traceback (an ImportError or AttributeError would be one), nothing
    # written.
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("autotune: error: "), err
    assert needle in lines[0], lines[0]
    assert not runs.exists()


def test_the_readme_search_space_is_the_file():
    import yaml

    shown = re.search(r"\(`conf/search/default.yaml`, as it is\):\n\n```yaml\n(.*?)```", README,
                      flags=re.S).group(1)
    # Rule: the README's default space is the file's, every knob of it.
    assert yaml.safe_load(shown) == yaml.safe_load(
        (ROOT / "conf" / "search" / "default.yaml").read_text())


def test_commands_that_change_the_space_or_workload_name_a_study_of_their_own():
    # Rule: a sweep over another space or workload would be refused by the default study's
    # fingerprint, so the README gives each its own sweep.study.
    changing = [c for c in COMMANDS if "python -m autotune sweep" in c
                and re.search(r"\b(search|workload(\.entry)?)=", c)]
    assert changing, COMMANDS
    for line in changing:
        assert "sweep.study=" in line, line


def test_two_exports_of_one_study_go_to_directories_of_their_own():
    exports = [c for c in COMMANDS if "python -m autotune export" in c and "sweep.study" not in c]
    outs = [re.search(r"export\.out=(\S+)", c) for c in exports]
    # Rule: every export of the default study names its export.out, each a different one
    # (the second would find the first's job in the default directory and refuse).
    assert all(outs), exports
    assert len({m.group(1) for m in outs}) == len(outs), exports


def test_the_readme_profiles_without_a_trial_number_and_confirms_as_configured():
    from autotune.settings import ConfirmSettings

    # Rule: the README's profile command works on a fresh sweep (no trial number to guess).
    assert "python -m autotune profile" in COMMANDS
    # Rule: "top N + the baseline" is confirm.top_k's default, which counts the others.
    top = int(re.search(r"python -m autotune confirm +# top (\d+) \+ the baseline", README)
              .group(1))
    assert top == ConfirmSettings().top_k


def test_the_readme_says_what_ci_runs():
    ci = (ROOT / ".ci" / "run").read_text()
    said = README.split("CI (`.ci/run`) runs more than `make test`", 1)[1].split("\n\n", 1)[0]
    # Rule: every step of .ci/run is named where the README says what CI runs.
    for step in re.findall(r"^(?:bash \.ci/([\w-]+)|make ([\w-]+))", ci, flags=re.M):
        name = step[0] or step[1]
        assert name in said, (name, said)


#: README commands that take seconds and need no study: run for real, as written.
FAST = ("python -m autotune plan ", "python -m autotune calibrate ")


@pytest.mark.parametrize("line", [c for c in COMMANDS if c.startswith(FAST)])
def test_readme_fast_command_runs_as_written(line, tmp_path, monkeypatch, capsys):
    from autotune.cli import main
    from autotune.settings import PlanSettings

    # The README's paths are the checkout's (examples/...); what a command writes goes
    # under this directory (runs/), the fit it stores into a cache of the test's own.
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("AUTOTUNE_CACHE", str(tmp_path / "cache"))
    code = main(shlex.split(line)[3:])
    out = capsys.readouterr()
    assert code == 0, f"{line}\n{out.err}"
    if " plan " in line:
        # Rule: plan writes its table and its plot where it says, and prints the ranking.
        (written,) = (tmp_path / "runs" / "plan").iterdir()
        assert {"plan.csv", "plan.md", "plan.png"} <= {p.name for p in written.iterdir()}
        assert "rank" in out.out
        import pandas as pd

        df = pd.read_csv(written / "plan.csv")
        ranked = df[df["fits"]].sort_values("rank").head(PlanSettings().show)
        # Rule: a ranked point whose predicted peak is only "tight" says so in the table.
        if ranked["tight"].any():
            assert " tight " in out.out and "may run out of memory" in out.out, out.out


#: README commands that read the default study and launch nothing, with the exit code the
#: README's words give them (the MindFormers merge of the CPU study is "refused").
ON_THE_STUDY = {
    "python -m autotune report": 0,
    "python -m autotune export export.out=best_job": 0,
    "python -m autotune export export.mindformers_base=examples/mindformers/llama2_7b.yaml "
    "export.out=job_llama2": 2,
    "python -m autotune export export.mindformers_base=examples/mindformers/llama2_7b.yaml "
    "'export.mindformers_transfer=[data,memory]' export.out=job_llama2_data": 0,
}


def test_readme_commands_on_the_default_study_run_as_written(tmp_path, monkeypatch, capsys):
    from autotune.cli import main

    assert set(ON_THE_STUDY) <= set(COMMANDS), set(ON_THE_STUDY) - set(COMMANDS)
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    monkeypatch.chdir(tmp_path)
    # The default study, its trials scripted (autotune/testing/fake_trial.py): two of the default
    # space, so that what follows reads a study as `make sweep` leaves one.
    monkeypatch.setenv("AUTOTUNE_FAKE", "{}")
    fake = f"sweep.trial_command=[{','.join(FAKE_TRIAL)}]"
    with virtual_runner():  # the scripted trials in virtual time
        assert main(["sweep", "sweep.n_trials=2", "sweep.progress=false", fake]) == 0
        codes = {}
        for line in ON_THE_STUDY:
            capsys.readouterr()
            codes[line] = (main(shlex.split(line)[3:]), capsys.readouterr().err)
    for line, expected in ON_THE_STUDY.items():
        code, err = codes[line]
        # Rule: each exits as the README says, and a refusal is one line.
        assert code == expected, f"{line}\n{err}"
        if expected == 2:
            assert len(err.strip().splitlines()) == 1, err
    assert (tmp_path / "runs" / "default" / "report" / "index.md").exists()
    assert (tmp_path / "best_job" / "launch.sh").exists()
    assert (tmp_path / "job_llama2_data" / "mindformers.yaml").exists()
    assert not (tmp_path / "job_llama2").exists()
