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
    MoRF, LeRF and ROAD with the methods both ranked ("methods") and whether it is a finding (over at least
    stats.MIN_AGREEMENT_METHODS); None when no no-retrain measurement was made."""
    if not evaluated:
        return None
    table = defaultdict(dict)
    for r in evaluated:
        table[(r["method"], r["fraction"])][r["mode"]] = {
            "test_acc": r["test_acc"], "mean_probability": (r["extra"] or {}).get("mean_probability")}
    cells = [r for r in retrained if r["mode"] in MODES and r["fill"] == AGREEMENT_FILL]
    agreement = stats.rank_agreement(cells + evaluated)
    sizes = stats.agreement_methods(cells + evaluated)
    return {"cells": [{"method": m, "fraction": f, "modes": modes} for (m, f), modes in sorted(table.items())],
            "modes": [m for m in NO_RETRAIN_MODES if any(m in c for c in table.values())],
            "agreement": [{"a": a, "b": b, "tau": None if math.isnan(tau) else tau, "methods": sizes[(a, b)],
                           "finding": sizes[(a, b)] >= stats.MIN_AGREEMENT_METHODS}
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
    rows = [[e["a"].upper(), e["b"].upper(), _tau_text(e)] for e in evaluated["agreement"]]
    if rows:
        out.append(Table(f"Rank agreement of the estimator rankings (Kendall tau-b; ROAR/KAR with the "
                         f"{AGREEMENT_FILL} fill)", ["benchmark", "benchmark", "tau"], rows))
    return out


def _tau_text(entry: dict) -> str:
    if entry.get("finding") is False:  # summaries written before "finding" existed have none
        return (f"not shown: over {entry['methods']} method(s), at least {stats.MIN_AGREEMENT_METHODS} are needed "
                f"(over 2, tau is +-1 whatever the rankings)")
    return "-" if entry["tau"] is None else f"{entry['tau']:+.2f}"


register("no_retrain", "the no-retrain evaluations and the rank agreement between the benchmarks", 100,
         numbers=numbers, blocks=tables)
