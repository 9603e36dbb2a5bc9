"""What a report's reader can trust, on results.sqlite files written by hand: a mask-only control is tested
from what its rows hold when the dataset (an image tree) cannot be opened, an untested one is counted as
untested; each verdict reads its leak's direction (ROAR/KAR x leaky better / leaky not better, and clean) in
the lines, the tables, the figure legend and the counts; intervals are shown within [0%, 100%]; a ranking
over one fraction is that fraction's accuracy."""

import json

import pytest
from scipy import stats as sps

from roarfast.report import write_report
from roarfast.report.figures import PAGE
from roarfast.report.sections.accuracy import figure_accuracy
from roarfast.results import RETRAIN, MeasurementKey, ResultsDB
from roarfast.rundir.directory import RunDir

HASH = "a" * 64


def hand_made_run(root, rows, extra: dict) -> RunDir:
    """A run directory of an image-tree dataset whose tree is gone (the report cannot open it), a base model
    of 10 classes, and `rows` [(method, mode, fraction, [acc per seed])] recorded with the metrics `extra`."""
    run = RunDir(root)
    run.legacy_base_checkpoint.mkdir(parents=True)  # hand-made records of run-directory format 1, read as they are
    (run.legacy_base_checkpoint / "meta.json").write_text(json.dumps({"model": "fastnet", "dataset": "imagefolder", "num_classes": 10,
                                              "test_acc": 0.7, "val_acc": 0.7, "seconds": 60.0}))
    run.legacy_dataset_path.write_text(json.dumps({"name": "imagefolder", "data_dir": str(root / "gone"),
                                            "options": {"resize": 36, "crop": 32}, "fingerprint": "f" * 64}))
    with ResultsDB(run.results_path) as db:
        for method, mode, fraction, accs in rows:
            for seed, acc in enumerate(accs):
                fill = None if mode.endswith("-mask") else "dataset-mean"
                db.record(MeasurementKey(RETRAIN, "imagefolder", "fastnet", method, mode, fill, fraction, seed, HASH),
                          {"test_acc": acc, "val_acc": acc, "epochs": 3, "seconds": 1.0, "versions": {}, **extra})
    return run


# the CIFAR-10 run: 3 seeds, the controls of one seed, on 2000 test images
CONTROLS = {"random": 0.100, "grad": 0.286, "sg-sq": 0.386, "var": 0.382}
TREE_ROWS = ([(m, "roar", 0.5, [0.30, 0.31, 0.32]) for m in CONTROLS]
             + [(m, "roar-mask", 0.5, [acc]) for m, acc in CONTROLS.items()])


def test_one_seed_controls_of_an_image_tree_are_tested_from_the_rows(tmp_path):
    written = write_report(hand_made_run(tmp_path / "run", TREE_ROWS, {"test_images": 2000}).root)
    summary = written.summary
    assert any("dataset not opened" in note for note in summary["notes"])  # the tree is gone
    assert summary["chance"] == pytest.approx(0.1)  # 1 / 10 classes: the cells recorded no chance
    leak = {e["method"]: e for e in summary["leakage"]}
    for method, acc in CONTROLS.items():  # by hand: acc x 2000 correct of 2000 against 10%
        p = sps.binomtest(round(acc * 2000), 2000, 0.1, alternative="greater").pvalue
        assert leak[method]["p"] == pytest.approx(p)
        assert leak[method]["leaky"] is (method != "random")
    assert summary["counts"]["controls"] == {"all": 4, "tested": 4, "leaky": 3, "untested": 0, "untestable": 0}
    (line,) = [line for line in written.verdict_lines() if line.startswith("ROAR 50% sg-sq:")]
    assert "LEAKY: its mask-only control reaches 38.6%" in line and "not tested" not in line
    index = (written.out_dir / "index.md").read_text()
    assert "| mask-only controls | 4 tested: 3 leaky, 1 not leaky |" in index


def test_controls_that_cannot_be_tested_are_counted_untested_never_not_leaky(tmp_path):
    """Rows without the test split's size (an older roarfast) and no dataset: one seed cannot be tested."""
    written = write_report(hand_made_run(tmp_path / "run", TREE_ROWS, {}).root)
    summary = written.summary
    assert summary["counts"]["controls"] == {"all": 4, "tested": 0, "leaky": 0, "untested": 4, "untestable": 0}
    verdicts = summary["counts"]["verdicts"]
    assert verdicts["control_not_leaky"] == verdicts["leaky_stands"] == verdicts["leaky_could_explain"] == 0
    assert verdicts["no_control"] == verdicts["drawn"] == 3
    index = (written.out_dir / "index.md").read_text()
    assert "| mask-only controls | 0 tested: 0 leaky, 0 not leaky; 4 untested" in index
    assert "leaky cells | 0" not in index
    (line,) = [line for line in written.verdict_lines() if line.startswith("ROAR 50% grad:")]
    assert "control 28.6% (not tested: one seed and the test split's size is unknown)" in line


# Each estimator against random at ROAR and KAR 50%, 3 seeds, with its control over 3 seeds:
# leaky (far above chance 10%) or clean (at chance). Expected readings: a leak lifts accuracy, so it works against
# a ROAR "better than random" and a KAR "no different" (they stand) and could explain the others (inconclusive).
RANDOM = {"roar": [0.60, 0.61, 0.62], "kar": [0.50, 0.51, 0.52]}
LEAKY, CLEAN = [0.40, 0.42, 0.44], [0.09, 0.10, 0.11]
STANDS, COULD_EXPLAIN = "leaky control, verdict stands", "leaky control could explain the verdict"
CASES = {  # method: (mode, accuracies, control, expected verdict, expected reading)
    "roar-better": ("roar", [0.30, 0.31, 0.32], LEAKY, "better than random", STANDS),
    "roar-worse": ("roar", [0.80, 0.81, 0.82], LEAKY, "worse", COULD_EXPLAIN),
    "roar-clean": ("roar", [0.20, 0.21, 0.22], CLEAN, "better than random", "control not leaky"),
    "kar-better": ("kar", [0.80, 0.81, 0.82], LEAKY, "better than random", COULD_EXPLAIN),
    "kar-same": ("kar", [0.51, 0.50, 0.52], LEAKY, "no different", STANDS),
    "kar-high": ("kar", [0.97, 0.99, 1.00], None, "better than random", "no control"),
}


@pytest.fixture(scope="module")
def directions(tmp_path_factory):
    rows = [("random", mode, 0.5, accs) for mode, accs in RANDOM.items()]
    for method, (mode, accs, control, _, _) in CASES.items():
        rows.append((method, mode, 0.5, accs))
        if control is not None:
            rows.append((method, mode + "-mask", 0.5, control))
    run = hand_made_run(tmp_path_factory.mktemp("run"), rows, {"test_images": 500, "test_chance": 0.1})
    return write_report(run.root)


def test_each_verdict_reads_its_leaks_direction(directions):
    entries = {e["method"]: e for e in directions.summary["verdicts"]}
    assert {m: (e["verdict"], e["leak"]) for m, e in entries.items()} == {
        m: (verdict, reading) for m, (_, _, _, verdict, reading) in CASES.items()}
    lines = {line.split(":")[0].split()[-1]: line for line in directions.verdict_lines() if line.startswith(("ROAR", "KAR"))}
    for method in ("roar-better", "kar-same"):
        assert "[stands despite a leaky control]" in lines[method], lines[method]
        assert "works against" in lines[method]
    for method in ("roar-worse", "kar-better"):
        assert "[a leaky control could explain it]" in lines[method], lines[method]
        assert "which could explain" in lines[method]
    # what was tested, in words: every drawn verdict says what decided it after Holm
    assert ", significant after Holm" in lines["roar-better"]
    assert "no different, equivalent within +-5 points after Holm" in lines["kar-same"]
    assert "TOST p=" in lines["kar-same"] and " points [" in lines["kar-same"] and ", g " in lines["kar-same"]
    assert directions.verdict_lines()[0].startswith("CONCLUSIVE: learning shown")
    assert "LEAKY" not in lines["roar-clean"] and "not leaky" in lines["roar-clean"]
    assert "[" not in lines["kar-high"].split("(")[0] and "no control" in lines["kar-high"]


def test_tables_and_counts_say_what_was_tested(directions):
    assert directions.summary["counts"]["verdicts"] == {
        "all": 6, "drawn": 6, "significant": 5, "equivalent": 1, "undecided": 0, "control_not_leaky": 1, "leaky_stands": 2,
        "leaky_could_explain": 2, "no_control": 1}
    assert directions.summary["counts"]["controls"] == {"all": 5, "tested": 5, "leaky": 4, "untested": 0,
                                                        "untestable": 0}
    index = (directions.out_dir / "index.md").read_text()
    assert ("| verdicts against random | 6 tested: 5 significant after Holm, 1 equivalent (no different), 0 undecided; "
            "their controls: 1 not leaky, 2 leaky but the verdict stands, 2 leaky and could explain the verdict, 1 none "
            "tested |") in index
    assert "inconclusive" not in index.split("## Methods")[0].lower()
    cells = [[c.strip() for c in row.split("|")[1:3]] for row in index.splitlines() if row.startswith("| ")]
    table = {method: cell for method, cell in cells if cell.startswith(("better than random", "no different", "worse"))}
    assert table["roar-better"].endswith("LEAKY control, stands")
    assert table["roar-worse"].endswith("LEAKY control could explain it")
    assert table["kar-better"].endswith("LEAKY control could explain it")
    assert table["kar-same"].endswith("LEAKY control, stands")
    assert "LEAKY" not in table["roar-clean"] and table["kar-high"].endswith("no control")


def test_the_figure_marks_leaky_points_by_what_the_leak_does_to_the_verdict(directions):
    fig = figure_accuracy(directions.summary, "dataset-mean", PAGE)
    roar, kar = fig.axes[:2]

    def marks(ax) -> dict:
        return {c.get_label(): [tuple(xy) for xy in c.get_offsets()] for c in ax.collections if c.get_label()
                .startswith("leaky")}

    def point(ax, method) -> tuple:  # where the method's point is drawn (set off beside the others at 50%)
        (line,) = [line for line in ax.get_lines() if line.get_label() == method]
        return pytest.approx(line.get_xdata()[0]), pytest.approx(line.get_ydata()[0])
    assert marks(roar) == {STANDS: [point(roar, "roar-better")], COULD_EXPLAIN: [point(roar, "roar-worse")]}
    assert marks(kar) == {STANDS: [point(kar, "kar-same")], COULD_EXPLAIN: [point(kar, "kar-better")]}
    assert point(roar, "roar-better")[1] == 31 and point(roar, "roar-worse")[1] == 81
    (shown,) = [*fig.legends, *(ax.get_legend() for ax in fig.axes if ax.get_legend() is not None)]  # one legend
    legend = [t.get_text() for t in shown.get_texts()]
    assert STANDS in legend and COULD_EXPLAIN in legend


def test_intervals_are_shown_within_accuracys_range_and_one_fraction_ranks_by_its_accuracy(directions):
    (high,) = [g for g in directions.summary["groups"] if g["method"] == "kar-high"]
    # by hand: mean 0.98667, sd 0.015275, t(0.975, 2) = 4.3027: the raw interval passes 100%
    half = sps.t.ppf(0.975, 2) * 0.0152753 / 3 ** 0.5
    assert high["high"] == pytest.approx(0.98667 + half, abs=1e-4) and high["high"] > 1  # summary.json: raw
    index = (directions.out_dir / "index.md").read_text()
    (row,) = [r for r in index.splitlines() if r.startswith("| kar-high | 98.7% [")]
    assert f"98.7% [{0.98667 - half:.1%}, 100.0%]" in row
    assert "shown clipped to [0%, 100%]" in index
    lines = directions.verdict_lines()
    assert any(line.startswith("ranking ROAR (accuracy at 50%, lower is better)") for line in lines), lines
    assert "AUC over 50%-50%" not in index and "Ranking, KAR (fill dataset-mean): accuracy at 50%" in index
    fig = figure_accuracy(directions.summary, "dataset-mean", PAGE)
    shaded = [c for c in fig.axes[1].collections if not c.get_label().startswith("leaky")]
    assert max(path.vertices[:, 1].max() for c in shaded for path in c.get_paths()) <= 100
