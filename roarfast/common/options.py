"""Option values, parsed and checked here once. The checks: every options dataclass (TrainOptions,
ExtractOptions, RetrainOptions, Grid, NoRetrainOptions, FillLeakageOptions, RunOptions, DataOptions, an
executor's) runs them on its fields when it is built, so a value is checked where it enters and trusted below;
a failed check is a UserError naming the flag. The parsing of a flag's text where it is more than a number
(fractions, KEY=VALUE pairs). And the declaration of an option with its flag (`flag`, `Flag`): a field of an
options dataclass says how the command line gives it, so the CLI builds its options from the dataclass
(roarfast.cli.options.options_of) and Study builds the same dataclass from Python values.
"""

import math
from collections.abc import Callable
from dataclasses import Field, dataclass, field, fields

import yaml

from roarfast.errors import UserError

#: the metadata key of a field's Flag
FLAG = "roarfast.flag"


def parse_list(text) -> tuple:
    """'a, b,,c' -> ('a', 'b', 'c'): a comma-separated flag value."""
    return tuple(part.strip() for part in str(text).split(",") if part.strip())


def check_fractions(fractions, flag: str = "--fraction") -> tuple:
    """Fractions as floats in (0, 1] (at least one)."""
    fractions = tuple(fractions)
    bad = [f for f in fractions
           if isinstance(f, bool) or not isinstance(f, (int, float)) or not (math.isfinite(f) and 0.0 < f <= 1.0)]
    if bad or not fractions:
        raise UserError(f"{flag}: fractions must lie in (0, 1], got {', '.join(map(str, bad)) or 'none'}")
    return tuple(float(f) for f in fractions)


#: the largest seed: every random generator a run seeds (torch, NumPy, Philox keys) takes it as it is
MAX_SEED = 2 ** 32 - 1
#: the most retrainings per cell (--seeds, --control-seeds): a grid of more is a typo, and would be listed cell by
#: cell before anything runs
MAX_SEEDS = 10_000


def check_positive(flag: str, value, optional: bool = False, most: int | None = None):
    """A positive int, at most `most` when given (or None when optional)."""
    if optional and value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise UserError(f"{flag} should be a positive int, got {value!r}")
    if most is not None and value > most:
        raise UserError(f"{flag} should be at most {most:,}, got {value:,}")
    return value


def check_seed(flag: str, value):
    """A seed: an int in [0, MAX_SEED]."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise UserError(f"{flag} should be an int (a seed), got {value!r}")
    if not 0 <= value <= MAX_SEED:
        raise UserError(f"{flag} should be a seed in [0, {MAX_SEED}], got {value}")
    return value


def check_choice(flag: str, value, choices):
    """One of `choices`."""
    if value not in choices:
        raise UserError(f"{flag} should be one of {', '.join(choices)}, got {value!r}")
    return value


def check_subset(flag: str, values, choices) -> tuple:
    """A non-empty tuple of values from `choices`."""
    values = tuple(values)
    if not values or any(v not in choices for v in values):
        raise UserError(f"{flag} should be a comma-separated subset of {','.join(choices)}, "
                        f"got {','.join(map(str, values)) or 'none'!r}")
    return values


def check_like(flag: str, value, default):
    """`value`, when it is of the kind `default` is: true or false for a bool default, an int for an int, a
    number for a float (a default of another kind checks nothing): a loader option given as text where a
    number belongs, say."""
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if isinstance(default, bool):
        ok, kind = isinstance(value, bool), "true or false"
    elif isinstance(default, int):
        ok, kind = number and isinstance(value, int), "an int"
    elif isinstance(default, float):
        ok, kind = number, "a number"
    else:
        return value
    if not ok:
        raise UserError(f"{flag} should be {kind}, got {value!r}")
    return value


def check_types(name_value_kinds: dict) -> None:
    """{argument name: (value, the types it may be, what it should be said to be)}: a UserError naming the first
    argument whose value is of none of its types (a bool is no int), None always allowed where the types
    include type(None)."""
    for name, (value, kinds, what) in name_value_kinds.items():
        if isinstance(value, bool) and bool not in kinds:
            ok = False
        else:
            ok = isinstance(value, kinds)
        if not ok:
            raise UserError(f"{name} should be {what}, got {type(value).__name__} {str(value)[:40]!r}")


# ------------------------------------------------------------------- options declared once, with their flags

#: --seeds auto: seeds added in stages only where a verdict is undecided (roarfast.orchestration.seeds_auto)
AUTO_SEEDS = "auto"

#: the work an executor's option applies to (Flag.uses): the retraining cells, or an extraction's chunks
CELLS, CHUNKS = "cells", "chunks"


@dataclass(frozen=True)
class Flag:
    """How the command line gives one field of an options dataclass (made by `flag`): its declarations
    ("--seed", "--progress/--no-progress"), its help (text, or a function returning it: a registry's listing,
    read when the command line is built), the `kind` of its text (str, int, float, bool, Path; object: the
    value as it comes, a config file's mapping whole) with `low` and `high` bounding an int, `choices` (a
    sequence, or a function returning one), `directory` (a Path that is no file), whether it repeats, its
    `metavar`, whether --help shows its default, `parse` (value -> value, a UserError where it does not parse:
    where the text is more than its kind, as fractions and KEY=VALUE pairs are), `layered` (pairs given on the
    command line are laid over a config file's mapping field by field, instead of replacing it) and `uses` (an
    executor's option: the work it applies to, CELLS and/or CHUNKS; a command shows those of the work it hands
    over). The dataclass checks the value it receives, from a flag or from Python (Study), in its
    __post_init__."""

    decls: tuple
    help: object
    kind: type | None = None
    low: int | None = None
    high: int | None = None
    choices: object = None
    directory: bool = False
    multiple: bool = False
    metavar: str | None = None
    show_default: bool | None = None
    parse: Callable | None = None
    layered: bool = False
    uses: tuple = ()


def flag(*decls: str, default=None, help, **how) -> Field:
    """A dataclass field whose value the command line gives by `decls` (Flag says the rest); a mapping or a
    list default is copied for each object."""
    declared_flag = {FLAG: Flag(decls, help, **how)}
    if isinstance(default, (dict, list)):
        return field(default_factory=lambda: type(default)(default), metadata=declared_flag)
    return field(default=default, metadata=declared_flag)


def flags_of(cls) -> list[tuple[Field, Flag]]:
    """(field, Flag) of every field of the dataclass `cls` that has a flag, in its order."""
    return [(each, each.metadata[FLAG]) for each in fields(cls) if FLAG in each.metadata]


def parse_fractions(value) -> list[float] | None:
    """'0.3,0.7', or several such (a repeated flag, a config file's list) -> sorted unique floats (the options
    check the range); nothing given -> None."""
    if value is None or (isinstance(value, (list, tuple)) and not value):
        return None
    out = []
    for item in value if isinstance(value, (list, tuple)) else [value]:
        for part in str(item).split(","):
            if not part.strip():
                continue
            try:
                out.append(float(part))
            except ValueError:
                raise UserError(f"{part!r} is not a number") from None
    if not out:
        raise UserError("give at least one fraction")
    return sorted(set(out))


def parse_seeds(value) -> int | str | None:
    """--seeds: a number of seeds (its text or an int), or "auto" (added where a verdict is undecided); nothing
    given -> None. The number is checked where the grid is made."""
    if value is None or value == AUTO_SEEDS or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    try:
        return int(str(value).strip())
    except ValueError:
        raise UserError(f"expected a number of seeds or `{AUTO_SEEDS}`, got {value!r}") from None


def parse_pairs(value) -> dict:
    """KEY=VALUE pairs (or mappings, from a config file) -> dict, values read as YAML scalars (3 -> int, true ->
    bool), keys with '_' for '-'."""
    options = {}
    for item in value or ():
        if isinstance(item, dict):
            options.update({str(key).replace("-", "_"): val for key, val in item.items()})
            continue
        key, sep, text = str(item).partition("=")
        if not sep or not key.strip():
            raise UserError(f"expected KEY=VALUE, got {item!r}")
        try:
            options[key.strip().replace("-", "_")] = yaml.safe_load(text)
        except yaml.YAMLError as err:
            raise UserError(f"{item!r}: {text!r} is not a YAML value ({yaml_error(err)}); write a number, true/false, "
                            f"null, a list [3, 8, 8], or a string (quoted where it holds [ ] {{ }} , : #)") from None
    return options


def yaml_error(err) -> str:
    """A YAML parse error in one line: what was wrong and where (PyYAML's own message spans several)."""
    mark = getattr(err, "problem_mark", None)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    return f"{getattr(err, 'problem', None) or type(err).__name__}{where}"
