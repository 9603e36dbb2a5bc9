"""`roarfast compare` / roarfast.compare: configurations side by side (two of one run directory, or those of
two run directories), with what differs, each side's status and base model, and each change from the baseline
tested as what it is (shared cells not tested, the same seeds paired, other seeds by Welch); its one-line errors
and its files."""

import csv
import hashlib
import json

import numpy as np
import pytest
from click.testing import CliRunner
from scipy import stats as sps
from statsmodels.stats.multitest import multipletests

import roarfast
from roarfast.cli import main
from roarfast.common.atomic import write_record
from roarfast.errors import UserError
from roarfast.results import RETRAIN, MeasurementKey, ResultsDB
from roarfast.rundir.configurations import grid_of, request, settings_of
from roarfast.rundir.directory import RunDir
from roarfast.records.model import ModelRecord

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


def paired(a, b) -> tuple:
    """mean(b - a) over the same seeds and scipy's paired 95% interval of it, and its p."""
    result = sps.ttest_rel(b, a)
    low, high = result.confidence_interval(0.95)
    return np.mean(b) - np.mean(a), low, high, result.pvalue


def test_two_configurations_of_one_run_directory_side_by_side(runs):
    comparison = roarfast.compare(runs[0], configs=["epochs 2", "epochs 8"])  # the order given: 2 is the baseline
    assert [s["label"] for s in comparison.sides] == ["epochs 2", "epochs 8"]
    assert comparison.differs == {"epochs": ["2", "8"]}  # nothing else differs between the two records
    for method, values in (("random", RANDOM), ("ixg", IXG)):
        r = row(comparison, "accuracy", method)
        change, low, high, p = paired(values[2], values[8])  # the same seeds on both sides
        assert r["test"] == "paired" and r["change"] == pytest.approx(change)
        assert (r["change_low"], r["change_high"]) == pytest.approx((low, high))
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
    change, low, high, _ = paired(RANDOM[2], RANDOM[8])
    assert row(comparison, "accuracy", "random", fraction=0.1)["change"] == pytest.approx(change)
    assert row(comparison, "accuracy", "random", fraction=0.1)["change_low"] == pytest.approx(low)


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


# Configurations that share cells: sg15 and sg5 differ only in sg-sq-grad's ranks, so both claim the same random
# rows (one measurement); "adopted" is another base model (adopted weights at chance) with cells of its own.
BASE = "0123456789abcdef"
WEIGHTS = {"weights_sha256": "e" * 64, "file": "/data/weights.pt", "file_sha256": "f" * 64}
SHARED_RANDOM = {0.1: [0.80, 0.82, 0.81], 0.5: [0.70, 0.74, 0.72]}
SG15 = {0.1: [0.60, 0.63, 0.61], 0.5: [0.30, 0.35, 0.31]}
SG5 = {0.1: [0.66, 0.70, 0.69], 0.5: [0.40, 0.45, 0.41, 0.43]}  # a fourth seed at 50%: other seeds than sg15's
#: chance 10%, and hardly any spread, at nine fractions (a table of them is wider than a page: set in parts)
AT_CHANCE = {f / 10: [0.100, 0.101, 0.099] for f in range(1, 10)}


def rank_id(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def cell_config(base: str, ranks: str, control: bool) -> dict:
    return {"recipe": RECIPE, "dataset": "d" * 64, "base": base, "rank_id": rank_id(ranks),
            "ranks": {"granularity": "pixel", "reduction": "sum_sq", "code": {"roarfast": "0.1.0"},
                      "parameters": {"ranks": ranks}}, **({} if control else {"fill": "dataset-mean"})}


def record_cells(db, base, method, ranks, curve, mode="roar"):
    control = mode.endswith("-mask")
    for fraction, accs in curve.items():
        for seed, acc in enumerate(accs):
            key = MeasurementKey.of(kind=RETRAIN, dataset="embedded", model="fastnet", method=method, mode=mode,
                                    fill=None if control else "dataset-mean", fraction=fraction, seed=seed,
                                    config=cell_config(base, ranks, control))
            db.record(key, {"test_acc": acc, "val_acc": acc, "epochs": 2, "seconds": 1.0, "versions": {},
                            "test_images": 1000, "test_chance": 0.1})


def ask(run, base, ranks: dict, name: str) -> dict:
    """The configuration record a request of these methods' ranks ({method: the text its rank id is made of})
    on `base` makes, named `name`."""
    row = {"dataset": "embedded", "model": "fastnet", "config": cell_config(base, "any", False)}
    provenance = {m: cell_config(base, r, False)["ranks"] for m, r in ranks.items()}
    grid = grid_of(list(ranks), ["roar"], [0.5], [0], [], "dataset-mean")  # a grid as a request records one
    return request(run, settings_of(row), {m: rank_id(r) for m, r in ranks.items()}, provenance, grid, "test", {},
                   name)


def make_shared_run(root) -> RunDir:
    run = RunDir(root)
    adopted = ModelRecord("d" * 64, "fastnet", adopted=True, weights_sha256=WEIGHTS["weights_sha256"])
    meta = {**adopted.to_record(), "adopted": WEIGHTS, "test_acc": 0.1, "val_acc": 0.1, "epochs": 0}
    run.model_path(adopted.id).mkdir(parents=True)
    write_record(run.model_path(adopted.id) / "meta.json", meta)
    with ResultsDB(run.results_path) as db:
        record_cells(db, BASE, "random", "random", SHARED_RANDOM)
        record_cells(db, BASE, "sg-sq-grad", "sg15", SG15)
        record_cells(db, BASE, "sg-sq-grad", "sg5", SG5)
        record_cells(db, BASE, "sg-sq-grad", "sg15", {0.5: [0.12]}, mode="roar-mask")
        record_cells(db, adopted.id, "random", "random", AT_CHANCE)
        record_cells(db, adopted.id, "grad", "grad", AT_CHANCE)
    ask(run, BASE, {"random": "random", "sg-sq-grad": "sg15"}, "sg15")
    ask(run, BASE, {"random": "random", "sg-sq-grad": "sg5"}, "sg5")
    ask(run, adopted.id, {"random": "random", "grad": "grad"}, "adopted")
    return run


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    return make_shared_run(tmp_path_factory.mktemp("shared") / "run")


def test_cells_both_sides_share_are_one_measurement_not_tested_nor_corrected(shared):
    comparison = roarfast.compare(shared.root, configs=["sg15", "sg5"])
    for fraction in (0.1, 0.5):
        random = row(comparison, "accuracy", "random", fraction=fraction)
        assert (random["test"], random["change"], random["p"], random["p_holm"]) == ("shared", 0.0, None, None)
    assert row(comparison, "auc", "random")["test"] == "shared"
    # Holm counts the changes tested, the shared ones not: sg-sq-grad's two accuracies and its AUC
    tested = [r for r in comparison.rows if r["p"] is not None]
    assert sorted(r["method"] for r in tested) == ["sg-sq-grad"] * 3
    expected = multipletests([r["p"] for r in tested], method="holm")[1]
    assert [r["p_holm"] for r in tested] == pytest.approx(list(expected))
    assert "shared (the same cells)" in "\n".join(str(c) for t in comparison.tables() for r in t.rows for c in r)
    assert "changes from A: 3 shared (the same cells on both sides: not tested" in comparison.legend()[-1]


def test_the_same_seeds_are_paired_other_seeds_compared_by_welch(shared):
    comparison = roarfast.compare(shared.root, configs=["sg15", "sg5"])
    paired = row(comparison, "accuracy", "sg-sq-grad", fraction=0.1)
    expected = sps.ttest_rel(SG5[0.1], SG15[0.1])
    assert paired["test"] == "paired" and paired["p"] == pytest.approx(expected.pvalue)
    low, high = expected.confidence_interval(0.95)
    assert (paired["change_low"], paired["change_high"]) == pytest.approx((low, high))
    assert paired["change"] == pytest.approx(np.mean(SG5[0.1]) - np.mean(SG15[0.1]))
    other = row(comparison, "accuracy", "sg-sq-grad", fraction=0.5)  # 4 seeds against 3
    change, low, high, p = welch(SG15[0.5], SG5[0.5])
    assert other["test"] == "Welch" and other["p"] == pytest.approx(p)
    assert (other["change"], other["change_low"], other["change_high"]) == pytest.approx((change, low, high))


def test_each_side_keeps_its_status_and_adopted_weights_are_named(shared):
    comparison = roarfast.compare(shared.root, configs=["sg15", "adopted"])
    assert [s["status"] for s in comparison.sides] == ["conclusive", "inconclusive"]
    legend = comparison.legend()
    assert legend[0].startswith("A = sg15 (") and legend[0].endswith("CONCLUSIVE), the baseline")
    assert f"B's base model: fastnet, adopted weights /data/weights.pt (sha256 {'f' * 64}), not trained here: test " \
           f"10.0%" in legend
    assert any(line.startswith("B is INCONCLUSIVE: ") and line.endswith("its verdicts are not findings")
               for line in legend)
    verdicts = [r[-2] for t in comparison.tables() if t.title.startswith("Test accuracy, ROAR (fill") for r in t.rows]
    assert any(v.endswith("(not a finding)") for v in verdicts)  # B's grad against B's random
    assert comparison.sides[1]["adopted"]["file_sha256"] == "f" * 64


@pytest.mark.parametrize("configs, says", [
    (["sg15"], "--config sg15 names one configuration of {run}, which holds 3 with finished cells ("),
])
def test_one_config_of_a_directory_of_three_is_counted_right(shared, configs, says):
    with pytest.raises(UserError) as err:
        roarfast.compare(shared.root, configs=configs)
    assert says.format(run=shared.root) in str(err.value) and "[adopted]" in str(err.value)
