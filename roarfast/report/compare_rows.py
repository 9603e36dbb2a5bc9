"""The rows of a comparison (roarfast.report.compare): per measure (test accuracy per mode, fill, fraction and
method; AUC per mode, fill and method), each side's mean and interval over seeds, its verdict against its own
random, and beside the baseline its change from the baseline's, tested as what the two measurements are:

- SHARED: both sides hold the same cells (the same results rows: the same key and config hash, such as the
  random cells of two configurations that differ only in another estimator's ranks). One measurement, not two:
  the change is 0, nothing is tested, and no p-value enters Holm's correction.
- paired: both sides ran the same seeds (a seed fixes a retraining's initialization and data order on both
  sides): a paired t-test over the seeds' differences (scipy.stats.ttest_rel) and its t-interval.
- Welch: otherwise (other seeds on each side), Welch's two-sample t-test and interval.

Where some seeds' cells are shared and others not, the shared seeds are left out of the test (a shared cell
differs by 0 on both sides by construction) and the row says how many. Holm corrects every p-value of one side
(its accuracies and AUCs read together).
"""

from collections import defaultdict

import numpy as np
from scipy import stats as sps

from roarfast import stats
from roarfast.modes import MODES
from roarfast.report.load import method_order, mode_order
from roarfast.report.sections.rankings import seed_aucs
from roarfast.report.text import title_fill

#: how a change was tested (a row's "test")
SHARED, PAIRED, WELCH = "shared", "paired", "Welch"


def cell_groups(cells: list) -> dict:
    """(method, mode, fill, fraction) -> {seed: (test accuracy, config hash)} of one side's cells: the value
    and what says which results row it is."""
    out = defaultdict(dict)
    for c in cells:
        out[(c["method"], c["mode"], c["fill"], c["fraction"])][c["seed"]] = (c["test_acc"], c["config_hash"])
    return out


def difference(base: dict, values: dict, shared: set) -> dict:
    """The change from the baseline's values ({seed: value}) to a side's, the seeds in `shared` being the same
    cells on both sides: {change, change_low, change_high, p, test, shared_seeds}."""
    out = {"change": None, "change_low": None, "change_high": None, "p": None, "test": None,
           "shared_seeds": len(shared)}
    if shared and shared == set(base) == set(values):
        return {**out, "change": 0.0, "change_low": 0.0, "change_high": 0.0, "test": SHARED}
    a = {s: v for s, v in base.items() if s not in shared}
    b = {s: v for s, v in values.items() if s not in shared}
    if not a or not b:  # the only cells left on one side are shared: nothing of its own to compare
        return out
    if set(a) == set(b) and len(a) >= 2:
        seeds = sorted(a)
        return {**out, **_paired([a[s] for s in seeds], [b[s] for s in seeds]), "test": PAIRED}
    diff = stats.welch_interval(list(a.values()), list(b.values()))
    out.update(change=diff.mean, change_low=diff.low, change_high=diff.high)
    if len(a) >= 2 and len(b) >= 2:
        out.update(p=stats.welch_p(list(a.values()), list(b.values())), test=WELCH)
    return out


def _paired(a: list, b: list) -> dict:
    """mean(b - a) over paired seeds, its 95% t-interval and the paired t-test's two-sided p. Differences with no
    spread decide it as stats.welch_p does: all 0, p = 1; all one other value, p = 0."""
    d = np.asarray(b, dtype=np.float64) - np.asarray(a, dtype=np.float64)
    mean = float(d.mean())
    if d.std(ddof=1) == 0:
        return {"change": mean, "change_low": mean, "change_high": mean, "p": 1.0 if mean == 0 else 0.0}
    result = sps.ttest_rel(b, a)
    interval = result.confidence_interval(stats.CONFIDENCE)
    return {"change": mean, "change_low": float(interval.low), "change_high": float(interval.high),
            "p": float(result.pvalue)}


def row(measure, key, side, label, interval, **more) -> dict:
    mode, fill, fraction, method = key
    return {"measure": measure, "mode": mode, "fill": fill, "fraction": fraction, "method": method, "side": side,
            "configuration": label, **interval.to_dict(), "verdict": None, "change": None, "change_low": None,
            "change_high": None, "p": None, "p_holm": None, "test": None, "shared_seeds": 0, **more}


def accuracy_rows(groups: list, summaries: list, labels: list) -> list:
    """Per (mode, fill, fraction, method) and side: its accuracy, its verdict against its own random, its change
    from the baseline's (`groups`: cell_groups per side)."""
    verdicts = [{(e["method"], e["mode"], e["fill"], e["fraction"]): e["verdict"] for e in s["verdicts"]}
                for s in summaries]
    keys = sorted({k for g in groups for k in g}, key=lambda k: (mode_order(k[1]), k[2] or "", k[3],
                                                                method_order(k[0])))
    rows = []
    for key in keys:
        method, mode, fill, fraction = key
        first = groups[0].get(key, {})
        for i, g in enumerate(groups):
            cells = g.get(key, {})
            if not cells:
                continue
            values = {s: v for s, (v, _) in cells.items()}
            r = row("accuracy", (mode, fill, fraction, method), i, labels[i], stats.t_interval(list(values.values())),
                    verdict=verdicts[i].get(key))
            if i > 0 and first:
                shared = {s for s in cells if s in first and first[s][1] == cells[s][1]}
                r.update(difference({s: v for s, (v, _) in first.items()}, values, shared))
            rows.append(r)
    return rows


def auc_rows(groups: list, labels: list, notes: list) -> list:
    """Per mode, fill and method, each side's AUC over its fractions; the change only where both sides ran the
    same fractions (an AUC over other fractions is another measure); a seed's AUC is shared where each of its
    cells is."""
    curves = []  # per side: (mode, fill) -> method -> fraction -> {seed: (acc, config hash)}
    for g in groups:
        by_slot = defaultdict(lambda: defaultdict(dict))
        for (method, mode, fill, fraction), cells in g.items():
            if mode in MODES:
                by_slot[(mode, fill)][method][fraction] = cells
        curves.append(by_slot)
    rows = []
    slots = sorted({s for c in curves for s in c}, key=lambda s: (mode_order(s[0]), s[1] or ""))
    for mode, fill in slots:
        fractions = [sorted({fr for m in c.get((mode, fill), {}).values() for fr in m}) for c in curves]
        if any(f and f != fractions[0] for f in fractions[1:]) and fractions[0]:
            notes.append(f"{title_fill(mode, fill)}: the sides ran other fractions "
                         f"({'; '.join(', '.join(f'{x:g}' for x in f) or 'none' for f in fractions)}): "
                         f"their AUCs are shown, not compared")
        methods = sorted({m for c in curves for m in c.get((mode, fill), {})}, key=method_order)
        for method in methods:
            curve = [c.get((mode, fill), {}).get(method) for c in curves]
            aucs = [{} if k is None else seed_aucs(_values(k), f) for k, f in zip(curve, fractions)]
            for i, side in enumerate(aucs):
                if not side:
                    continue
                r = row("auc", (mode, fill, None, method), i, labels[i], stats.t_interval(list(side.values())),
                        fractions=",".join(f"{x:g}" for x in fractions[i]))
                if i > 0 and aucs[0] and fractions[i] == fractions[0]:
                    shared = {s for s in side if s in aucs[0] and all(
                        s in curve[0][fr] and curve[0][fr][s][1] == curve[i][fr][s][1] for fr in fractions[i])}
                    r.update(difference(aucs[0], side, shared))
                rows.append(r)
    return rows


def _values(curve: dict) -> dict:
    """{fraction: {seed: accuracy}} of {fraction: {seed: (accuracy, config hash)}}."""
    return {fr: {s: v for s, (v, _) in cells.items()} for fr, cells in curve.items()}


def holm(rows: list) -> None:
    """Holm over every change tested on one side (its accuracies and AUCs read together); shared cells are not
    tested, so not counted."""
    by_side = defaultdict(list)
    for r in rows:
        if r["p"] is not None:
            by_side[r["side"]].append(r)
    for tested in by_side.values():
        for r, p in zip(tested, stats.holm([r["p"] for r in tested])):
            r["p_holm"] = p
