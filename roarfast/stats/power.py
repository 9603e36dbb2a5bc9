"""What a study can detect and what a question needs: the smallest difference between an estimator and random
that k seeds each detect at 80% power (statsmodels' power of the two-sample t-test), the seeds a wanted
difference needs, the seed-to-seed spread those read (pooled over cell groups, or the stated prior), and the seeds
or test images that would settle whether a learner left chance (the learning rule's intervals, searched)."""

import math

import numpy as np

from roarfast.stats.intervals import accuracy_bounds
from roarfast.stats.levels import ALPHA, MOST_IMAGES, MOST_SEEDS, POWER

DETECTABLE = ("the smallest difference detected with 80% power by a two-sided two-sample t-test at alpha 0.05 "
              "(before Holm's correction): for a plan, k seeds each at the seed-to-seed sd pooled over the cell groups "
              "(statsmodels); for a verdict, Welch's test at the standard error and degrees of freedom it was drawn "
              "with (scipy's noncentral t)")
#: the fewest seeds per arm a t-test can be drawn from
LEAST_SEEDS = 2


def pooled_sd(groups) -> float | None:
    """The standard deviation pooled over groups of values (sum of (n_i - 1) s_i^2 over sum of (n_i - 1)), from
    the groups of >= 2 values; None where there is none."""
    groups = [np.asarray(g, dtype=np.float64) for g in groups if len(g) >= 2]
    if not groups:
        return None
    dof = sum(g.size - 1 for g in groups)
    return math.sqrt(sum(g.var(ddof=1) * (g.size - 1) for g in groups) / dof)


def detectable(sd: float, n_a: int, n_b: int | None = None, alpha: float = ALPHA, power: float = POWER) -> float:
    """The smallest difference of means that n_a and n_b (default n_a) values per group of spread `sd` detect
    with `power` (DETECTABLE): Cohen's d solved by statsmodels, times sd."""
    # late: statsmodels (and pandas) loads in a second or more, and a dry run imports this module without calling this
    from statsmodels.stats.power import TTestIndPower

    n_b = n_a if n_b is None else n_b
    if min(n_a, n_b) < LEAST_SEEDS:
        raise ValueError(f"a t-test needs >= {LEAST_SEEDS} values per group, got {n_a} and {n_b}")
    d = TTestIndPower().solve_power(effect_size=None, nobs1=n_a, ratio=n_b / n_a, alpha=alpha, power=power)
    return float(d * sd)


def detectable_welch(se: float, df: float, alpha: float = ALPHA, power: float = POWER) -> float:
    """The smallest difference of means that Welch's two-sided test of standard error `se` and `df` degrees of
    freedom detects with `power` (a verdict's: the spread and seeds it was drawn from): power from scipy's
    noncentral t, solved for the difference; 0 where se is 0 (no spread: any difference is told apart)."""
    # late: scipy.stats loads in a second or more, and a dry run imports this module without calling this
    from scipy import optimize
    from scipy import stats as sps

    if se == 0:
        return 0.0
    crit = sps.t.isf(alpha / 2, df)

    def short(d):  # the power at difference d, less the power wanted
        wrong_side = sps.nct.cdf(-crit, df, d / se)  # vanishing (scipy gives NaN there) once d is large
        return sps.nct.sf(crit, df, d / se) + (wrong_side if math.isfinite(wrong_side) else 0.0) - power

    high = se * (crit + 1.0)
    while short(high) < 0:  # widened step by step: scipy's noncentral t fails far out in its tail
        high *= 1.5
    return float(optimize.brentq(short, 0.0, high))


def seeds_needed(difference: float, sd: float, alpha: float = ALPHA, power: float = POWER,
                 most: int = MOST_SEEDS) -> int | None:
    """The fewest seeds per arm (>= 2) whose detectable difference (detectable) is at most `difference`; None
    beyond `most`."""
    # late: statsmodels (and pandas) loads in a second or more, and a dry run imports this module without calling this
    from statsmodels.stats.power import TTestIndPower

    if difference <= 0:
        raise ValueError(f"the difference to detect must be > 0, got {difference}")
    if sd == 0:
        return LEAST_SEEDS
    solver = TTestIndPower()
    effect = difference / sd
    for n in range(LEAST_SEEDS, most + 1):  # power rises with n: the first that reaches it
        if solver.power(effect_size=effect, nobs1=n, alpha=alpha, ratio=1.0) >= power:
            return n
    return None


def to_decide(mean: float, sd: float | None, k: int, n_test: int | None, threshold: float) -> dict:
    """What would put a learner's interval (roarfast.stats.intervals.accuracy_bounds) wholly on one side of
    `threshold`, its mean's side: {"seeds": the fewest seeds (at the spread `sd` and these n_test images), "images":
    the fewest test images (at these k seeds), "both": (seeds, images) where neither alone would: the fewest test
    images at the first of k doubled, redoubled, ... seeds that some would serve}, each None where none up to
    MOST_SEEDS / MOST_IMAGES would (or, for seeds, where sd is unknown: one value)."""
    if mean == threshold:  # an interval around it always holds it
        return {"seeds": None, "images": None, "both": None}

    def decided(k_, n_) -> bool:
        low, high = accuracy_bounds(mean, sd, k_, n_)
        return low is not None and (low > threshold if mean > threshold else high <= threshold)

    seeds = None
    if sd is not None:
        seeds = _first(lambda k_: decided(k_, n_test), max(k, LEAST_SEEDS), MOST_SEEDS)
    images = _first(lambda n_: decided(k, n_), n_test or 1, MOST_IMAGES) if n_test else None
    both = None
    if seeds is None and images is None and sd is not None and n_test:
        more = max(k, LEAST_SEEDS) * 2
        while more <= MOST_SEEDS and both is None:
            found = _first(lambda n_: decided(more, n_), n_test, MOST_IMAGES)
            both = None if found is None else (more, found)
            more *= 2
    return {"seeds": seeds, "images": images, "both": both}


def _first(ok, low: int, high: int) -> int | None:
    """The least n in [low, high] with ok(n), ok rising with n (bisection); None where ok(high) fails."""
    if not ok(high):
        return None
    while low < high:
        middle = (low + high) // 2
        if ok(middle):
            high = middle
        else:
            low = middle + 1
    return low
