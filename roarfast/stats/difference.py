"""An estimator against random at one mode, fill and fraction: Welch's test of a difference, the two one-sided
tests (TOST) of equivalence within a margin, Holm's correction over the estimators read together, Hedges' g, and
the verdict those give: "better than random" / "worse" from the difference test, "no different" only from the
equivalence test, "undecided" otherwise (`classify`).

The tests take arrays: the last axis holds the seeds, any axes before it are studies, so the simulation of many
studies (tests/test_sequential.py) runs through the same functions as the report's one study.
Each test has a name (the *_TEXT strings), so the report can say which one decided a verdict.
"""

import warnings

import numpy as np

from roarfast.stats.power import pooled_sd

WELCH = "Welch's two-sample t-test (two-sided, unequal variances) across seeds, Holm-corrected"
TOST = ("two one-sided Welch t-tests (TOST) that the difference lies within +-margin, the larger of their p-values, "
        "Holm-corrected")
EFFECT = "Hedges' g (the difference over the pooled sd, times 1 - 3 / (4 (n1 + n2) - 9))"

#: the verdicts of an estimator against random, and their codes in arrays
BETTER, NO_DIFFERENT, WORSE, UNDECIDED = "better than random", "no different", "worse", "undecided"
VERDICTS = (UNDECIDED, BETTER, WORSE, NO_DIFFERENT)
UNDECIDED_CODE, BETTER_CODE, WORSE_CODE, NO_DIFFERENT_CODE = range(4)


def _groups(a, b):
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.shape[-1] < 2 or b.shape[-1] < 2:
        raise ValueError(f"a two-sample t-test needs >= 2 values per group, got {a.shape[-1]} and {b.shape[-1]}")
    return a, b


def _spread(a, b):
    """(mean(b) - mean(a), its squared standard error) along the last axis."""
    return b.mean(-1) - a.mean(-1), a.var(-1, ddof=1) / a.shape[-1] + b.var(-1, ddof=1) / b.shape[-1]


def _welch(x, y, alternative: str):
    """scipy's Welch t-test of x against y along the last axis (its warnings of a group without spread silenced:
    the cases without any spread are decided by the callers)."""
    # late: scipy.stats loads in a second or more, and a dry run imports this module without calling this
    from scipy import stats as sps

    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        return sps.ttest_ind(x, y, axis=-1, equal_var=False, alternative=alternative).pvalue


def welch_p(a, b):
    """Two-sided p-value of Welch's t-test that a and b (>= 2 values each on the last axis) have equal means; a
    float for 1-d groups, an array for stacks of them (NaN where a group holds NaN: not run).

    Degenerate case, decided here: with no spread in either group the t statistic is 0/0 (equal means:
    p = 1, nothing to tell apart) or d/0 (different means: p = 0, every seed of one lies on one side of
    every seed of the other with no noise at all).
    """
    a, b = _groups(a, b)
    diff, se2 = _spread(a, b)
    p = np.where(se2 == 0, np.where(diff == 0, 1.0, 0.0), _welch(b, a, "two-sided"))
    return p.item() if p.ndim == 0 else p


def tost_p(a, b, margin: float):
    """p-value of the two one-sided Welch t-tests (scipy's ttest_ind) that mean(b) - mean(a) lies within
    (-margin, +margin): the larger of the two (the shapes as welch_p's). No spread in either group: 0 where the
    difference lies inside, 1 where it does not (nothing else to tell)."""
    a, b = _groups(a, b)
    diff, se2 = _spread(a, b)
    above = _welch(b + margin, a, "greater")  # H0: diff <= -margin
    below = _welch(b - margin, a, "less")  # H0: diff >= +margin
    p = np.where(se2 == 0, np.where(np.abs(diff) < margin, 0.0, 1.0), np.maximum(above, below))
    return p.item() if p.ndim == 0 else p


def holm(pvalues):
    """Holm-Bonferroni adjusted p-values along the last axis, in the input order (the i-th smallest of m times
    (m - i), running maxima, capped at 1); NaN entries are not tested: left out of m, NaN out. By hand rather
    than statsmodels' multipletests (which it equals, tests/test_stats.py) because it runs over many studies at
    once. A list in, a list out."""
    p = np.asarray(pvalues, dtype=np.float64)
    if p.size == 0:
        return [] if isinstance(pvalues, list) else p
    tested = np.isfinite(p)
    m = tested.sum(-1, keepdims=True)
    order = np.argsort(np.where(tested, p, np.inf), axis=-1, kind="stable")
    ranked = np.take_along_axis(np.where(tested, p, np.inf), order, -1)
    with np.errstate(invalid="ignore"):  # the untested, ranked last, give inf * 0: overwritten below
        adjusted = np.maximum.accumulate(np.minimum(1.0, (m - np.arange(p.shape[-1])) * ranked), axis=-1)
    out = np.empty_like(p)
    np.put_along_axis(out, order, adjusted, -1)
    out = np.where(tested, out, np.nan)
    return out.tolist() if isinstance(pvalues, list) else out


def classify(diff, p_holm, p_equivalence_holm, level, equivalence_level, lower_is_better: bool):
    """The verdict codes: a corrected difference p below `level` is better than random (BETTER_CODE) or worse
    (WORSE_CODE) by the mode's direction (ROAR: lower accuracy is better); else a corrected TOST p below
    `equivalence_level` is NO_DIFFERENT_CODE; else UNDECIDED_CODE (NaN p's: untested, undecided)."""
    better = (np.asarray(diff) < 0) == lower_is_better
    with np.errstate(invalid="ignore"):
        significant = np.asarray(p_holm) < level
        equivalent = np.asarray(p_equivalence_holm) < equivalence_level
    return np.where(significant, np.where(better, BETTER_CODE, WORSE_CODE),
                    np.where(equivalent, NO_DIFFERENT_CODE, UNDECIDED_CODE))


def hedges_g(a, b) -> float | None:
    """Hedges' g of mean(b) - mean(a) (EFFECT); None where neither group has spread (no scale to measure by)."""
    sd = pooled_sd([a, b])
    if not sd:
        return None
    n = len(a) + len(b)
    return float((np.mean(b) - np.mean(a)) / sd * (1 - 3 / (4 * n - 9)))
