"""The report says what was measured (issue 26, item 2): its first table gives the data, the base model's and
the cells' training, the fills and chance, and what was tested in words (significant after Holm or not,
leaky control or not); it warns when random is near chance, when the base model is weak, and when the gap to
the base model is mostly undertraining; and with one fraction its figure stays readable: random drawn as a
marker with its interval, intervals as error bars, the methods' points side by side, and a legend listing
only what is drawn. The SmoothGrad families are read from the estimators' records."""

import json
import sys

import pytest
from matplotlib.collections import LineCollection, PolyCollection

from roarfast.common.atomic import write_record
from roarfast.data import load_dataset
from roarfast.report import write_report
from roarfast.report.figures import PAGE
from roarfast.report.sections import ensembles
from roarfast.report.sections.accuracy import figure_accuracy
from roarfast.results import RETRAIN, MeasurementKey, ResultsDB
from roarfast.rundir.directory import RunDir

BASE_RECIPE = {"epochs": 15, "batch_size": 128, "lr": 0.05, "amp": "bf16"}
CELL_RECIPE = {"epochs": 2, "batch_size": 64, "lr": 0.05, "amp": None}


def issue_run(root, random, methods, base_acc, fractions=(0.5,), dataset=None) -> RunDir:
    """The issue's run: a base model trained 15 epochs, cells 2 epochs (batch 64), one fraction, 3 seeds;
    `random` and each of `methods` (name -> accuracies) at every fraction; a dataset recorded when given."""
    run = RunDir(root)
    run.legacy_base_checkpoint.mkdir(parents=True)  # hand-made records of run-directory format 1, read as they are
    (run.legacy_base_checkpoint / "meta.json").write_text(json.dumps({"model": "fastnet", "dataset": "embedded", "num_classes": 10,
                                              "test_acc": base_acc, "val_acc": base_acc, "seconds": 66.0,
                                              "image_size": 32, "in_channels": 3, "recipe": BASE_RECIPE}))
    if dataset is not None:
        write_record(run.legacy_dataset_path, {**run.remember_dataset(dataset), "format": 2})
    with ResultsDB(run.results_path) as db:
        for method, accs in {"random": random, **methods}.items():
            for fraction in fractions:
                for seed, acc in enumerate(accs):
                    ranks = {"granularity": "pixel", "reduction": "sum_sq", "parameters": {}, "code": {"roarfast": "x"}}
                    key = MeasurementKey.of(kind=RETRAIN, dataset="embedded", model="fastnet", method=method,
                                            mode="roar", fill="dataset-mean", fraction=fraction, seed=seed,
                                            config={"recipe": CELL_RECIPE, "ranks": ranks,
                                                    "dataset": "f" * 64 if dataset is None else dataset.fingerprint,
                                                    "fill": "dataset-mean"})
                    db.record(key, {"test_acc": acc, "val_acc": acc, "epochs": 2, "seconds": 1.0, "versions": {},
                                    "test_images": 500, "test_chance": 0.1})
    return run


@pytest.fixture(scope="module")
def weak(tmp_path_factory):
    """random at 12.8% against chance 10%, a base model at 34%, two methods at the same accuracy."""
    run = issue_run(tmp_path_factory.mktemp("run"), [0.125, 0.128, 0.131],
                    {"a": [0.11, 0.12, 0.13], "b": [0.11, 0.12, 0.13]}, base_acc=0.34)
    return run, write_report(run.root)


def test_the_first_table_says_what_was_trained_on_what(tmp_path):
    ds = load_dataset("embedded", None, num_train=40, num_test=20)
    run = issue_run(tmp_path / "run", [0.6, 0.62, 0.64], {"a": [0.2, 0.22, 0.24]}, base_acc=0.95, dataset=ds)
    report = write_report(run.root)
    index = (report.out_dir / "index.md").read_text()
    assert not any("not the data these cells were trained on" in note for note in report.summary["notes"])
    assert index.split("## ")[1].startswith("CONCLUSIVE: learning shown")  # whether it can answer, first
    first = index.split("## ")[2]
    assert first.startswith("What was measured")
    val = len(ds.val_index)
    images = f"images {40 - val} train / {val} validation / 20 test"
    # what made the data: its options and the seed its validation split and subset were drawn with
    assert (f"| data | embedded: 32x32 px, 3 channels; 10 classes; {images}; options copies=1, num_test=20, "
            f"num_train=40, seed=0; validation split and subset drawn with seed 0 |") in first
    assert "| estimators (their parameters) | a (no parameters); random (no parameters) |" in first
    assert ("| base model | fastnet, 15 epochs, batch 128, learning rate 0.05, bf16 autocast: test 95.0%, "
            "validation 95.0% |") in first
    assert "| retrained cells | fastnet, 2 epochs, batch 64, learning rate 0.05, fp32, each from scratch |" in first
    # random far above chance, a strong base model, cells past half-way from chance to it
    assert "| fills | dataset-mean |" in first and "## Warnings" not in index


def test_random_near_chance_a_weak_base_and_undertraining_are_flagged_first(weak):
    run, report = weak
    warnings = report.summary["warnings"]
    assert len(warnings) == 3
    assert warnings[0].startswith("random is near chance (less than 5 points above chance 10.0%) at ROAR 50% (12.8%): "
                                  "an estimator has little room below random there")
    assert warnings[1].startswith("the base model is weak: test 34.0% against chance 10.0%")
    assert warnings[2].startswith("mostly undertraining: the cells train 2 epochs, the base model 15; even random's "
                                  "least-modified cells (ROAR 50%: 12.8%) stay far below the base model (34.0%)")
    lines = report.verdict_lines()
    # random's best cells (12.8% [9.9%, 16.0%]) straddle chance + 5 points: the study cannot tell, said first
    assert report.summary["status"] == "underpowered" and lines[0].startswith("UNDERPOWERED: ")
    shown = lines.index(f"warning: {warnings[0]}")
    assert lines[shown:shown + 3] == [f"warning: {w}" for w in warnings]  # printed before any verdict
    assert not any(line.startswith(("ROAR", "KAR", "[not a finding]")) for line in lines[:shown])
    (a,) = [line for line in lines if line.startswith("[not a finding] ROAR 50% a:")]
    assert a.startswith("[not a finding] ROAR 50% a: no different, equivalent within +-5 points after Holm")
    assert a.endswith("random near chance (12.8% vs chance 10.0%: the warning says what this means)")
    assert report.summary["learning"]["cells"]["state"] == "cannot tell"
    index = (run.report_dir / "index.md").read_text()
    assert index.index("## What was measured") < index.index("## Warnings: read before the verdicts") < index.index(
        "## NOT A FINDING (the study is UNDERPOWERED): Ranking")


def test_healthy_numbers_raise_no_warning(tmp_path):
    # random 42 points above chance, a strong base model, cells past half-way from chance to it (at 50%)
    run = issue_run(tmp_path / "run", [0.50, 0.52, 0.54], {"a": [0.2, 0.22, 0.24]}, base_acc=0.9)
    report = write_report(run.root)
    assert report.summary["warnings"] == [] and not any("warning" in line for line in report.verdict_lines())


def legend_labels(fig) -> list:
    """The labels of the figure's one legend, inside an axes (the report's style) or beside them."""
    legends = [*fig.legends, *(ax.get_legend() for ax in fig.axes if ax.get_legend() is not None)]
    assert len(legends) == 1, legends
    return [t.get_text() for t in legends[0].get_texts()]


def test_one_fraction_draws_random_intervals_and_every_method_apart(weak):
    _, report = weak
    fig = figure_accuracy(report.summary, "dataset-mean", PAGE)
    (ax,) = fig.axes
    lines = {line.get_label(): line for line in ax.get_lines()}
    random = lines["random"]
    assert random.get_marker() == "D" and random.get_markersize() >= 5 and len(random.get_xdata()) == 1
    xs = {name: lines[name].get_xdata()[0] for name in ("random", "a", "b")}
    assert len(set(xs.values())) == 3 and all(abs(x - 50) <= 5 for x in xs.values())  # side by side around 50%
    low, high = ax.get_xlim()
    assert low < min(xs.values()) and max(xs.values()) < high and high - low >= 10
    # every point's 95% interval as an error bar at its own x, random's included
    bars = {round(float(seg[0][0]), 6): (seg[0][1], seg[1][1]) for c in ax.collections if isinstance(c, LineCollection)
            for seg in c.get_segments()}
    groups = {g["method"]: g for g in report.summary["groups"]}
    for name, x in xs.items():
        assert bars[round(float(x), 6)] == pytest.approx((100 * groups[name]["low"], 100 * groups[name]["high"]))
    assert not [c for c in ax.collections if isinstance(c, PolyCollection)]  # no zero-width band
    # the legend lists what is drawn, and nothing else
    drawn = {label for label, line in lines.items() if len(line.get_xdata()) and not label.startswith("_")}
    assert set(legend_labels(fig)) == drawn == {"random", "a", "b", "chance", "base model (unmodified, 15 epochs)"}


def test_several_fractions_keep_the_paper_look(tmp_path):
    run = issue_run(tmp_path / "run", [0.6, 0.62, 0.64], {"a": [0.2, 0.22, 0.24]}, base_acc=0.9,
                    fractions=(0.1, 0.5, 0.9))
    fig = figure_accuracy(write_report(run.root).summary, "dataset-mean", PAGE)
    (ax,) = fig.axes
    (band,) = [c for c in ax.collections if isinstance(c, PolyCollection)]  # random's, between the fractions
    assert band.get_paths()[0].vertices[:, 0].min() == pytest.approx(ax.get_lines()[0].get_xdata()[0])
    assert list(ax.get_xticks()) == [10, 50, 90] and "random" in legend_labels(fig)


def test_smoothgrad_families_come_from_the_records_and_import_nothing():
    from roarfast.methods.registry import get

    assert get("sg-sq-grad").base == "grad" and get("var-ig").base == "ig" and get("grad").base is None
    methods = {"grad", "sg-grad", "var-gb", "random", "sg-grad-copy", "my_pkg_never_imported:sg_grad"}
    families = {m: ensembles.family(m, methods) for m in methods}
    assert families == {"grad": "grad", "sg-grad": "grad", "var-gb": "gb", "random": None, "sg-grad-copy": None,
                        "my_pkg_never_imported:sg_grad": None}
    assert "my_pkg_never_imported" not in sys.modules
