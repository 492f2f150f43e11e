"""The words users write for precision, recompute and the device split: one spelling per
concept, the same in every command (trial program, sweep, plan, search spaces).

=============  =========================================  ================================
concept        users write                                 meaning
=============  =========================================  ================================
precision      ``fp32``, ``fp16``, ``bf16``               compute dtype float32 / float16
                                                           / bfloat16 (:data:`PRECISIONS`)
recompute      ``none``, ``selective``, ``full``          nothing / the attention core /
                                                           every block (Korthikanti 2022)
split          ``"DPxMPxPP"``, e.g. ``"2x1x1"``           data x model x pipeline parallel
=============  =========================================  ================================

``precision=fp16`` (the config group), ``plan.precisions=[fp16]`` and a search space's
``precision: [fp32, fp16]`` take the same names; dtypes (``float16``) are the schema's
internal values. ``train.recompute`` and ``plan.recompute`` take the same modes; the trial
program's on/off is ``full`` (``cell.recompute()`` on every block) or ``none``, and it has
no ``selective`` (the cost model and simulated trials do). ``parallel.split=2x1x1`` sets
``parallel.dp/mp/pp`` in any command. The old spellings (``float16``,
``train.recompute=true``) are refused with a one-line hint naming the word to write.

Plain Python: imports neither MindSpore nor Optuna.
"""

from __future__ import annotations

import enum

from trials.contract.rules import ConfigError


class DType(str, enum.Enum):
    """A compute dtype (MindSpore's names); users name it by its precision (fp16 ...)."""

    float32 = "float32"
    float16 = "float16"
    bfloat16 = "bfloat16"


#: The one mapping from the precision names users write to their compute dtypes.
PRECISIONS: dict[str, DType] = {"fp32": DType.float32, "fp16": DType.float16,
                                "bf16": DType.bfloat16}


class Recompute(str, enum.Enum):
    """Activation recomputation (Korthikanti et al. 2022): none, selective (the attention
    core: the same memory as flash attention), full (every block), or selective_op (keep
    the matmul and attention outputs, recompute the element-wise ops and every second
    matmul: torchtitan's ``selective_ac_option = "op"``; MindFormers' ``select_recompute``
    of the element-wise ops is of this kind)."""

    none = "none"
    selective = "selective"
    full = "full"
    selective_op = "selective_op"


#: What the built-in trial program can do: recompute every block, or nothing.
TRIAL_RECOMPUTE = (Recompute.none, Recompute.full)

#: How the on/off of configs written before recompute had modes reads (stored trial configs).
LEGACY_RECOMPUTE = {True: Recompute.full.value, False: Recompute.none.value}

#: Old spellings and the word to write instead.
_OLD_PRECISIONS = {d.value: name for name, d in PRECISIONS.items()}
_OLD_RECOMPUTE = {"true": Recompute.full.value, "false": Recompute.none.value}


def _spelled(value: object) -> str:
    """A value as the user wrote it: YAML and Hydra turn ``true`` into True."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def precision_name(dtype: DType) -> str:
    """``DType.float16`` -> ``"fp16"``."""
    return next(name for name, d in PRECISIONS.items() if d is dtype)


def _problem(value: object, key: str, known, old: dict[str, str], what: str) -> str | None:
    """Why ``value`` is not one of ``known`` (with the word to write, where ``old`` maps an
    old spelling to it), or None. ``what`` is ``"precision name"`` or ``"recompute mode"``."""
    text = _spelled(value)
    if text in known:
        return None
    listed = f"({what.split()[-1]}s: {', '.join(known)})"
    hint = old.get(text.lower())
    if hint:
        return f"{key}: {text!r} is not a {what}; write {hint} {listed}"
    return f"{key}: {text!r} is not a {what} {listed}"


def precision_problem(value: object, key: str) -> str | None:
    """Why ``value`` is not a precision name (with the name to write), or None."""
    return _problem(value, key, PRECISIONS, _OLD_PRECISIONS, "precision name")


def dtype_of(value: object, key: str) -> DType:
    """``"fp16"`` -> ``DType.float16``; ConfigError naming ``key`` and the name to write."""
    problem = precision_problem(value, key)
    if problem:
        raise ConfigError(problem)
    return PRECISIONS[_spelled(value)]


def recompute_problem(value: object, key: str) -> str | None:
    """Why ``value`` is not a recompute mode (with the mode to write), or None."""
    return _problem(value, key, Recompute.__members__, _OLD_RECOMPUTE, "recompute mode")


def recompute_mode(value: object, key: str) -> Recompute:
    """``"full"`` -> ``Recompute.full``; ConfigError naming ``key`` and the mode to write."""
    problem = recompute_problem(value, key)
    if problem:
        raise ConfigError(problem)
    return Recompute(_spelled(value))


def format_split(dp: int, mp: int, pp: int) -> str:
    """(2, 1, 1) -> ``"2x1x1"``."""
    return f"{dp}x{mp}x{pp}"


def parse_split(text: object, key: str = "parallel.split") -> tuple[int, int, int]:
    """``"2x1x1"`` (or ``"2X1X1"``) -> (2, 1, 1); ConfigError for anything else."""
    try:
        dp, mp, pp = (int(x) for x in str(text).strip().lower().split("x"))
    except ValueError:
        dp = mp = pp = 0
    if dp < 1 or mp < 1 or pp < 1:
        raise ConfigError(f"{key} value {text!r} must look like 'DPxMPxPP' with "
                          "positive integers, e.g. '2x1x1'")
    return dp, mp, pp


def split_overrides(text: object) -> list[str]:
    """``"2x1x1"`` -> the overrides of the three fields it stands for."""
    dp, mp, pp = parse_split(text)
    return [f"parallel.dp={dp}", f"parallel.mp={mp}", f"parallel.pp={pp}"]


#: The keys whose values are words of this vocabulary: their check and old spellings.
_CHECKS = {"precision": (precision_problem, _OLD_PRECISIONS),
           "train.recompute": (recompute_problem, _OLD_RECOMPUTE)}


def old_spelling(key: str, value: object, where: str | None = None) -> str | None:
    """The hint for an old spelling of a precision (group) or recompute mode, or None.

    Only known old spellings (``float16``, ``true``): any other unknown word is left to
    Hydra and OmegaConf, whose messages list the options (a user may add a precision
    group of their own).
    """
    problem_of, old = _CHECKS.get(key, (None, {}))
    text = _spelled(value).strip().strip("'\"")
    if problem_of is None or text.lower() not in old:
        return None
    return problem_of(text, where or key)


def expand_override(override: str) -> list[str]:
    """A command-line override in this vocabulary, as Hydra takes it.

    ``parallel.split=2x1x1`` becomes the three ``parallel.dp/mp/pp`` overrides; an old
    spelling of a precision or recompute mode raises ConfigError with the word to write.
    Anything else passes through.
    """
    key, sep, value = override.partition("=")
    key = key.lstrip("+~")
    if not sep:
        return [override]
    if key == "parallel.split":
        return split_overrides(value.strip().strip("'\""))
    problem = old_spelling(key, value)
    if problem:
        raise ConfigError(problem)
    return [override]
