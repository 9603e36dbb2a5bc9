"""The stated levels every decision of the benchmark is taken at (docs/concepts/verdicts.md says why each).

Accuracies are fractions (0.05 = 5 points) here; the command line takes points (`--margin 5`).
"""

from roarfast.errors import UserError

#: the false-positive rate of every test read as a finding (after Holm's correction)
ALPHA = 0.05
#: the intervals shown and the ones the learning rule reads
CONFIDENCE = 0.95
#: the power a study is planned for and its detectable difference is stated at
POWER = 0.80
#: the smallest accuracy difference worth reporting (--margin, in points): a learner within it of chance has
#: learned nothing worth a study, an estimator within it of random is no different from it. 5 points: the
#: seed-to-seed spread of one cell is 3 points (PRIOR_SD), and a 1,000-image test split alone puts a +-3.1-point
#: 95% interval on an accuracy near 50%: a smaller difference is within what one study of that size can resolve
MARGIN = 0.05
#: the seed-to-seed standard deviation of a cell's accuracy assumed where the run directory records none: the
#: pooled spread of `roarfast run`'s 24 cell groups of 3 seeds (embedded dataset, fastnet-small, 3 epochs:
#: 3.0 points, from 0.3 to 9.8 per group)
PRIOR_SD = 0.03
#: a control must beat chance by this much accuracy, as well as significantly, to be flagged leaky: a
#: control that only learned the class prior (or a hair more) is not leakage worth a warning
LEAK_MARGIN = 0.02
#: the most seeds or test images a computed "what would decide it" names: beyond, it says none would
MOST_SEEDS = 1000
MOST_IMAGES = 10_000_000


def points(fraction: float) -> str:
    """An accuracy difference in points, as the report writes it: 0.05 -> "5", 0.0725 -> "7.2"."""
    return f"{100 * fraction:.2g}" if abs(fraction) < 0.1 else f"{100 * fraction:.0f}"


def margin_of(points_given, flag: str = "--margin") -> float | None:
    """The margin as a fraction from a number of points (None: None, the default's to choose); refused in one
    line naming `flag` unless 0 < points < 100."""
    if points_given is None:
        return None
    if isinstance(points_given, bool) or not isinstance(points_given, (int, float)) or not 0 < points_given < 100:
        raise UserError(f"{flag} should be a number of accuracy points between 0 and 100 (the smallest difference "
                        f"worth reporting; default {100 * MARGIN:g}), got {points_given!r}")
    return points_given / 100
