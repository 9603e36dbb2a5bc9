"""The report's no-retrain and fill-leakage sections: evaluate's rows in a table, the Kendall tau between
benchmarks computed by hand, leakage.json beside the class controls."""

import json

from roarfast import report as rpt
from roarfast.results import Cell, ResultsDB

HASH = "e" * 64
#: three estimators whose ROAR order (a best) MoRF agrees with fully and LeRF reverses fully
ROAR = {"a": 0.2, "b": 0.5, "random": 0.8}
MORF = {"a": 0.1, "b": 0.3, "random": 0.6}
LERF = {"a": 0.4, "b": 0.6, "random": 0.9}  # LeRF: higher is better, so this is the reverse of ROAR's order


def record(db, method, mode, acc, seed=0, config_hash=HASH, **extra):
    db.record(Cell("embedded", "fastnet", method, mode, 0.5, seed, config_hash),
              {"test_acc": acc, "val_acc": None if mode in ("morf", "lerf") else acc, "epochs": 0, "seconds": 1.0,
               "versions": {}, **extra})


def test_no_retrain_table_agreement_and_leakage_are_reported(tmp_path):
    with ResultsDB(tmp_path / "results.sqlite") as db:
        for method in ROAR:
            for seed in range(2):
                record(db, method, "roar", ROAR[method], seed, fill="dataset-mean")
                record(db, method, "roar", 0.5, seed, "f" * 64, fill="road")  # another fill: not in the agreement
            record(db, method, "morf", MORF[method], mean_probability=MORF[method] / 2)
            record(db, method, "lerf", LERF[method], mean_probability=0.9)
    (tmp_path / "leakage.json").write_text(json.dumps(
        [{"method": "random", "fill": "dataset-mean", "fraction": 0.5, "accuracy": 0.99, "base_rate": 0.5},
         {"method": "random", "fill": "road", "fraction": 0.5, "accuracy": 0.61, "base_rate": 0.5}]))
    summary = rpt.write_report(tmp_path).summary
    tau = {(e["a"], e["b"]): e["tau"] for e in summary["no_retrain"]["agreement"]}
    assert tau[("roar", "morf")] == 1.0 and tau[("roar", "lerf")] == -1.0 and tau[("morf", "lerf")] == -1.0
    cell = next(c for c in summary["no_retrain"]["cells"] if c["method"] == "a")
    assert cell["modes"]["morf"] == {"test_acc": 0.1, "mean_probability": 0.05}
    assert not any("morf" in note for note in summary["notes"])
    markdown = (tmp_path / "report" / "index.md").read_text()
    assert "Kendall tau-b" in markdown and "| ROAR | LERF | -1.00 |" in markdown
    assert "| random | road | 50% | 61.0% | 50.0% |" in markdown
    assert "No retraining" in (tmp_path / "report" / "index.html").read_text()
