"""The no-retrain evaluations (roarfast evaluate: MoRF, LeRF and their ROAD forms on the base model) in a
table, and the rank agreement (Kendall tau) between the estimator rankings of ROAR, KAR, MoRF, LeRF and
ROAD."""

import math
from collections import defaultdict

from roarfast import stats
from roarfast.fills import DEFAULT_FILL
from roarfast.modes import MODES, NO_RETRAIN_MODES
from roarfast.report.sections import Table, register
from roarfast.report.text import pct

#: ROAR and KAR cells enter the rank agreement with this fill only, so that one configuration is compared
AGREEMENT_FILL = DEFAULT_FILL


def numbers(loaded, summary: dict) -> dict:
    return {"no_retrain": no_retrain_tables(loaded.retrained, loaded.no_retrain)}


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


def tables(summary: dict) -> list:
    evaluated = summary["no_retrain"]
    if not evaluated:
        return []
    modes = evaluated["modes"]
    rows = [[c["method"], f"{c['fraction']:.0%}"]
            + [(f"{pct(c['modes'][m]['test_acc'])} / {pct(c['modes'][m]['mean_probability'])}"
                if m in c["modes"] else "-") for m in modes] for c in evaluated["cells"]]
    out = [Table("No retraining (roarfast evaluate): the base model's test accuracy / mean probability of its "
                 "original prediction as the most- (MoRF) or least-relevant (LeRF) pixels are replaced; road-: with "
                 "the imputation fill", ["method", "fraction", *modes], rows)]
    rows = [[e["a"].upper(), e["b"].upper(), "-" if e["tau"] is None else f"{e['tau']:+.2f}"]
            for e in evaluated["agreement"]]
    if rows:
        out.append(Table(f"Rank agreement of the estimator rankings (Kendall tau-b; ROAR/KAR with the "
                         f"{AGREEMENT_FILL} fill)", ["benchmark", "benchmark", "tau"], rows))
    return out


register("no_retrain", "the no-retrain evaluations and the rank agreement between the benchmarks", 100,
         numbers=numbers, blocks=tables)
