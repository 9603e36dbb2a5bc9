"""Rankings of estimators: the area under an accuracy curve, means over seeds, each benchmark's estimator
scores and the agreement (Kendall tau) between the rankings of two benchmarks."""

import math
import statistics

import numpy as np

from roarfast.modes import KAR, NO_RETRAIN_METRICS, ROAR

AUC_TEXT = "trapezoid area under accuracy vs fraction, divided by the fraction span (the curve's mean height)"
#: a rank correlation over fewer methods than this is no finding: over 2, tau is +-1 whatever the rankings
MIN_AGREEMENT_METHODS = 3
#: the benchmarks rank_agreement compares, each scoring an estimator from its rows (higher = better)
BENCHMARKS = (ROAR, KAR, *NO_RETRAIN_METRICS)


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


def accuracy_over_seeds(rows) -> dict:
    """{(method, mode, fraction): (mean test accuracy, population std over seeds, seeds)} of result rows."""
    groups = {}
    for row in rows:
        groups.setdefault((row["method"], row["mode"], row["fraction"]), []).append(row["test_acc"])
    return {key: (statistics.fmean(v), statistics.pstdev(v) if len(v) > 1 else 0.0, len(v))
            for key, v in groups.items()}


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
