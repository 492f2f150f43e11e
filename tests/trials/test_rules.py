"""trials.contract.rules: field rules declared beside a field, one checker naming the override."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from trials.contract.rules import ConfigError, check_fields, path_problem, rule


@dataclass
class Inner:
    lr: float = field(default=1e-3, metadata=rule(gt=0))
    level: str = field(default="O0", metadata=rule(one_of=("O0", "O1")))


@dataclass
class Outer:
    n: int = field(default=1, metadata=rule(ge=1, le=10))
    inner: Inner = field(default_factory=Inner)


def test_a_broken_bound_names_the_override_path_and_every_bound():
    check_fields(Outer(), "sweep")  # defaults pass
    # Rule: the error names the dotted override path and the allowed range.
    with pytest.raises(ConfigError, match=r"^sweep\.n=11 must be >= 1 and <= 10$"):
        check_fields(Outer(n=11), "sweep")
    # Rule: nested dataclasses are walked; exclusive bounds are ">".
    with pytest.raises(ConfigError, match=r"sweep\.inner\.lr=0\.0 must be > 0"):
        check_fields(Outer(inner=Inner(lr=0.0)), "sweep")
    # Rule: a non-finite number never passes a bound.
    with pytest.raises(ConfigError, match="finite"):
        check_fields(Outer(inner=Inner(lr=float("inf"))), "")


def test_path_problem_applies_the_rule_of_one_field_to_one_value():
    # Rule: choices are checked for one search value at its dotted path.
    assert path_problem(Outer, "inner.level", "O3") == "must be one of O0, O1"
    assert path_problem(Outer, "inner.level", "O1") is None
    assert path_problem(Outer, "n", 0) == "must be >= 1 and <= 10"
    # Rule: an unknown path, or a type problem (OmegaConf's job), is not this rule's.
    assert path_problem(Outer, "nope.x", 0) is None
    assert path_problem(Outer, "n", "many") is None
