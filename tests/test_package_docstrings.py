"""Each package's docstring lists its modules as they are: every module it names exists,
and every module of the package is named (``:mod:`.name```)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from tests.conftest import ROOT

PACKAGES = sorted(p.parent for top in ("autotune", "trials") for p in (ROOT / top).rglob(
    "__init__.py") if "__pycache__" not in p.parts)
REFERENCE = re.compile(r":mod:`~?([\w.]+)`")


def named_in(doc: str, package: str) -> set[str]:
    """The modules of ``package`` a docstring names: ``:mod:`.name``` or its full path
    (references to other packages do not count)."""
    names = set()
    for ref in REFERENCE.findall(doc):
        if ref.startswith("."):
            names.add(ref[1:].split(".")[0])
        elif ref.startswith(package + "."):
            names.add(ref[len(package) + 1:].split(".")[0])
    return names


def modules_of(package: Path) -> set[str]:
    return ({p.stem for p in package.glob("*.py") if p.stem != "__init__"}
            | {p.parent.name for p in package.glob("*/__init__.py")})


@pytest.mark.parametrize("package", PACKAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_package_docstring_names_every_module_and_no_other(package):
    doc = ast.get_docstring(ast.parse((package / "__init__.py").read_text())) or ""
    named = named_in(doc, ".".join(package.relative_to(ROOT).parts))
    # Rule: a docstring names no module that is not there, and leaves none out.
    assert named == modules_of(package), (
        f"not there: {sorted(named - modules_of(package))}; "
        f"not named: {sorted(modules_of(package) - named)}")
