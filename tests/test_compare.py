"""`roarfast compare` / roarfast.compare: configurations side by side (two of one run directory, or those of
two run directories), with what differs and each change's Welch interval over seeds; its one-line errors and
its files."""

import csv
import json

import numpy as np
import pytest
from click.testing import CliRunner
from scipy import stats as sps

import roarfast
from roarfast.cli import main
from roarfast.results import RETRAIN, MeasurementKey, ResultsDB
from roarfast.rundir.directory import RunDir

RECIPE = {"epochs": 2, "batch_size": 128, "lr": 0.1, "momentum": 0.9}
#: per epochs: random and ixg at ROAR 10% and 50% (three seeds), ixg's mask-only control at 50%
RANDOM = {2: [0.50, 0.52, 0.51], 8: [0.70, 0.75, 0.72]}
IXG = {2: [0.20, 0.22, 0.21], 8: [0.25, 0.29, 0.24]}
CONTROL = {2: [0.10, 0.11, 0.09], 8: [0.10, 0.12, 0.09]}


def config(epochs: int, control: bool) -> dict:
    ranks = {"granularity": "pixel", "reduction": "sum_sq", "code": {"roarfast": "0.1.0"}, "parameters": {}}
    return {"recipe": {**RECIPE, "epochs": epochs}, "dataset": "d" * 64, "ranks": ranks,
            **({} if control else {"fill": "dataset-mean"})}


def record(db, method, mode, fraction, accs, epochs, threads=None):
    control = mode.endswith("-mask")
    for seed, acc in enumerate(accs):
        key = MeasurementKey.of(kind=RETRAIN, dataset="embedded", model="fastnet", method=method, mode=mode,
                                fill=None if control else "dataset-mean", fraction=fraction, seed=seed,
                                config=config(epochs, control))
        db.record(key, {"test_acc": acc, "val_acc": acc, "epochs": epochs, "seconds": 1.0, "versions": {},
                        "test_images": 1000, "test_chance": 0.1, "threads": threads})


def make_run(root, epochs_list, threads=None):
    run = RunDir(root)
    with ResultsDB(run.results_path) as db:
        for epochs in epochs_list:
            for fraction in (0.1, 0.5):
                record(db, "random", "roar", fraction, RANDOM[epochs], epochs, threads)
                record(db, "ixg", "roar", fraction, IXG[epochs], epochs, threads)
            record(db, "ixg", "roar-mask", 0.5, CONTROL[epochs], epochs, threads)
    return root


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    base = tmp_path_factory.mktemp("compare")
    return make_run(base / "both", (2, 8)), make_run(base / "short", (2,)), make_run(base / "long", (8,))


def row(comparison, measure, method, mode="roar", fraction=0.5, side=1) -> dict:
    (found,) = [r for r in comparison.rows if (r["measure"], r["method"], r["mode"], r["side"]) ==
                (measure, method, mode, side) and (measure == "auc" or r["fraction"] == fraction)]
    return found


def welch(a, b) -> tuple:
    """mean(b) - mean(a) and scipy's Welch 95% interval of it."""
    result = sps.ttest_ind(b, a, equal_var=False)
    low, high = result.confidence_interval(0.95)
    return np.mean(b) - np.mean(a), low, high, result.pvalue


def test_two_configurations_of_one_run_directory_side_by_side(runs):
    comparison = roarfast.compare(runs[0], configs=["epochs 2", "epochs 8"])  # the order given: 2 is the baseline
    assert [s["label"] for s in comparison.sides] == ["epochs 2", "epochs 8"]
    assert comparison.differs == {"epochs": ["2", "8"]}  # nothing else differs between the two records
    for method, values in (("random", RANDOM), ("ixg", IXG)):
        r = row(comparison, "accuracy", method)
        change, low, high, p = welch(values[2], values[8])
        assert r["change"] == pytest.approx(change) and (r["change_low"], r["change_high"]) == pytest.approx((low, high))
        assert r["p"] == pytest.approx(p)
    assert row(comparison, "accuracy", "random")["change_low"] > 0  # random clearly higher after 8 epochs
    control = row(comparison, "accuracy", "ixg", mode="roar-mask")
    assert control["change_low"] < 0 < control["change_high"]  # the control did not move
    assert row(comparison, "accuracy", "ixg", side=0)["verdict"] == "better than random"
    assert row(comparison, "accuracy", "ixg", side=0)["change"] is None  # the baseline has no change
    # the AUC over 10% and 50% of a flat curve is its accuracy, so its change is the accuracy's
    auc = row(comparison, "auc", "random")
    assert auc["change"] == pytest.approx(np.mean(RANDOM[8]) - np.mean(RANDOM[2]))
    holm = sorted(r["p_holm"] for r in comparison.rows if r["p_holm"] is not None)
    raw = sorted(r["p"] for r in comparison.rows if r["p"] is not None)
    assert len(holm) == len(raw) and all(h >= p for h, p in zip(holm, raw))


def test_run_directories_side_by_side_name_the_directory_and_what_differs(runs):
    comparison = roarfast.compare([runs[1], runs[2]])
    assert [s["label"] for s in comparison.sides] == ["short", "long"]
    assert comparison.differs["run directory"] == [str(runs[1]), str(runs[2])]
    assert comparison.differs["epochs"] == ["2", "8"]
    change, low, high, _ = welch(RANDOM[2], RANDOM[8])
    assert row(comparison, "accuracy", "random", fraction=0.1)["change"] == pytest.approx(change)


def test_sides_whose_cells_trained_with_other_thread_counts_say_so(runs, tmp_path):
    """The same settings, cells of 1 and of 2 CPU threads (a Ray cluster's and a laptop's, say): what differs
    names the threads, and a note says what that means; sides of one count, or of none recorded, say nothing."""
    one, two = make_run(tmp_path / "one", (2,), threads=1), make_run(tmp_path / "two", (2,), threads=2)
    comparison = roarfast.compare([one, two])
    assert comparison.differs["CPU threads per cell"] == ["1", "2"]
    assert [n for n in comparison.notes if "thread" in n] == [
        "the sides' cells trained with other CPU thread counts, on which CPU accuracies depend: a change may be "
        "theirs alone (docs/concepts/training.md, \"Thread counts\")"]
    alike = roarfast.compare([one, make_run(tmp_path / "also-one", (8,), threads=1)])
    assert "CPU threads per cell" not in alike.differs and not [n for n in alike.notes if "thread" in n]
    assert "CPU threads per cell" not in roarfast.compare([runs[1], runs[2]]).differs


def test_cli_prints_the_table_json_and_writes_md_and_csv(runs, tmp_path):
    out = tmp_path / "cmp"
    result = CliRunner().invoke(main, ["compare", str(runs[0]), "--config", "epochs 2", "--config", "epochs 8",
                                       "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "A = epochs 2" in result.output and "epochs: A 2, B 8" in result.output
    assert "B - A (points)" in result.output
    with open(out / "compare.csv") as f:
        rows = list(csv.DictReader(f))
    # per side: 2 fractions x 2 methods, one control, 2 AUCs
    assert len(rows) == 2 * (2 * 2 + 1 + 2) and {r["configuration"] for r in rows} == {"epochs 2", "epochs 8"}
    assert "| fraction | method |" in (out / "compare.md").read_text()
    result = CliRunner().invoke(main, ["compare", str(runs[1]), str(runs[2]), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["differs"]["epochs"] == ["2", "8"]


@pytest.mark.parametrize("args, says", [
    (["{both}", "--config", "epochs 3"], "--config epochs 3: no such configuration"),
    (["{short}"], "holds one configuration"),
    (["{short}", "{long}", "--config", "epochs 2"], "one per run directory"),
    (["{nothing}"], "no results.sqlite"),
])
def test_bad_input_is_one_line(runs, tmp_path, args, says):
    names = {"both": runs[0], "short": runs[1], "long": runs[2], "nothing": tmp_path}
    result = CliRunner().invoke(main, ["compare", *(a.format(**names) for a in args)])
    lines = result.output.strip().splitlines()
    assert result.exit_code == 1 and len(lines) == 1 and says in lines[0], result.output
