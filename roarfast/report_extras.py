"""The report's sections beyond retraining (DESIGN.md section 11): the no-retrain evaluations of
`roarfast evaluate` (MoRF, LeRF, ROAD) with the rank agreement between all five benchmarks, and the
fill leakage measured by `roarfast leakage` beside the mask-only class controls."""

import json
import math
from collections import defaultdict
from pathlib import Path

#: the modes `roarfast evaluate` writes, in reading order
EVALUATE_MODES = ("morf", "lerf", "road-morf", "road-lerf")
#: ROAR and KAR cells enter the rank agreement with this fill only, so that one configuration is compared
AGREEMENT_FILL = "dataset-mean"


def no_retrain(rows: list) -> dict | None:
    """From all done rows of results.sqlite: per (method, mode, fraction) the base model's test accuracy and
    mean probability of its original prediction, and the Kendall tau between the estimator rankings of
    ROAR, KAR, MoRF, LeRF and ROAD; None when `roarfast evaluate` has not run."""
    from roarfast.evaluate import rank_agreement

    evaluated = [r for r in rows if r["mode"] in EVALUATE_MODES]
    if not evaluated:
        return None
    table = defaultdict(dict)
    for r in evaluated:
        table[(r["method"], r["fraction"])][r["mode"]] = {
            "test_acc": r["test_acc"], "mean_probability": (r["extra"] or {}).get("mean_probability")}
    retrained = [r for r in rows if r["mode"] in ("roar", "kar")
                 and (r["extra"] or {}).get("fill", AGREEMENT_FILL) == AGREEMENT_FILL]
    agreement = rank_agreement(retrained + evaluated)
    return {"cells": [{"method": m, "fraction": f, "modes": modes} for (m, f), modes in sorted(table.items())],
            "modes": [m for m in EVALUATE_MODES if any(m in c for c in table.values())],
            "agreement": [{"a": a, "b": b, "tau": None if math.isnan(tau) else tau}
                          for (a, b), tau in agreement.items()]}


def fill_leakage(run_dir: Path) -> list | None:
    """The rows of <run_dir>/leakage.json (method, fill, fraction, detector accuracy, base rate), or None."""
    path = Path(run_dir) / "leakage.json"
    return json.loads(path.read_text()) if path.exists() else None


def _pct(value) -> str:
    return "-" if value is None else f"{value:.1%}"


def sections(summary: dict) -> list[tuple]:
    """("table", title, header, rows) sections for the report's reading order."""
    out = []
    evaluated = summary.get("no_retrain")
    if evaluated:
        modes = evaluated["modes"]
        rows = [[c["method"], f"{c['fraction']:.0%}"]
                + [(f"{_pct(c['modes'][m]['test_acc'])} / {_pct(c['modes'][m]['mean_probability'])}"
                    if m in c["modes"] else "-") for m in modes] for c in evaluated["cells"]]
        out.append(("table", "No retraining (roarfast evaluate): the base model's test accuracy / mean probability "
                             "of its original prediction as the most- (MoRF) or least-relevant (LeRF) pixels are "
                             "replaced; road-: with the imputation fill", ["method", "fraction", *modes], rows))
        rows = [[e["a"].upper(), e["b"].upper(), "-" if e["tau"] is None else f"{e['tau']:+.2f}"]
                for e in evaluated["agreement"]]
        if rows:
            out.append(("table", f"Rank agreement of the estimator rankings (Kendall tau-b; ROAR/KAR with the "
                                 f"{AGREEMENT_FILL} fill)", ["benchmark", "benchmark", "tau"], rows))
    leakage = summary.get("fill_leakage")
    if leakage:
        controls = {(e["method"], e["fraction"]): e["mean"] for e in summary.get("leakage", [])
                    if e["mode"] == "roar-mask"}
        rows = [[r["method"], r["fill"], f"{r['fraction']:.0%}", _pct(r["accuracy"]), _pct(r["base_rate"]),
                 _pct(controls.get((r["method"], r["fraction"])))] for r in leakage]
        out.append(("table", "Fill leakage (roarfast leakage): a per-pixel detector finding the removed pixels "
                             "after each fill, against the base rate; beside it the mask-only class control",
                    ["method", "fill", "fraction", "detector accuracy", "base rate", "class control (ROAR)"], rows))
    return out
