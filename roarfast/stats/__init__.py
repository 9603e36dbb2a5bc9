"""The statistics of the benchmark (README, "The whole benchmark" and "Semantics"): means over seeds, intervals,
estimator-vs-random tests, the Holm correction, the area under an accuracy curve, the mask-leakage test of
a mask-only control, and the agreement (Kendall tau) between the estimator rankings of the benchmarks.

Each test has a name (the *_TEXT and LEAK_* strings), so the report can say which one decided a verdict.
Plain numbers in, plain numbers out: no run directory, no model.
"""

import math
import statistics
from dataclasses import dataclass

import numpy as np
from scipy import stats as sps

from roarfast.chance import chance_rate  # noqa: F401  (the report reads chance here with the other statistics)
from roarfast.modes import KAR, NO_RETRAIN_METRICS, ROAR

ALPHA = 0.05
CONFIDENCE = 0.95
#: a control must beat chance by this much accuracy, as well as significantly, to be flagged leaky: a
#: control that only learned the class prior (or a hair more) is not leakage worth a warning
LEAK_MARGIN = 0.02
#: a learner is at chance when the upper end of its 95% interval is not above chance by more than this: it
#: cannot be told apart from one that learned nothing (or only the class prior plus a hair)
LEARNED_MARGIN = 0.02

T_INTERVAL = "95% Student t-interval over seeds (mean +- t(0.975, n-1) * sd / sqrt(n))"
WELCH = "Welch's two-sample t-test (two-sided, unequal variances) across seeds, Holm-corrected"
AUC_TEXT = "trapezoid area under accuracy vs fraction, divided by the fraction span (the curve's mean height)"
LEAK_T = "one-sided one-sample t-test across seeds (control accuracy > chance)"
LEAK_BINOMIAL = "one-sided exact binomial test of the control's correct test predictions (> chance)"
AT_CHANCE_TEXT = ("at chance when the upper end of its 95% interval (the t-interval over seeds; with one seed or "
                  "no spread the exact Clopper-Pearson interval of its correct test predictions) is not above chance "
                  f"+ {LEARNED_MARGIN:.0%}")


@dataclass(frozen=True)
class Interval:
    """Mean of n values and its t-interval; low/high are None with fewer than 2 values."""

    mean: float
    low: float | None
    high: float | None
    n: int

    def to_dict(self) -> dict:
        return {"mean": self.mean, "low": self.low, "high": self.high, "n": self.n}


def t_interval(values, confidence: float = CONFIDENCE) -> Interval:
    """The mean of `values` with its Student t confidence interval (None bounds for one value)."""
    x = np.asarray(values, dtype=np.float64)
    if x.size == 0:
        raise ValueError("t_interval needs at least one value")
    mean = float(x.mean())
    if x.size < 2:
        return Interval(mean, None, None, 1)
    half = float(sps.t.ppf(0.5 + confidence / 2, x.size - 1) * x.std(ddof=1) / math.sqrt(x.size))
    return Interval(mean, mean - half, mean + half, int(x.size))


def welch_p(a, b) -> float:
    """Two-sided p-value of Welch's t-test that a and b (>= 2 values each) have equal means.

    Degenerate case, decided here: with no spread in either group the t statistic is 0/0 (equal means:
    p = 1, nothing to tell apart) or d/0 (different means: p = 0, every seed of one lies on one side of
    every seed of the other with no noise at all).
    """
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.size < 2 or b.size < 2:
        raise ValueError(f"Welch's test needs >= 2 values per group, got {a.size} and {b.size}")
    if a.mean() == b.mean():  # t = 0 exactly (scipy would warn of cancellation on identical samples)
        return 1.0
    va, vb = a.var(ddof=1) / a.size, b.var(ddof=1) / b.size
    if va == 0 and vb == 0:
        return 0.0
    # by hand rather than scipy.stats.ttest_ind, which warns of cancellation when one group has no spread
    t = (a.mean() - b.mean()) / math.sqrt(va + vb)
    df = (va + vb) ** 2 / (va ** 2 / (a.size - 1) + vb ** 2 / (b.size - 1))
    return float(2 * sps.t.sf(abs(t), df))


def welch_interval(a, b, confidence: float = CONFIDENCE) -> Interval:
    """The difference of means mean(b) - mean(a) with its Welch t confidence interval (unequal variances,
    Welch-Satterthwaite degrees of freedom); None bounds below 2 values in either group, a zero-width
    interval where neither group has spread."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.size == 0 or b.size == 0:
        raise ValueError(f"welch_interval needs values in both groups, got {a.size} and {b.size}")
    diff = float(b.mean() - a.mean())
    n = int(min(a.size, b.size))
    if n < 2:
        return Interval(diff, None, None, n)
    va, vb = a.var(ddof=1) / a.size, b.var(ddof=1) / b.size
    if va + vb == 0:
        return Interval(diff, diff, diff, n)
    df = (va + vb) ** 2 / (va ** 2 / (a.size - 1) + vb ** 2 / (b.size - 1))
    half = float(sps.t.ppf(0.5 + confidence / 2, df) * math.sqrt(va + vb))
    return Interval(diff, diff - half, diff + half, n)


def holm(pvalues) -> list[float]:
    """Holm-Bonferroni adjusted p-values, in the input order: the i-th smallest of m is multiplied by
    (m - i), running maxima keep them monotone, capped at 1."""
    p = np.asarray(pvalues, dtype=np.float64)
    m = p.size
    adjusted = np.empty(m)
    running = 0.0
    for i, index in enumerate(np.argsort(p, kind="stable")):
        running = max(running, min(1.0, (m - i) * p[index]))
        adjusted[index] = running
    return adjusted.tolist()


#: the verdicts of an estimator against random
BETTER, NO_DIFFERENT, WORSE = "better than random", "no different", "worse"


def verdict(estimator_mean: float, random_mean: float, p_adjusted: float, lower_is_better: bool,
            alpha: float = ALPHA) -> str:
    """BETTER, NO_DIFFERENT or WORSE from a corrected p-value and the direction."""
    if p_adjusted >= alpha:
        return NO_DIFFERENT
    better = estimator_mean < random_mean if lower_is_better else estimator_mean > random_mean
    return BETTER if better else WORSE


def curve_auc(fractions, accuracies) -> float:
    """Trapezoid area under accuracy vs fraction divided by the fraction span, i.e. the curve's mean
    height (the same order as the raw area over one grid); a single fraction gives its accuracy."""
    f = np.asarray(fractions, dtype=np.float64)
    a = np.asarray(accuracies, dtype=np.float64)
    if f.size == 0 or f.size != a.size:
        raise ValueError(f"curve_auc needs equal, non-empty fraction and accuracy lists, got {f.size} and {a.size}")
    order = np.argsort(f)
    f, a = f[order], a[order]
    if f.size == 1:
        return float(a[0])
    area = float(np.sum((f[1:] - f[:-1]) * (a[1:] + a[:-1]) / 2))
    return area / float(f[-1] - f[0])


@dataclass(frozen=True)
class LeakTest:
    """Whether a mask-only control is above chance: its test, one-sided p-value and the decision."""

    test: str
    p: float
    leaky: bool


def leak_test(accuracies, chance: float, n_test: int, alpha: float = ALPHA, margin: float = LEAK_MARGIN) -> LeakTest:
    """Tests control accuracies (one per seed) against chance, one-sided (greater).

    >= 2 seeds with spread: one-sample t-test across seeds. One seed, or no spread: exact binomial test
    of round(mean accuracy x n_test) correct predictions out of n_test against chance. Leaky when
    p < alpha AND the mean beats chance by at least `margin` (a control that learned only the class
    prior is not flagged).
    """
    x = np.asarray(accuracies, dtype=np.float64)
    if x.size == 0:
        raise ValueError("leak_test needs at least one accuracy")
    mean = float(x.mean())
    if x.size >= 2 and x.var(ddof=1) > 0:
        test, p = LEAK_T, float(sps.ttest_1samp(x, chance, alternative="greater").pvalue)
    else:
        if n_test < 1:
            raise ValueError(f"n_test must be >= 1 for the binomial test, got {n_test}")
        correct = round(mean * n_test)
        test, p = LEAK_BINOMIAL, float(sps.binomtest(correct, n_test, chance, alternative="greater").pvalue)
    return LeakTest(test, p, bool(p < alpha and mean - chance >= margin))


def leak_decisions(tests: list, chance: float, alpha: float = ALPHA, margin: float = LEAK_MARGIN) -> list:
    """Holm-corrects the leak tests read together: `tests` is [(mean accuracy, LeakTest)], the result
    [(Holm-adjusted p, leaky)] in the same order, leaky when the adjusted p < alpha and the mean beats chance
    by at least `margin`."""
    adjusted = holm([t.p for _mean, t in tests]) if tests else []
    return [(p, bool(p < alpha and mean - chance >= margin)) for (mean, _t), p in zip(tests, adjusted)]


def upper_bound(accuracies, n_test: int | None, confidence: float = CONFIDENCE) -> float:
    """The upper end of the 95% interval of accuracies (one per seed): the t-interval's with >= 2 seeds and
    spread; else the exact (Clopper-Pearson) binomial interval's of round(mean x n_test) correct out of n_test
    (n_test None: the mean itself, nothing better being known)."""
    x = np.asarray(accuracies, dtype=np.float64)
    if x.size >= 2 and x.var(ddof=1) > 0:
        return t_interval(x, confidence).high
    mean = float(x.mean())
    if not n_test:
        return mean
    correct = round(mean * n_test)
    if correct >= n_test:
        return 1.0
    return float(sps.beta.ppf(0.5 + confidence / 2, correct + 1, n_test - correct))


def clearly_above_chance(accuracy: float, chance: float, n: int, confidence: float = CONFIDENCE) -> bool:
    """Whether one accuracy over n images has left chance beyond doubt: the lower end of its exact
    (Clopper-Pearson) interval is above chance."""
    correct = round(accuracy * n)
    return correct > 0 and float(sps.beta.ppf((1 - confidence) / 2, correct, n - correct + 1)) > chance


def at_chance(accuracies, chance: float, n_test: int | None, margin: float = LEARNED_MARGIN) -> bool:
    """Whether a learner's accuracies (one per seed) cannot be told from chance (AT_CHANCE_TEXT)."""
    return upper_bound(accuracies, n_test) <= chance + margin


def accuracy_over_seeds(rows) -> dict:
    """{(method, mode, fraction): (mean test accuracy, population std over seeds, seeds)} of result rows."""
    groups = {}
    for row in rows:
        groups.setdefault((row["method"], row["mode"], row["fraction"]), []).append(row["test_acc"])
    return {key: (statistics.fmean(v), statistics.pstdev(v) if len(v) > 1 else 0.0, len(v))
            for key, v in groups.items()}


#: the benchmarks rank_agreement compares, each scoring an estimator from its rows (higher = better)
BENCHMARKS = (ROAR, KAR, *NO_RETRAIN_METRICS)


def estimator_scores(rows) -> dict:
    """{benchmark: {method: score}} from results rows, higher = better estimator: ROAR and MoRF the
    accuracy lost (minus the mean accuracy over fractions and seeds), KAR and LeRF the accuracy kept,
    ROAD its LeRF mean minus its MoRF mean. A benchmark or method without rows is absent. Rows of
    several configurations of a mode (fills, models) are averaged together: filter them first."""
    means = {}
    for row in rows:
        if row.get("status", "done") == "done" and row.get("test_acc") is not None:
            means.setdefault((row["mode"], row["method"]), []).append(row["test_acc"])
    mean = {key: sum(v) / len(v) for key, v in means.items()}
    signs = {ROAR: -1, KAR: 1, "morf": -1, "lerf": 1}
    scores = {}
    for benchmark, sign in signs.items():
        found = {method: sign * acc for (m, method), acc in mean.items() if m == benchmark}
        if found:
            scores[benchmark] = found
    road = {method: acc - mean[("road-morf", method)] for (m, method), acc in mean.items()
            if m == "road-lerf" and ("road-morf", method) in mean}
    if road:
        scores["road"] = road
    return scores


def kendall_tau(a: dict, b: dict) -> float:
    """Kendall's tau-b between two scorings of the same items (dicts item -> score); NaN below 2 items
    or when either scoring is all ties."""
    items = sorted(set(a) & set(b))
    concordant = discordant = ties_a = ties_b = 0
    for i, x in enumerate(items):
        for y in items[i + 1:]:
            da, db = a[x] - a[y], b[x] - b[y]
            if da == 0 and db == 0:
                continue
            if da == 0:
                ties_a += 1
            elif db == 0:
                ties_b += 1
            elif (da > 0) == (db > 0):
                concordant += 1
            else:
                discordant += 1
    denominator = math.sqrt((concordant + discordant + ties_a) * (concordant + discordant + ties_b))
    return (concordant - discordant) / denominator if denominator else math.nan


#: a rank correlation over fewer methods than this is no finding: over 2, tau is +-1 whatever the rankings
MIN_AGREEMENT_METHODS = 3


def agreement_methods(rows) -> dict:
    """{(benchmark a, benchmark b): how many methods both scored}, the pairs of rank_agreement."""
    scores = estimator_scores(rows)
    present = [b for b in BENCHMARKS if b in scores]
    return {(a, b): len(set(scores[a]) & set(scores[b])) for i, a in enumerate(present) for b in present[i + 1:]}


def rank_agreement(rows) -> dict:
    """{(benchmark a, benchmark b): Kendall tau} between the estimator rankings of every pair of the
    BENCHMARKS present in the rows (ROAR, KAR, MoRF, LeRF, ROAD), over the methods both scored."""
    scores = estimator_scores(rows)
    present = [b for b in BENCHMARKS if b in scores]
    return {(a, b): kendall_tau(scores[a], scores[b]) for i, a in enumerate(present) for b in present[i + 1:]}
