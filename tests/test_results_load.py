"""roarfast.results.load: every measurement of a run directory for a notebook, as a DataFrame or plain
dicts: retraining cells and controls, no-retrain evaluations and fill leakage, told apart by `kind`."""

import sys

import pytest

from roarfast.results import FILL_LEAKAGE, NO_RETRAIN, RETRAIN, MeasurementKey, ResultsDB, load
from roarfast.rundir.directory import RunDir


def key(kind=RETRAIN, mode="roar", fill="zero", seed=0, model="fastnet"):
    return MeasurementKey(kind, "embedded", model, "grad", mode, fill, 0.5, seed, "a" * 64)


def _fill_run(run_dir):
    with ResultsDB(RunDir(run_dir).results_path) as db:
        for seed, acc in enumerate((0.5, 0.7)):
            db.record(key(seed=seed), dict(test_acc=acc, val_acc=acc, epochs=3, seconds=1.0, versions={}))
        db.record(key(NO_RETRAIN, "morf", "dataset-mean", None),
                  dict(test_acc=0.2, val_acc=None, epochs=None, seconds=1.0, versions={}, mean_probability=0.3))
        db.record(key(FILL_LEAKAGE, "detect", "road", 0, "detector"),
                  dict(test_acc=0.6, val_acc=None, epochs=None, seconds=1.0, versions={}, base_rate=0.5))
        db.claim(key(mode="kar"))  # running: not a result yet


def test_load_gives_a_dataframe_of_every_done_measurement_with_extras_as_columns(tmp_path):
    pytest.importorskip("pandas")
    _fill_run(tmp_path)
    everything = load(tmp_path)
    assert sorted(everything["kind"]) == [FILL_LEAKAGE, NO_RETRAIN, RETRAIN, RETRAIN]
    cells = load(tmp_path, kind=RETRAIN)
    assert len(cells) == 2 and set(cells["seed"]) == {0, 1} and list(cells["fill"]) == ["zero", "zero"]
    assert cells.groupby("method")["test_acc"].mean()["grad"] == pytest.approx(0.6)
    (leak,) = everything[everything["kind"] == FILL_LEAKAGE].to_dict("records")
    assert leak["base_rate"] == 0.5 and leak["model"] == "detector"
    assert len(load(tmp_path, status=None)) == 5


def test_without_pandas_the_same_measurements_come_as_dicts(tmp_path, monkeypatch):
    _fill_run(tmp_path)
    monkeypatch.setitem(sys.modules, "pandas", None)
    rows = load(tmp_path)
    assert isinstance(rows, list) and [r["test_acc"] for r in rows] == [0.6, 0.2, 0.5, 0.7]
    (morf,) = [r for r in rows if r["kind"] == NO_RETRAIN]
    assert morf["seed"] is None and morf["epochs"] is None and morf["mean_probability"] == 0.3
    assert all(r["status"] == "done" for r in rows)


def test_a_run_directory_without_results_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="nothing has been measured"):
        load(tmp_path)


def test_each_retraining_row_carries_its_studys_status_as_the_report_gives_it(tmp_path, monkeypatch):
    from roarfast.report import write_report
    from tests.test_report_status import AT_CHANCE, LEARNED, hand_made_run

    monkeypatch.setitem(sys.modules, "pandas", None)
    for name, rows, base_acc in (("stuck", AT_CHANCE, 0.45), ("healthy", LEARNED, 0.9)):
        run = hand_made_run(tmp_path / name, rows, base_acc=base_acc)
        loaded = load(run.root, kind=RETRAIN)
        expected = write_report(run.root).summary["status"]
        assert {r["study_status"] for r in loaded} == {expected}
    assert expected == "conclusive" and {r["study_status"] for r in load(tmp_path / "stuck")} == {"inconclusive"}
    # a margin of 60 points: random's best cells (62% [58%, 66%]) no longer above chance 10% + 60
    assert {r["study_status"] for r in load(tmp_path / "healthy", kind=RETRAIN, margin=60)} == {"inconclusive"}
    assert {r["study_status"] for r in load(tmp_path / "healthy", kind=NO_RETRAIN)} <= {None}
