"""Means and their 95% intervals: the t-interval over seeds, the exact (Clopper-Pearson) interval of one accuracy
over the test images, Welch's interval of a difference, and the interval of a learner's accuracy that the
learning rule reads (accuracy_interval: the seeds' spread and the test split's own sampling error together)."""

import math
from dataclasses import dataclass

import numpy as np

from roarfast.stats.levels import CONFIDENCE

T_INTERVAL = "95% Student t-interval over seeds (mean +- t(0.975, n-1) * sd / sqrt(n))"
ACCURACY_INTERVAL = (
    "the wider of (a) the exact Clopper-Pearson interval of the mean accuracy's correct predictions over the test "
    "images and (b) mean +- t(0.975, df) * sqrt(sd^2/k + m(1-m)/n_test) over k seeds (Welch-Satterthwaite df): the "
    "k seeds are tested on the same n_test images, so averaging them shrinks their spread (sd^2/k) but not the test "
    "split's sampling error (m(1-m)/n_test); one value (the base model, one seed): (a) alone")


@dataclass(frozen=True)
class Interval:
    """Mean of n values and its interval; low/high are None where none can be drawn (one value and no test
    split's size)."""

    mean: float
    low: float | None
    high: float | None
    n: int

    def to_dict(self) -> dict:
        return {"mean": self.mean, "low": self.low, "high": self.high, "n": self.n}


def t_interval(values, confidence: float = CONFIDENCE) -> Interval:
    """The mean of `values` with its Student t confidence interval (None bounds for one value)."""
    # late: scipy.stats loads in a second or more, and a dry run imports this module without calling this
    from scipy import stats as sps

    x = np.asarray(values, dtype=np.float64)
    if x.size == 0:
        raise ValueError("t_interval needs at least one value")
    mean = float(x.mean())
    if x.size < 2:
        return Interval(mean, None, None, 1)
    half = float(sps.t.ppf(0.5 + confidence / 2, x.size - 1) * x.std(ddof=1) / math.sqrt(x.size))
    return Interval(mean, mean - half, mean + half, int(x.size))


def welch_se_df(a, b) -> tuple[float, float]:
    """(standard error, Welch-Satterthwaite degrees of freedom) of mean(b) - mean(a), >= 2 values each; the df is
    inf where neither group has spread (the standard error is then 0)."""
    va, vb = np.var(a, ddof=1) / len(a), np.var(b, ddof=1) / len(b)
    if va + vb == 0:
        return 0.0, math.inf
    return math.sqrt(va + vb), (va + vb) ** 2 / (va ** 2 / (len(a) - 1) + vb ** 2 / (len(b) - 1))


def welch_interval(a, b, confidence: float = CONFIDENCE) -> Interval:
    """The difference of means mean(b) - mean(a) with its Welch t confidence interval (unequal variances,
    Welch-Satterthwaite degrees of freedom); None bounds below 2 values in either group, a zero-width
    interval where neither group has spread."""
    # late: scipy.stats loads in a second or more, and a dry run imports this module without calling this
    from scipy import stats as sps

    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.size == 0 or b.size == 0:
        raise ValueError(f"welch_interval needs values in both groups, got {a.size} and {b.size}")
    diff = float(b.mean() - a.mean())
    n = int(min(a.size, b.size))
    if n < 2:
        return Interval(diff, None, None, n)
    se, df = welch_se_df(a, b)
    half = float(sps.t.ppf(0.5 + confidence / 2, df) * se) if se else 0.0
    return Interval(diff, diff - half, diff + half, n)


def binomial_interval(accuracy: float, n: int, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """The exact (Clopper-Pearson) interval of an accuracy over n test images: of round(accuracy x n) correct
    predictions, its ends the beta distribution's quantiles (what scipy's binomtest(...).proportion_ci(method=
    "exact") finds by root search, to 1e-12)."""
    # scipy.special, not scipy.stats: a dry run with a trained base model calls this (its learning check), and
    # scipy.stats takes a second or more to load where scipy.special takes a fifth of that
    from scipy.special import betaincinv

    correct = min(n, max(0, round(accuracy * n)))
    tail = (1 - confidence) / 2
    low = 0.0 if correct == 0 else float(betaincinv(correct, n - correct + 1, tail))
    high = 1.0 if correct == n else float(betaincinv(correct + 1, n - correct, 1 - tail))
    return low, high


def accuracy_bounds(mean: float, sd: float | None, k: int, n_test: int | None,
                    confidence: float = CONFIDENCE) -> tuple[float | None, float | None]:
    """(low, high) of a learner's mean accuracy over k seeds of spread `sd` on n_test test images
    (ACCURACY_INTERVAL); (None, None) where nothing bounds it (one value, no test split's size). Hypothetical k and
    n_test are what the learning rule's "what would decide it" searches over."""
    # the t quantile from scipy.special (the function scipy.stats' t.ppf calls): the dry run's learning check calls
    # this, and scipy.stats takes a second or more to load
    from scipy.special import stdtrit

    low = high = None
    if n_test:
        low, high = binomial_interval(mean, n_test, confidence)
    if k >= 2 and sd is not None:
        seeds = sd ** 2 / k
        split = mean * (1 - mean) / n_test if n_test else 0.0
        df = (seeds + split) ** 2 / (seeds ** 2 / (k - 1)) if seeds else math.inf
        half = float(stdtrit(df, 0.5 + confidence / 2) * math.sqrt(seeds + split))
        low = mean - half if low is None else min(low, mean - half)
        high = mean + half if high is None else max(high, mean + half)
    return low, high


def accuracy_interval(values, n_test: int | None, confidence: float = CONFIDENCE) -> Interval:
    """The interval of a learner's accuracies (one per seed) on a test split of n_test images that the learning
    rule reads (ACCURACY_INTERVAL)."""
    x = np.asarray(values, dtype=np.float64)
    if x.size == 0:
        raise ValueError("accuracy_interval needs at least one accuracy")
    sd = float(x.std(ddof=1)) if x.size >= 2 else None
    low, high = accuracy_bounds(float(x.mean()), sd, int(x.size), n_test, confidence)
    return Interval(float(x.mean()), low, high, int(x.size))
