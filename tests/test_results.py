"""Results database: measurement keys, upserts, rerun skipping, filters, concurrent writers in several
processes."""

import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from roarfast.common.fingerprint import config_hash
from roarfast.results import FILL_LEAKAGE, NO_RETRAIN, RETRAIN, MeasurementKey, ResultsDB

REPO = Path(__file__).resolve().parents[1]
VERSIONS = {"roarfast": "test"}


def cell(**overrides):
    fields = dict(kind=RETRAIN, dataset="embedded", model="fastnet", method="sg-sq", mode="roar", fill="dataset-mean",
                  fraction=0.5, seed=0, config_hash="h" * 64)
    fields.update(overrides)
    return MeasurementKey(**fields)


def metrics(**overrides):
    values = dict(test_acc=0.25, val_acc=0.3, epochs=8, seconds=12.5, versions=VERSIONS)
    values.update(overrides)
    return values


def test_record_survives_reopen_in_wal_mode(tmp_path):
    path = tmp_path / "run" / "r.sqlite"
    with ResultsDB(path) as db:
        assert not db.is_done(cell()) and db.status(cell()) is None
        db.record(cell(), metrics(mask_only_acc=0.11))
    with ResultsDB(path) as db:
        assert db.is_done(cell())
        (row,) = db.rows()
    assert row["method"] == "sg-sq" and row["mode"] == "roar" and row["fraction"] == 0.5 and row["seed"] == 0
    assert (row["test_acc"], row["val_acc"], row["epochs"], row["seconds"]) == (0.25, 0.3, 8, 12.5)
    assert row["versions"] == VERSIONS and row["extra"] == {"mask_only_acc": 0.11}
    assert row["status"] == "done" and row["created"] <= row["finished"] and row["error"] is None
    with sqlite3.connect(path) as raw:
        assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_default_versions_name_the_running_software(tmp_path):
    import torch

    with ResultsDB(tmp_path / "r.sqlite") as db:
        db.record(cell(), metrics(versions=None))
        assert db.rows()[0]["versions"]["torch"] == torch.__version__


def test_status_lifecycle_and_a_done_cell_is_not_reopened(tmp_path):
    with ResultsDB(tmp_path / "r.sqlite") as db:
        db.mark_running(cell())
        assert db.status(cell()) == "running" and not db.is_done(cell())
        db.mark_failed(cell(), "RuntimeError: out of memory")
        assert db.status(cell()) == "failed" and db.rows()[0]["error"] == "RuntimeError: out of memory"
        db.mark_running(cell())
        db.record(cell(), metrics())
        assert db.is_done(cell()) and db.rows()[0]["error"] is None
        # A stray worker marking the finished cell again must not undo it.
        db.mark_running(cell())
        db.mark_failed(cell(), "late")
        (row,) = db.rows()
        assert row["status"] == "done" and row["test_acc"] == 0.25
        # An explicit record replaces the result (one row per cell).
        db.record(cell(), metrics(test_acc=0.5))
        (row,) = db.rows()
        assert row["test_acc"] == 0.5


def test_fractions_typed_or_computed_name_the_same_cell(tmp_path):
    assert 0.1 * 7 != 0.7
    assert cell(fraction=0.1 * 7) == cell(fraction=0.7)
    with ResultsDB(tmp_path / "r.sqlite") as db:
        db.record(cell(fraction=0.1 * 7), metrics())
        assert db.is_done(cell(fraction=0.7))
        assert len(db.rows(fraction=0.7)) == 1


def test_key_of_hashes_the_config_and_get_returns_the_row(tmp_path):
    fields = dict(kind=RETRAIN, dataset="embedded", model="fastnet", method="sg", mode="kar", fill="dataset-mean",
                  fraction=0.3, seed=2)
    config = {"recipe": {"epochs": 8, "lr": 0.4}, "fill": "dataset-mean"}
    key = MeasurementKey.of(**fields, config=config)
    assert key == MeasurementKey(**fields, config_hash=config_hash(config))
    assert key == MeasurementKey.of(**fields, config={"fill": "dataset-mean", "recipe": {"lr": 0.4, "epochs": 8}})
    assert key != MeasurementKey.of(**fields, config={**config, "fill": "zero"})
    with ResultsDB(tmp_path / "r.sqlite") as db:
        assert db.get(key) is None
        db.record(key, metrics())
        row = db.get(key)
        assert row == db.rows()[0] and row["config_hash"] == config_hash(config) and row["versions"] == VERSIONS


def test_every_key_column_separates_measurements(tmp_path):
    variants = [
        cell(),
        cell(dataset="cifar10"),
        cell(model="resnet8"),
        cell(method="random"),
        cell(mode="kar"),
        cell(fill="zero"),
        cell(fraction=0.9),
        cell(seed=1),
        cell(config_hash="g" * 64),
        cell(mode="roar-mask", fill=None),  # a control: no fill (NULL), told apart from the cell all the same
        cell(kind=NO_RETRAIN, mode="morf", seed=None),  # no seed (NULL)
        cell(kind=FILL_LEAKAGE, model="detector", mode="detect"),
    ]
    with ResultsDB(tmp_path / "r.sqlite") as db:
        for i, c in enumerate(variants):
            db.record(c, metrics(test_acc=i / 20))
        assert len(db.rows()) == len(variants)
        for i, c in enumerate(variants):
            assert db.is_done(c)
            assert db.get(c)["test_acc"] == i / 20
            (row,) = [r for r in db.rows() if all(r[k] == getattr(c, k) for k in ("kind", "dataset", "model",
                      "method", "mode", "fill", "fraction", "seed", "config_hash"))]
            assert row["test_acc"] == i / 20


def test_row_filters(tmp_path):
    with ResultsDB(tmp_path / "r.sqlite") as db:
        for method in ("sg", "random", "ig"):
            for mode in ("roar", "kar"):
                db.record(cell(method=method, mode=mode), metrics())
        db.mark_running(cell(method="gb"))
        assert {r["method"] for r in db.rows(method=["sg", "random"])} == {"sg", "random"}
        assert len(db.rows(method=("sg", "random"), mode="kar")) == 2
        db.record(cell(method="ig", mode="kar-mask", fill=None), metrics())
        assert [r["method"] for r in db.rows(status="running")] == ["gb"]
        assert db.rows(method=[]) == []
        # None matches the NULL of a control's fill
        assert [r["mode"] for r in db.rows(fill=None)] == ["kar-mask"]
        assert len(db.rows(method="ig", fill=["dataset-mean", None])) == 3
        with pytest.raises(ValueError, match="cannot filter on 'accuracy'"):
            db.rows(accuracy=0.5)


@pytest.mark.parametrize(
    "fields, match",
    [
        ({"mode": "keep"}, r"mode of a retrain measurement must be one of \('roar', 'kar', 'roar-mask', 'kar-mask'\), "
                           r"got 'keep'"),
        ({"mode": "morf"}, "mode of a retrain measurement must be one of"),  # a no-retrain mode
        ({"kind": "guess"}, "kind must be one of"),
        ({"fraction": 1.5}, r"fraction must be in \[0, 1\], got 1.5"),
        ({"fraction": "0.5"}, "fraction must be a number"),
        ({"seed": -1}, "seed must be a non-negative int, got -1"),
        ({"seed": None}, "seed must be a non-negative int for a retraining"),
        ({"kind": NO_RETRAIN, "mode": "lerf", "seed": 0}, "a no-retrain measurement draws nothing"),
        ({"fill": "blur"}, "fill must be one of"),
        ({"fill": None}, "fill must be one of"),
        ({"mode": "roar-mask"}, "fill must be None for a mask-only control"),
        ({"method": ""}, "method must be a non-empty str"),
    ],
)
def test_key_rejects_bad_fields(fields, match):
    with pytest.raises(ValueError, match=match):
        cell(**fields)


@pytest.mark.parametrize(
    "bad, match",
    [
        ({"test_acc": 1.2}, r"metrics\['test_acc'\] must be an accuracy in \[0, 1\], got 1.2"),
        ({"epochs": 2.5}, r"metrics\['epochs'\] must be a non-negative int"),
        ({"seconds": float("nan")}, r"metrics\['seconds'\] must be a non-negative number"),
    ],
)
def test_record_rejects_bad_metrics_and_writes_nothing(tmp_path, bad, match):
    with ResultsDB(tmp_path / "r.sqlite") as db:
        with pytest.raises(ValueError, match=match):
            db.record(cell(), metrics(**bad))
        with pytest.raises(ValueError, match=r"metrics lack \['val_acc'\]"):
            db.record(cell(), {"test_acc": 0.1, "epochs": 1, "seconds": 1.0})
        assert db.rows() == []


def test_a_measurement_without_training_records_no_epochs_and_no_validation(tmp_path):
    key = cell(kind=NO_RETRAIN, mode="road-lerf", fill="road", seed=None)
    with ResultsDB(tmp_path / "r.sqlite") as db:
        db.record(key, metrics(val_acc=None, epochs=None, mean_probability=0.4))
        row = db.get(key)
    assert (row["seed"], row["epochs"], row["val_acc"]) == (None, None, None)
    assert row["extra"] == {"mean_probability": 0.4} and row["fill"] == "road"


CONCURRENT_WRITER = textwrap.dedent(
    """
    import os, sys, time
    from roarfast.results import MeasurementKey, ResultsDB

    path, go, worker = sys.argv[1], sys.argv[2], int(sys.argv[3])
    while not os.path.exists(go):
        time.sleep(0.01)
    db = ResultsDB(path)  # both workers may create the file at the same moment
    for i in range(150):
        own = MeasurementKey("retrain", "embedded", "fastnet", f"m{worker}", "roar", "zero", i / 150, i % 3, "h")
        shared = MeasurementKey("retrain", "embedded", "fastnet", "shared", "kar", "zero", i / 150, 0, "h")
        db.mark_running(own)
        db.record(own, {"test_acc": i / 150, "val_acc": worker / 10, "epochs": i, "seconds": 1.0,
                        "versions": {"worker": worker}})
        db.record(shared, {"test_acc": 0.5, "val_acc": 0.5, "epochs": worker, "seconds": 1.0,
                           "versions": {"worker": worker}})
    db.close()
    """
)


def test_two_processes_record_concurrently(tmp_path):
    path, go = tmp_path / "r.sqlite", tmp_path / "go"
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", CONCURRENT_WRITER, str(path), str(go), str(w)], cwd=REPO, stderr=subprocess.PIPE
        )
        for w in (1, 2)
    ]
    time.sleep(0.5)  # let both interpreters reach the start line
    go.touch()
    for worker in workers:
        _, err = worker.communicate(timeout=300)
        assert worker.returncode == 0, err.decode()

    with ResultsDB(path) as db:
        for worker in (1, 2):
            rows = db.rows(method=f"m{worker}")
            assert len(rows) == 150
            for row in rows:
                i = row["epochs"]
                assert row["fraction"] == round(i / 150, 9) and row["seed"] == i % 3
                assert row["test_acc"] == i / 150 and row["val_acc"] == worker / 10
                assert row["status"] == "done" and row["versions"] == {"worker": worker}
        shared = db.rows(method="shared")
        assert len(shared) == 150 and all(r["epochs"] in (1, 2) for r in shared)
    with sqlite3.connect(path) as raw:
        assert raw.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
