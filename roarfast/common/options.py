"""The checks of option values, each written once: every options dataclass (TrainOptions, ExtractOptions,
RetrainOptions, Grid, NoRetrainOptions, FillLeakageOptions) runs them on its fields when it is built, so a
value is checked where it enters and trusted below. A failed check is a UserError naming the flag.
"""

import math

from roarfast.errors import UserError


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
