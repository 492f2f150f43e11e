"""Every module of ``autotune`` and ``trials`` is imported by at least one test, or run by
one as ``python -m <module>``: a module no test names is tested, if at all, only by
accident of another test's path through it (issue 31)."""

from __future__ import annotations

import ast
import functools

from tests.conftest import ROOT

TOPS = ("autotune", "trials")


def modules() -> set[str]:
    """Every module of the project's packages, dotted (a package by its own name)."""
    out = set()
    for top in TOPS:
        for path in (ROOT / top).rglob("*.py"):
            if "__pycache__" in path.parts:
                continue
            parts = path.relative_to(ROOT).with_suffix("").parts
            out.add(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return out


def named_by(tree: ast.AST) -> set[str]:
    """What a test file imports (``import a.b``, ``from a.b import c``: ``a.b`` and
    ``a.b.c``, which may be a module) and what it runs (``[..., "-m", "a.b", ...]``: ``a.b``
    and ``a.b.__main__``)."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, (ast.List, ast.Tuple)):
            for flag, value in zip(node.elts, node.elts[1:]):
                if (isinstance(flag, ast.Constant) and flag.value == "-m"
                        and isinstance(value, ast.Constant) and isinstance(value.value, str)):
                    names.update({value.value, f"{value.value}.__main__"})
    return names


def untested(named_by_file: dict[str, set[str]]) -> list[str]:
    """The project's modules that no test file (path -> what it names) imports or runs
    (importing ``a.b.c`` imports the packages ``a`` and ``a.b`` too)."""
    named = set().union(*named_by_file.values())
    named |= {name.rsplit(".", k)[0] for name in named for k in range(1, name.count(".") + 1)}
    return sorted(m for m in modules() if m not in named)


@functools.cache
def named_in_tests() -> dict[str, set[str]]:
    """What each test file names, parsed once."""
    return {str(p): named_by(ast.parse(p.read_text())) for p in (ROOT / "tests").rglob("*.py")}


def test_every_module_is_imported_or_run_by_a_test():
    # Rule: each module has a test that names it.
    assert untested(named_in_tests()) == []


def test_a_module_named_by_no_test_is_found():
    # Rule: the check can fail: with the test files that name it left out, a module shows.
    naming = [path for path, names in named_in_tests().items()
              if "autotune.study.futility" in names]
    assert naming
    left = {path: names for path, names in named_in_tests().items() if path not in naming}
    assert "autotune.study.futility" in untested(left)
    # ... and one run as ``python -m`` counts as named.
    assert "autotune.__main__" in named_by(ast.parse('argv = [sys.executable, "-m", "autotune"]'))
