"""Verdicts compare like with like (issue 24, item 2): a run directory holding cells of several configurations
(rows written with MeasurementKey.of(config=...), as the cells write them) reports each apart, labelled by
what differs, and no verdict, ranking, curve or control test ever takes cells of two; rows without a config
form their own; within a configuration only a method's newest ranks count; and end to end, cells retrained
with --epochs 1 and again with --epochs 2 in one run directory are reported apart."""

import csv
import json
import sqlite3

import pytest

from roarfast.report import write_report
from roarfast.report.figures import PAGE
from roarfast.report.analysis import parts_of
from roarfast.rundir.catalog import UNRECORDED
from roarfast.report.sections.accuracy import figure_accuracy
from roarfast.results import RETRAIN, MeasurementKey, ResultsDB
from roarfast.measurements.schema import row_digest
from roarfast.rundir.directory import RunDir
from tests.test_cli_errors import TINY, cli_ok

RECIPE = {"epochs": 2, "batch_size": 128, "lr": 0.1, "momentum": 0.9}
FINGERPRINT = "d" * 64
#: each method's own ranks, as extract records them: they differ by method and must not split the methods
RANKS = {"random": {"parameters": {}, "seed": 0}, "ixg": {"parameters": {"target": "predicted"}},
         "grad": {"parameters": {"target": "predicted"}}, "sobel": {"parameters": {}}}


def config(method: str, epochs: int, control: bool, captum: str = "0.8.0") -> dict:
    ranks = {"granularity": "pixel", "reduction": "sum_sq", "code": {"roarfast": "0.1.0", "captum": captum},
             **RANKS[method]}
    return {"recipe": {**RECIPE, "epochs": epochs}, "dataset": FINGERPRINT, "ranks": ranks,
            **({} if control else {"fill": "dataset-mean"})}


def record(db, method, mode, fraction, accs, epochs=None, **config_args):
    """A cell per seed with accuracies `accs`; epochs None: a row written before schema v5 (no config)."""
    control = mode.endswith("-mask")
    fields = dict(kind=RETRAIN, dataset="embedded", model="fastnet", method=method, mode=mode,
                  fill=None if control else "dataset-mean", fraction=fraction)
    for seed, acc in enumerate(accs):
        if epochs is None:
            key = MeasurementKey(**fields, seed=seed, config_hash="0" * 64)
        else:
            key = MeasurementKey.of(**fields, seed=seed, config=config(method, epochs, control, **config_args))
        db.record(key, {"test_acc": acc, "val_acc": acc, "epochs": epochs or 3, "seconds": 1.0, "versions": {},
                        "test_images": 1000, "test_chance": 0.1})


# epochs 2: ixg clearly below its own random (0.31) at ROAR 50%, with a leaky control; grad's control only
E2_RANDOM, E2_IXG, E2_IXG_CONTROL = [0.30, 0.31, 0.32], [0.12, 0.13, 0.14], [0.50, 0.55, 0.60]
# epochs 4 (run again): random far higher; grad without a control here; sobel where only epochs 2 ran random
E4_RANDOM, E4_GRAD = [0.60, 0.61, 0.62], [0.20, 0.21, 0.22]


@pytest.fixture(scope="module")
def mixed(tmp_path_factory):
    run = RunDir(tmp_path_factory.mktemp("run"))
    run.legacy_base_checkpoint.mkdir(parents=True)  # rows without a base model: a run directory of format 1
    (run.legacy_base_checkpoint / "meta.json").write_text(json.dumps({"model": "fastnet", "dataset": "embedded", "num_classes": 10,
                                              "test_acc": 0.9, "val_acc": 0.9, "seconds": 5.0,
                                              "recipe": {**RECIPE, "epochs": 4}}))
    with ResultsDB(run.results_path) as db:
        record(db, "ixg", "roar", 0.5, [0.99, 0.99, 0.99], 2, captum="0.7.0")  # older ranks: made older below
        for fraction in (0.5, 0.9):
            record(db, "random", "roar", fraction, E2_RANDOM, 2)
            record(db, "ixg", "roar", fraction, E2_IXG, 2)
        record(db, "ixg", "roar-mask", 0.5, E2_IXG_CONTROL, 2)
        record(db, "grad", "roar-mask", 0.5, E2_IXG_CONTROL, 2)
        record(db, "random", "roar", 0.5, E4_RANDOM, 4)
        record(db, "grad", "roar", 0.5, E4_GRAD, 4)
        record(db, "sobel", "roar", 0.9, E4_GRAD, 4)
        record(db, "random", "roar", 0.5, [0.5, 0.5], None)  # before schema v5: no config
        record(db, "ixg", "roar", 0.5, [0.2, 0.2], None)
    with sqlite3.connect(run.results_path) as raw:
        raw.row_factory = sqlite3.Row
        for row in raw.execute("SELECT rowid, * FROM measurements").fetchall():
            config_text = row["config"] or ""
            stamp = ("2000-01-01T00:00:00+00:00" if '"0.7.0"' in config_text else  # the older ranks
                     "2026-01-02T00:00:00+00:00" if '"epochs":4' in config_text.replace(" ", "") else
                     "2026-01-01T00:00:00+00:00" if config_text else "2025-01-01T00:00:00+00:00")
            raw.execute("UPDATE measurements SET finished = ? WHERE rowid = ?", (stamp, row["rowid"]))
        for row in raw.execute("SELECT rowid, * FROM measurements").fetchall():  # sealed again, as roarfast does
            raw.execute("UPDATE measurements SET row_sha256 = ? WHERE rowid = ?", (row_digest(dict(row)), row["rowid"]))
    return run, write_report(run.root)


def by_label(report) -> dict:
    return {p["configuration"]["label"]: p for p in parts_of(report.summary)}


def test_each_configuration_is_labelled_by_what_differs(mixed):
    _, report = mixed
    parts = by_label(report)
    assert list(parts) == [UNRECORDED, "epochs 2", "epochs 4"]  # oldest first
    assert parts["epochs 2"]["configuration"]["differs"] == {"epochs": 2}
    assert parts["epochs 4"]["configuration"]["config"]["config"]["recipe"]["epochs"] == 4
    assert parts["epochs 2"]["configuration"]["cells"] == 6 + 6 + 3 + 3  # the older ranks' 3 not among them


def test_no_verdict_ranking_curve_or_control_test_takes_cells_of_two_configurations(mixed):
    _, report = mixed
    parts = by_label(report)
    for label, part in parts.items():
        random = {(g["mode"], g["fill"], g["fraction"]): g["mean"] for g in part["groups"] if g["method"] == "random"}
        methods = {g["method"] for g in part["groups"]}
        for e in part["verdicts"]:  # each against its own configuration's random, or none
            assert e["random_mean"] == random.get((e["mode"], e["fill"], e["fraction"])), (label, e)
        for r in part["rankings"]:
            assert {e["method"] for e in r["entries"]} | set(r["incomplete"]) <= methods
        assert {e["method"] for e in part["leakage"]} <= methods | {"grad"} and all(
            e["method"] != "grad" for e in parts["epochs 4"]["leakage"])
    e2 = {(e["method"], e["fraction"]): e for e in parts["epochs 2"]["verdicts"]}
    assert e2[("ixg", 0.5)]["random_mean"] == pytest.approx(0.31)
    assert e2[("ixg", 0.5)]["verdict"] == "better than random"
    assert e2[("ixg", 0.5)]["mean"] == pytest.approx(0.13)  # not the older ranks' 0.99
    assert e2[("ixg", 0.5)]["control"]["leaky"] is True
    e4 = {(e["method"], e["fraction"]): e for e in parts["epochs 4"]["verdicts"]}
    assert set(e4) == {("grad", 0.5), ("sobel", 0.9)}  # ixg was not run with 4 epochs
    assert e4[("grad", 0.5)]["random_mean"] == pytest.approx(0.61) and e4[("grad", 0.5)]["control"] is None
    assert e4[("sobel", 0.9)]["verdict"] == "no verdict drawn (random was not run here)"  # epochs 2's is not its
    legacy = {e["method"]: e for e in parts[UNRECORDED]["verdicts"]}
    assert legacy["ixg"]["random_mean"] == pytest.approx(0.5)


#: how a status line begins (roarfast.report.text.status_lines)
STATUS_LINE = ("CONCLUSIVE:", "UNDERPOWERED:", "INCONCLUSIVE:", "fix:", "so its rankings")


def test_the_lines_and_the_page_carry_the_label_and_say_first_what_was_set_aside(mixed):
    run, report = mixed
    lines = report.verdict_lines()
    # first each configuration's status, then the configurations
    statuses = [line for line in lines if line.split("] ", 1)[-1].startswith(STATUS_LINE)]
    assert len(statuses) >= 3 and lines[:len(statuses)] == statuses
    assert lines[len(statuses)].startswith("3 configurations of the retraining cells, reported apart")
    (set_aside,) = [line for line in lines if "set aside" in line]
    assert set_aside.startswith("[epochs 2] set aside: 3 row(s) of ixg: made with ixg's older ranks (captum 0.7.0 -> "
                                "0.8.0)")
    verdicts = [line for line in lines if "ROAR" in line.split(":")[0]]
    assert verdicts and all(line.startswith(("[epochs 2] ", "[epochs 4] ", f"[{UNRECORDED}] ")) for line in verdicts)
    assert any(line.startswith("[epochs 2] ROAR 50% ixg: better than random, significant after Holm [stands despite a "
                               "leaky control] (13.0% vs random 31.0%") for line in lines)
    index = (run.report_dir / "index.md").read_text()
    titles = [line for line in index.splitlines() if line.startswith("## ")]
    assert "whether the study can answer" in titles[0] or titles[0] == "## CONCLUSIVE: learning shown"
    assert titles[1].startswith("## Configurations: the cells were trained under 3")
    assert titles[2] == "## Set aside (not in any number below)"
    assert "## [epochs 2] What was measured" in titles
    assert any(title.startswith("## [epochs 4] Verdict against random, ROAR") for title in titles)


def test_figures_and_files_are_per_configuration(mixed):
    run, report = mixed
    parts = by_label(report)
    files = {f["file"]: f for f in report.summary["figures"]}
    assert {"accuracy_dataset-mean_epochs-2.png", "accuracy_dataset-mean_epochs-4.png"} <= set(files)
    assert files["accuracy_dataset-mean_epochs-4.png"]["title"].startswith("[epochs 4] Test accuracy")
    fig = figure_accuracy(parts["epochs 4"], "dataset-mean", PAGE)
    drawn = {line.get_label() for line in fig.axes[0].get_lines() if not line.get_label().startswith("_")}
    assert drawn == {"random", "grad", "sobel", "chance", "base model (unmodified, 4 epochs)"}
    with open(run.report_dir / "cells.csv") as f:
        rows = list(csv.DictReader(f))
    assert {r["configuration"] for r in rows} == {UNRECORDED, "epochs 2", "epochs 4"}
    (row,) = [r for r in rows if (r["configuration"], r["method"], r["fraction"], r["seed"]) == ("epochs 4", "grad",
                                                                                                 "0.5", "1")]
    assert json.loads(row["config"])["recipe"]["epochs"] == 4 and float(row["test_acc"]) == E4_GRAD[1]
    summary = json.loads((run.report_dir / "summary.json").read_text())
    assert [p["configuration"]["label"] for p in summary["configurations"]] == list(parts)


@pytest.mark.slow
def test_cells_retrained_with_other_epochs_in_one_run_directory_are_reported_apart(tmp_path):
    run_dir = str(tmp_path / "run")
    cli_ok("train", "--run-dir", run_dir, "--epochs", "1", *TINY)
    cli_ok("extract", "--run-dir", run_dir, "--method", "grad", *TINY)
    for epochs in ("1", "2"):
        cli_ok("retrain", "--run-dir", run_dir, "--method", "random,grad", "--epochs", epochs, "--seeds", "2",
               "--fraction", "0.5", *TINY)
    # by default the latest request's configuration, the other listed first with the command that reports it
    output = cli_ok("report", "--run-dir", run_dir)
    first = [line for line in output.splitlines() if not line.startswith(STATUS_LINE)][0]
    assert first.startswith("reported: the latest request's configuration [epochs 2]")
    # the first configuration is labelled by what it is, the second by what differs from the first
    first = f"{RunDir(run_dir).base_meta()['model']} on embedded"
    (other,) = [line for line in output.splitlines() if line.startswith(f"also in this run directory: [{first}]")]
    assert other.endswith(f"`roarfast report --run-dir {run_dir} --config {other.split('--config ')[1][:8]}`")
    # one verdict line, of the reported configuration (a tiny study's is marked "[not a finding]": not asserted here)
    assert [line.removeprefix("[not a finding] ").split(":")[0] for line in output.splitlines()
            if "ROAR 50% grad:" in line] == ["ROAR 50% grad"]
    output = cli_ok("report", "--run-dir", run_dir, "--all")
    # each configuration's status first, then what says they are reported apart, then their lines
    said = output.index("\n2 configurations of the retraining cells, reported apart")
    assert all(line.split("] ", 1)[1].startswith(STATUS_LINE) for line in output[:said].splitlines()), output[:said]
    grad = [line for line in output.splitlines() if "ROAR 50% grad:" in line]
    assert [line.split("]")[0] for line in grad] == [f"[{first}", "[epochs 2"]
    summary = json.loads((RunDir(run_dir).report_dir / "summary.json").read_text())
    epochs = {p["configuration"]["label"]: {c["epochs"] for c in [p["configuration"]["config"]["config"]["recipe"]]}
              for p in summary["configurations"]}
    assert epochs == {first: {1}, "epochs 2": {2}}
    for part in summary["configurations"]:
        (group,) = [g for g in part["groups"] if g["method"] == "random"]
        assert group["seeds"] == [0, 1]  # two seeds of its own, never four pooled


def row(method="random", epochs=2, lr=0.1, dataset="embedded", fingerprint=FINGERPRINT, finished="2026-01-01", **ranks):
    """A retraining row as ResultsDB.rows gives it (only what configurations read)."""
    made = config(method, epochs, control=False)
    made["recipe"]["lr"] = lr
    made["dataset"] = fingerprint
    made["ranks"].update(ranks)
    return {"dataset": dataset, "model": "fastnet", "method": method, "config": made, "finished": finished}


def labels(rows) -> list:
    from roarfast.rundir.catalog import split

    return [(c.label, len(c.rows)) for c in split(rows)]


def test_labels_name_what_differs_and_only_that():
    # the methods' own ranks differ (parameters, seed): one configuration, unlabelled
    assert labels([row("random"), row("grad"), row("ixg", seed=3)]) == [("", 3)]
    assert labels([row(epochs=2), row(epochs=4, finished="2026-02-01")]) == [("epochs 2", 1), ("epochs 4", 1)]
    assert labels([row(epochs=2, lr=0.1), row(epochs=4, lr=0.05, finished="2026-02-01")]) == [
        ("epochs 2, lr 0.1", 1), ("epochs 4, lr 0.05", 1)]
    # another dataset: named first, its fingerprint (a digest, cut short) after it
    assert labels([row(), row(dataset="cifar10", fingerprint="e" * 64, finished="2026-02-01")]) == [
        ("dataset embedded, data dddddddd", 1), ("dataset cifar10, data eeeeeeee", 1)]
    # a shared rank setting splits them; rows without a config form their own
    legacy = {"dataset": "embedded", "model": "fastnet", "method": "random", "config": None, "finished": "2025-01-01"}
    assert labels([row(), row(granularity="value", finished="2026-02-01"), legacy]) == [
        (UNRECORDED, 1), ("granularity pixel", 1), ("granularity value", 1)]
    assert labels([row(), legacy]) == [(UNRECORDED, 1), ("configuration recorded", 1)]
