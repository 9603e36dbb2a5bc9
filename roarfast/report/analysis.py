"""The report's analysis (DESIGN.md sections 10-11): from the loaded measurements (roarfast.report.load)
to the summary every renderer and figure reads — per cell group the mean and 95% interval over seeds,
each mask-only control tested against chance (mask leakage), each estimator against random (Welch,
Holm), rankings by the area under the accuracy curve, the no-retrain tables with the rank agreement
between the five benchmarks, and the fill-leakage table. Plain data in, plain (JSON-able) data out.
"""

import math
from collections import defaultdict

from roarfast import stats
from roarfast.fills import DEFAULT_FILL
from roarfast.modes import LOWER_IS_BETTER, MODES, NO_RETRAIN_MODES, control_mode, is_control
from roarfast.report.load import method_order, mode_order

#: ROAR and KAR cells enter the rank agreement with this fill only, so that one configuration is compared
AGREEMENT_FILL = DEFAULT_FILL


def analyse(loaded) -> dict:
    """Everything the report shows, JSON-able (summary.json): groups (mean and interval per method x mode
    x fill x fraction), the mask-only control tests (key "leakage": mask leakage), verdicts against
    random, rankings by AUC, the no-retrain tables and rank agreement, fill leakage, base model, chance,
    stages, notes."""
    cells, context, notes = loaded.cells, loaded.context, loaded.notes
    accs = defaultdict(dict)  # (method, mode, fill, fraction) -> {seed: acc}
    sizes = defaultdict(set)  # (method, mode, fill, fraction) -> the test split sizes its cells recorded
    for c in cells:
        accs[(c["method"], c["mode"], c["fill"], c["fraction"])][c["seed"]] = c["test_acc"]
        sizes[(c["method"], c["mode"], c["fill"], c["fraction"])].add(c["test_images"])
    groups = []
    for (method, mode, fill, fraction), by_seed in accs.items():
        interval = stats.t_interval(list(by_seed.values()))
        groups.append({"method": method, "mode": mode, "fill": fill, "fraction": fraction,
                       "seeds": sorted(by_seed), **interval.to_dict()})
    controls = control_tests(accs, sizes, context)
    verdicts = verdicts_against_random(accs, controls)
    ranked = rankings(accs)
    fills = sorted({c["fill"] for c in cells if c["fill"] is not None})
    meta = context.meta
    return {
        "datasets": sorted({c["dataset"] for c in cells}),
        "models": sorted({c["model"] for c in cells}),
        "fills": fills,
        "base": {k: meta.get(k) for k in ("model", "dataset", "test_acc", "val_acc", "seconds", "num_classes")},
        "chance": context.chance,
        "chance_source": context.chance_source,
        "n_test": context.n_test,
        "alpha": stats.ALPHA,
        "leak_margin": stats.LEAK_MARGIN,
        "tests": {"interval": stats.T_INTERVAL, "verdict": stats.WELCH, "ranking": stats.AUC_TEXT,
                  "leakage": f"{stats.LEAK_T}; with one seed or no spread: {stats.LEAK_BINOMIAL}; leaky when "
                             f"p < {stats.ALPHA} and the control beats chance by >= {stats.LEAK_MARGIN:.0%}",
                  "degenerate": "no spread in both groups: equal means give p = 1, different means p = 0"},
        "groups": sorted(groups, key=lambda g: (mode_order(g["mode"]), g["fill"] or "", method_order(g["method"]),
                                                g["fraction"])),
        "leakage": controls,
        "verdicts": verdicts,
        "counts": counts(controls, verdicts),
        "rankings": ranked,
        "stages": list(context.stages),
        "notes": notes,
        "no_retrain": no_retrain_tables(loaded.retrained, loaded.no_retrain),
        "fill_leakage": fill_leakage_table(loaded.fill_leakage),
    }


def control_tests(accs: dict, sizes: dict, context) -> list:
    """Per mask-only control group (method, control mode, fraction): its mean, interval and mask-leakage
    test against chance. The binomial test (one seed) counts on the test split's size its cells recorded
    (sizes: group -> {test_images}), else the dataset's, so it needs no dataset."""
    out = []
    for (method, mode, fill, fraction), by_seed in sorted(accs.items(), key=lambda kv: (
            mode_order(kv[0][1]), method_order(kv[0][0]), kv[0][3])):
        if not is_control(mode):
            continue
        values = list(by_seed.values())
        interval = stats.t_interval(values)
        entry = {"method": method, "mode": mode, "fraction": fraction, **interval.to_dict(),
                 "chance": context.chance, "test": None, "p": None, "leaky": None}
        needs_n = len(values) < 2 or len(set(values)) == 1
        recorded = sizes[(method, mode, fill, fraction)]
        n_test = next(iter(recorded)) if len(recorded) == 1 and None not in recorded else context.n_test
        if context.chance is None:
            entry["test"] = "none: chance unknown"
        elif needs_n and n_test is None:
            entry["test"] = "none: one seed and the test split's size is unknown"
        else:
            result = stats.leak_test(values, context.chance, n_test or 0)
            entry.update(test=result.test, p=result.p, leaky=result.leaky)
        out.append(entry)
    return out


def verdicts_against_random(accs: dict, control_entries: list) -> list:
    """Each estimator against random at every (mode, fill, fraction), Holm-corrected over the
    estimators tested there, with its mask-only control's test."""
    controls = {(e["method"], e["mode"], e["fraction"]): e for e in control_entries}
    out = []
    slots = sorted({(mode, fill, fraction) for (_m, mode, fill, fraction) in accs if mode in MODES},
                   key=lambda slot: (mode_order(slot[0]), *slot[1:]))
    for mode, fill, fraction in slots:
        random = accs.get(("random", mode, fill, fraction))
        entries = []
        for (method, m, f, fr), by_seed in accs.items():
            if (m, f, fr) != (mode, fill, fraction) or method == "random":
                continue
            values = list(by_seed.values())
            entry = {"method": method, "mode": mode, "fill": fill, "fraction": fraction,
                     "mean": sum(values) / len(values), "n": len(values),
                     "random_mean": None, "n_random": 0, "p": None, "p_holm": None}
            if random is None:
                entry["verdict"] = "no verdict drawn (random was not run here)"
            else:
                rv = list(random.values())
                entry.update(random_mean=sum(rv) / len(rv), n_random=len(rv))
                if len(values) < 2 or len(rv) < 2:
                    entry["verdict"] = "no verdict drawn (one seed)"
                else:
                    entry["p"] = stats.welch_p(values, rv)
            control = controls.get((method, control_mode(mode), fraction))
            entry["control"] = None if control is None else {k: control[k]
                                                             for k in ("mean", "n", "p", "leaky", "test")}
            entries.append(entry)
        tested = [e for e in entries if e["p"] is not None]
        for e, p_holm in zip(tested, stats.holm([e["p"] for e in tested])):
            e["p_holm"] = p_holm
            e["verdict"] = stats.verdict(e["mean"], e["random_mean"], p_holm, LOWER_IS_BETTER[mode])
        for e in entries:
            e["leak"] = leak_reading(e)
        out.extend(sorted(entries, key=lambda e: method_order(e["method"])))
    return out


#: how a verdict reads beside its mask-only control (a verdict entry's "leak")
NO_CONTROL, UNTESTED, NOT_LEAKY = "no control", "control untested", "not leaky"
LEAK_STANDS, LEAK_INCONCLUSIVE, LEAKY_NO_VERDICT = "leaky, verdict stands", "leaky, inconclusive", "leaky"
#: the readings under which a drawn verdict is conclusive
CONCLUSIVE = (NOT_LEAKY, LEAK_STANDS)


def leak_reading(entry: dict) -> str:
    """What the leak does to a verdict entry (DESIGN.md section 13). A leaky control means the retrained
    model also reads the removal pattern's shape, which raises its accuracy in both modes: a ROAR
    "better than random" (lower) was reached despite it and stands, while its "no different" or "worse"
    may be the leak's doing; a KAR "better than random" (higher) may be the leak's doing, while its "no
    different" or "worse" stand."""
    control = entry["control"]
    if control is None:
        return NO_CONTROL
    if control["leaky"] is None:
        return UNTESTED
    if not control["leaky"]:
        return NOT_LEAKY
    if entry["p_holm"] is None:
        return LEAKY_NO_VERDICT
    better = entry["verdict"] == stats.BETTER
    return LEAK_STANDS if better == LOWER_IS_BETTER[entry["mode"]] else LEAK_INCONCLUSIVE


def counts(controls: list, verdicts: list) -> dict:
    """How many controls were tested and found leaky (an untested one is counted as such, never as not
    leaky), and how many verdicts were drawn and are conclusive beside their controls."""
    drawn = [e for e in verdicts if e["p_holm"] is not None]
    return {"controls": {"all": len(controls), "tested": sum(c["leaky"] is not None for c in controls),
                         "leaky": sum(bool(c["leaky"]) for c in controls),
                         "untested": sum(c["leaky"] is None for c in controls)},
            "verdicts": {"all": len(verdicts), "drawn": len(drawn),
                         "conclusive": sum(e["leak"] in CONCLUSIVE for e in drawn),
                         "inconclusive": sum(e["leak"] == LEAK_INCONCLUSIVE for e in drawn),
                         "unchecked": sum(e["leak"] in (NO_CONTROL, UNTESTED) for e in drawn)}}


def shown_bounds(entry: dict) -> tuple:
    """(low, high) of an accuracy (or AUC) interval as shown: clipped to [0, 1], accuracy's range, which a
    t-interval over a few seeds near 0% or 100% passes (summary.json keeps the raw bounds); (None, None)
    for one seed."""
    if entry["low"] is None:
        return None, None
    return max(0.0, entry["low"]), min(1.0, entry["high"])


def rankings(accs: dict) -> list:
    """Per (mode, fill): each method's per-seed AUC over every fraction run in that mode and fill, mean and
    interval over the seeds that have them all; sorted best first. A method lacking a fraction (a sweep
    still running) is listed as incomplete rather than ranked over a shorter curve."""
    out = []
    slots = {(m, f) for (_x, m, f, _fr) in accs if m in MODES}
    for mode, fill in sorted(slots, key=lambda t: (mode_order(t[0]), t[1])):
        by_method = defaultdict(dict)  # method -> fraction -> {seed: acc}
        for (method, m, f, fraction), by_seed in accs.items():
            if (m, f) == (mode, fill):
                by_method[method][fraction] = by_seed
        fractions = sorted({fr for curves in by_method.values() for fr in curves})
        entries, incomplete = [], []
        for method, curves in sorted(by_method.items(), key=lambda kv: method_order(kv[0])):
            seeds = set.intersection(*(set(curves.get(fr, {})) for fr in fractions))
            if not seeds:
                incomplete.append(method)
                continue
            aucs = [stats.curve_auc(fractions, [curves[fr][s] for fr in fractions]) for s in sorted(seeds)]
            entries.append({"method": method, **stats.t_interval(aucs).to_dict()})
        entries.sort(key=lambda e: e["mean"] if LOWER_IS_BETTER[mode] else -e["mean"])
        out.append({"mode": mode, "fill": fill, "fractions": fractions, "lower_is_better": LOWER_IS_BETTER[mode],
                    "entries": entries, "incomplete": incomplete})
    return out


def no_retrain_tables(retrained: list, evaluated: list) -> dict | None:
    """Per (method, fraction) the base model's test accuracy and mean probability of its original
    prediction in each no-retrain mode, and the Kendall tau between the estimator rankings of ROAR, KAR,
    MoRF, LeRF and ROAD; None when no no-retrain measurement was made."""
    if not evaluated:
        return None
    table = defaultdict(dict)
    for r in evaluated:
        table[(r["method"], r["fraction"])][r["mode"]] = {
            "test_acc": r["test_acc"], "mean_probability": (r["extra"] or {}).get("mean_probability")}
    cells = [r for r in retrained if r["mode"] in MODES and r["fill"] == AGREEMENT_FILL]
    agreement = stats.rank_agreement(cells + evaluated)
    return {"cells": [{"method": m, "fraction": f, "modes": modes} for (m, f), modes in sorted(table.items())],
            "modes": [m for m in NO_RETRAIN_MODES if any(m in c for c in table.values())],
            "agreement": [{"a": a, "b": b, "tau": None if math.isnan(tau) else tau}
                          for (a, b), tau in agreement.items()]}


def fill_leakage_table(rows: list) -> list | None:
    """The fill-leakage measurements (method, fill, fraction, detector accuracy, base rate), the newest of
    each (method, fill, fraction), sorted by them; None when none was made."""
    newest = {}
    for r in rows:
        key = (r["method"], r["fill"], r["fraction"])
        if key not in newest or r["finished"] > newest[key]["finished"]:
            newest[key] = r
    return [{"method": r["method"], "fill": r["fill"], "fraction": r["fraction"], "accuracy": r["test_acc"],
             "base_rate": r["extra"].get("base_rate")} for _, r in sorted(newest.items())] or None
