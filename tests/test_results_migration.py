"""results.sqlite files of earlier schema versions migrate in place when opened, their rows kept: a v1 file
(before claims) and a v2 file (cells only: no-retrain rows as seed-0 cells, the fill in `extra`) become
`measurements` with kind, fill, NULL seeds and epochs (v3), a v3 file gains the thread count (v4, NULL for
its rows) and a v4 file the configuration column (v5, NULL for its rows), with config hashes unchanged so that finished work stays finished; a run directory's
leakage.json moves into the database. Opened read-only, an older file is migrated in memory only."""

import dataclasses
import json
import sqlite3

import pytest

from roarfast.records.claims import this_process
from roarfast.errors import UserError
from roarfast.common.fingerprint import config_hash
from roarfast.results import (
    FILL_LEAKAGE,
    NO_RETRAIN,
    RETRAIN,
    SCHEMA_VERSION,
    MeasurementKey,
    ResultsDB,
    open_results,
)
from roarfast.measurements.row import KEY_COLUMNS, key_values
from roarfast.rundir.directory import RunDir

#: the cells table of schema version 2, as roarfast wrote it before v3
V2_SCHEMA = """
CREATE TABLE cells (
    dataset TEXT NOT NULL, model TEXT NOT NULL, method TEXT NOT NULL, mode TEXT NOT NULL, fraction REAL NOT NULL,
    seed INTEGER NOT NULL, config_hash TEXT NOT NULL, status TEXT NOT NULL, test_acc REAL, val_acc REAL,
    epochs INTEGER, seconds REAL, versions TEXT, extra TEXT, error TEXT, created TEXT NOT NULL, finished TEXT,
    owner TEXT, heartbeat REAL,
    PRIMARY KEY (dataset, model, method, mode, fraction, seed, config_hash)
)
"""
V1_SCHEMA = V2_SCHEMA.replace("    owner TEXT, heartbeat REAL,\n", "")
COLUMNS = ("dataset, model, method, mode, fraction, seed, config_hash, status, test_acc, val_acc, epochs, seconds, "
           "versions, extra, error, created, finished")
T0 = "2026-01-01T00:00:00+00:00"

#: v2 rows: (method, mode, fraction, seed, hash, status, test_acc, val_acc, epochs, extra)
V2_ROWS = [
    ("sg", "roar", 0.5, 1, "a", "done", 0.3, 0.31, 3, {"fill": "road", "test_images": 1000}),
    ("sg", "kar", 0.5, 0, "b", "done", 0.8, 0.81, 3, None),  # from before the fill was recorded: the default
    ("sg", "roar-mask", 0.5, 0, "c", "done", 0.12, 0.11, 3, {"test_images": 1000}),
    ("sg", "morf", 0.3, 0, "d", "done", 0.4, None, 0, {"mean_probability": 0.35}),
    ("sg", "road-lerf", 0.3, 0, "e", "done", 0.9, None, 0, {"mean_probability": 0.8}),
    ("random", "roar", 0.1, 2, "f", "failed", None, None, None, {"fill": "zero"}),
]


def write_old_file(path, version: int, rows) -> None:
    with sqlite3.connect(path) as raw:
        raw.execute(V1_SCHEMA if version == 1 else V2_SCHEMA)
        for method, mode, fraction, seed, hash_, status, acc, val, epochs, extra in rows:
            raw.execute(f"INSERT INTO cells ({COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                        ("embedded", "fastnet", method, mode, fraction, seed, hash_ * 64, status, acc, val, epochs,
                         1.5, json.dumps({"roarfast": "0.1.0"}), None if extra is None else json.dumps(extra),
                         "RuntimeError: oom" if status == "failed" else None, T0, T0))
        raw.execute(f"PRAGMA user_version = {version}")


def test_a_v2_file_migrates_in_place_with_its_rows_intact(tmp_path):
    path = tmp_path / "r.sqlite"
    write_old_file(path, 2, V2_ROWS)
    with ResultsDB(path) as db:
        rows = {(r["method"], r["mode"]): r for r in db.rows()}
    assert len(rows) == len(V2_ROWS)
    expected = {  # (kind, fill, seed, epochs, extra) after the migration
        ("sg", "roar"): (RETRAIN, "road", 1, 3, {"test_images": 1000}),
        ("sg", "kar"): (RETRAIN, "dataset-mean", 0, 3, {}),
        ("sg", "roar-mask"): (RETRAIN, None, 0, 3, {"test_images": 1000}),
        ("sg", "morf"): (NO_RETRAIN, "dataset-mean", None, None, {"mean_probability": 0.35}),
        ("sg", "road-lerf"): (NO_RETRAIN, "road", None, None, {"mean_probability": 0.8}),
        ("random", "roar"): (RETRAIN, "zero", 2, None, {}),
    }
    for (method, mode, fraction, seed, hash_, status, acc, val, _, _), want in zip(V2_ROWS, expected.values()):
        row = rows[(method, mode)]
        assert (row["kind"], row["fill"], row["seed"], row["epochs"], row["extra"]) == want, (method, mode)
        assert (row["fraction"], row["config_hash"], row["status"], row["test_acc"], row["val_acc"]) == (
            fraction, hash_ * 64, status, acc, val)
        assert (row["seconds"], row["versions"], row["created"], row["finished"]) == (
            1.5, {"roarfast": "0.1.0"}, T0, T0)
    assert rows[("random", "roar")]["error"] == "RuntimeError: oom"
    with sqlite3.connect(path) as raw:
        assert raw.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 6
        tables = {name for (name,) in raw.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert tables == {"measurements"}
    # the keys a stage computes now find the migrated rows: finished work is not redone
    with ResultsDB(path) as db:
        assert db.is_done(MeasurementKey(NO_RETRAIN, "embedded", "fastnet", "sg", "morf", "dataset-mean", 0.3, None,
                                         "d" * 64))
        assert db.is_done(MeasurementKey(RETRAIN, "embedded", "fastnet", "sg", "roar-mask", None, 0.5, 0, "c" * 64))
        assert not db.claim(MeasurementKey(RETRAIN, "embedded", "fastnet", "sg", "roar", "road", 0.5, 1, "a" * 64))


def test_a_v1_file_gains_the_claims_and_the_v3_columns_and_keeps_its_rows(tmp_path):
    path = tmp_path / "r.sqlite"
    write_old_file(path, 1, V2_ROWS[:1])
    key = MeasurementKey(RETRAIN, "embedded", "fastnet", "sg", "roar", "road", 0.5, 1, "a" * 64)
    with ResultsDB(path) as db:
        assert db.is_done(key) and db.get(key)["test_acc"] == 0.3
        assert db.claim(MeasurementKey(RETRAIN, "embedded", "fastnet", "sg", "roar", "road", 0.5, 3, "a" * 64))
        (claimed,) = db.rows(status="running")
    assert claimed["owner"]["pid"] == this_process()["pid"]
    with sqlite3.connect(path) as raw:
        assert raw.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION


#: the measurements table of schema version 3, as roarfast wrote it before thread counts
V3_SCHEMA = """
CREATE TABLE measurements (
    kind TEXT NOT NULL, dataset TEXT NOT NULL, model TEXT NOT NULL, method TEXT NOT NULL, mode TEXT NOT NULL,
    fill TEXT, fraction REAL NOT NULL, seed INTEGER, config_hash TEXT NOT NULL, status TEXT NOT NULL,
    test_acc REAL, val_acc REAL, epochs INTEGER, seconds REAL, versions TEXT, extra TEXT, error TEXT,
    created TEXT NOT NULL, finished TEXT, owner TEXT, heartbeat REAL
)
"""
V3_KEY = MeasurementKey(RETRAIN, "embedded", "fastnet", "sg", "roar", "dataset-mean", 0.5, 1, "a" * 64)


def write_v3_file(path) -> None:
    with sqlite3.connect(path) as raw:
        raw.execute(V3_SCHEMA)
        raw.execute("INSERT INTO measurements (kind, dataset, model, method, mode, fill, fraction, seed, config_hash, "
                    "status, test_acc, val_acc, epochs, seconds, created, finished) VALUES "
                    "(?, ?, ?, ?, ?, ?, ?, ?, ?, 'done', 0.3, 0.31, 3, 1.5, ?, ?)", (*key_values(V3_KEY), T0, T0))
        raw.execute("PRAGMA user_version = 3")


def test_a_v3_file_gains_the_thread_count_and_keeps_its_rows(tmp_path):
    path = tmp_path / "r.sqlite"
    write_v3_file(path)
    with ResultsDB(path) as db:
        (old,) = db.rows()
        assert (old["test_acc"], old["status"], old["threads"]) == (0.3, "done", None)  # never recorded
        assert db.is_done(V3_KEY)  # the key still finds it: finished work is not redone
        new = dataclasses.replace(V3_KEY, seed=2)
        db.record(new, {"test_acc": 0.4, "val_acc": 0.4, "epochs": 3, "seconds": 1.0, "threads": 2})
        assert db.get(new)["threads"] == 2 and "threads" not in db.get(new)["extra"]
    with sqlite3.connect(path) as raw:
        assert raw.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION


def test_a_v4_file_gains_the_config_column_and_new_rows_keep_their_configuration(tmp_path):
    path = tmp_path / "r.sqlite"
    write_v3_file(path)
    with ResultsDB(path) as db:  # v3 -> v5: the v4 column (threads) and the v5 one (config)
        (old,) = db.rows()
        assert old["config"] is None  # written before configurations were kept: only the hash is known
        config = {"recipe": {"epochs": 3, "lr": 0.05}, "fill": "dataset-mean", "ranks": {"seed": 1}}
        new = MeasurementKey.of(config=config, **{**{c: getattr(V3_KEY, c) for c in KEY_COLUMNS[:-1]}, "seed": 4})
        assert db.claim(new)
        assert db.get(new)["config"] == config  # kept from the claim on
        db.record(new, {"test_acc": 0.4, "val_acc": 0.4, "epochs": 3, "seconds": 1.0})
        assert db.get(new)["config"] == config and db.get(new)["config_hash"] == config_hash(config)
    assert new == MeasurementKey(**{c: getattr(new, c) for c in KEY_COLUMNS})  # the config is not the key: its hash is


def test_an_older_file_opened_read_only_is_migrated_in_memory_only(tmp_path):
    path = tmp_path / "r.sqlite"
    write_v3_file(path)
    before = path.read_bytes()
    with ResultsDB(path, readonly=True) as db:
        (row,) = db.rows()
        assert row["threads"] is None and row["test_acc"] == 0.3
    assert path.read_bytes() == before  # still v3 on disk: a read-only directory stays untouched
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.sqlite"]


def test_a_file_of_a_later_version_is_refused(tmp_path):
    path = tmp_path / "r.sqlite"
    with sqlite3.connect(path) as raw:
        raw.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    with pytest.raises(UserError, match=f"schema version {SCHEMA_VERSION + 1}, this roarfast reads up to "
                                        f"{SCHEMA_VERSION}: a newer roarfast wrote it"):
        ResultsDB(path)


def test_leakage_json_moves_into_results_sqlite(tmp_path):
    run = RunDir(tmp_path)
    run.legacy_dataset_path.write_text(json.dumps({"name": "embedded", "data_dir": None, "options": {}, "fingerprint": "x"}))
    run.legacy_fill_leakage_path.write_text(json.dumps(
        [{"method": "random", "fill": "road", "fraction": 0.5, "accuracy": 0.61, "base_rate": 0.5}]))
    with open_results(run) as db:
        (row,) = db.rows(kind=FILL_LEAKAGE)
    assert (row["dataset"], row["method"], row["fill"], row["fraction"], row["test_acc"], row["seed"]) == (
        "embedded", "random", "road", 0.5, 0.61, None)
    assert row["extra"] == {"base_rate": 0.5} and row["status"] == "done"
    assert not run.legacy_fill_leakage_path.exists()
    with open_results(run) as db:  # moved once: opening again finds it in the database only
        assert len(db.rows()) == 1
