"""Every stored byte is verified by every reader (issue 24, item 3): one flipped byte in the base checkpoint's
weights or its meta.json, dataset.json, stages.json, a rank store's manifest, a results row's metric or key,
or a stream-cache record is refused with one line naming the file and the repair by the commands that read
it, and nothing damaged is used (no rank stamped with a damaged checkpoint's hash, no accuracy read from a
damaged record); a cache record is measured again. Records written before digests are read with a note,
never as verified."""

import json
import shutil
import sqlite3
import struct

import pytest

from roarfast.records.checkpoint import read_meta
from roarfast.errors import UserError
from roarfast.common.fingerprint import RECORD_DIGEST, read_record, seal
from roarfast.results import RETRAIN, ResultsDB, load
from roarfast.rundir.directory import RunDir
from tests.test_cli_errors import TINY, cli_ok, fails_with_one_line

RETRAIN_GRAD = ["retrain", "--method", "grad", "--epochs", "1", "--fraction", "0.5", *TINY]


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    """A run directory with a base model, grad and random ranks and one finished cell each."""
    run_dir = tmp_path_factory.mktemp("digests") / "run"
    cli_ok("train", "--run-dir", str(run_dir), "--epochs", "1", *TINY)
    cli_ok("extract", "--run-dir", str(run_dir), "--method", "grad,random", *TINY)
    cli_ok(*RETRAIN_GRAD, "--run-dir", str(run_dir))
    return run_dir


@pytest.fixture
def run(prepared, tmp_path):
    shutil.copytree(prepared, tmp_path / "run")
    return RunDir(tmp_path / "run")


def flip_digit(path, marker: str) -> None:
    """Changes the first non-zero digit after `marker` in the file at `path` into another digit: one byte."""
    data = bytearray(path.read_bytes())
    at = data.index(marker.encode()) + len(marker)
    while chr(data[at]) not in "123456789":
        at += 1
    data[at] = ord("9") if data[at] != ord("9") else ord("1")
    path.write_bytes(bytes(data))


def flip_byte(path, offset: int, bit: int = 0x10) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= bit
    path.write_bytes(bytes(data))


def command(name: str, run: RunDir) -> list:
    return {"extract": ["extract", "--method", "grad", "--force", *TINY], "evaluate": ["evaluate", "--method", "grad",
            "--metric", "morf", "--fraction", "0.5", *TINY], "retrain": RETRAIN_GRAD,
            "report": ["report"]}[name] + ["--run-dir", str(run.root)]


# ------------------------------------------------------------------------------------------ the checkpoint

@pytest.mark.parametrize("reader", ["extract", "evaluate", "retrain"])
def test_a_flipped_weight_is_refused_and_never_stamped_on_ranks(run, reader):
    weights = run.base_checkpoint / "model.safetensors"
    flip_byte(weights, weights.stat().st_size - 100)  # inside the last tensor's data
    manifest = (run.rank_store.path("grad", "train") / "manifest.json").read_bytes()
    with ResultsDB(run.results_path) as db:
        rows = len(db.rows())
    line = fails_with_one_line(command(reader, run))
    assert line == (f"Error: {weights} does not match the sha256 recorded in {run.base_meta_path} when it was saved "
                    f"(the file changed on disk: damaged, truncated or replaced); retrain the base model (`roarfast "
                    f"train --run-dir {run.root}`) or restore the file")
    assert (run.rank_store.path("grad", "train") / "manifest.json").read_bytes() == manifest
    with ResultsDB(run.results_path) as db:
        assert len(db.rows()) == rows


@pytest.mark.parametrize("reader", ["extract", "evaluate", "report"])
def test_a_flipped_accuracy_in_meta_json_is_refused(run, reader):
    flip_digit(run.base_meta_path, '"test_acc": 0.')
    line = fails_with_one_line(command(reader, run))
    assert line == (f"Error: {run.base_meta_path} does not match the sha256 recorded in it when it was written (the "
                    f"file changed on disk); retrain the base model (`roarfast train --run-dir {run.root}`) or restore "
                    f"the file")


def test_a_flipped_byte_in_the_digest_s_name_does_not_pass_meta_off_as_older(run):
    text = run.base_meta_path.read_text()
    run.base_meta_path.write_text(text.replace(f'"{RECORD_DIGEST}"', f'"{RECORD_DIGEST[:-1]}7"'))
    with pytest.raises(UserError, match=f"lacks the {RECORD_DIGEST} it was written with"):
        run.base_meta()


def test_a_meta_saved_before_digests_is_read_with_a_note(run, caplog):
    meta = json.loads(run.base_meta_path.read_text())
    del meta[RECORD_DIGEST], meta["weights_sha256"]
    run.base_meta_path.write_text(json.dumps(meta))
    with caplog.at_level("WARNING"):
        assert run.base_meta()["test_acc"] == meta["test_acc"]
        assert len(run.base_checkpoint_sha256()) == 64
    notes = " ".join(r.getMessage() for r in caplog.records)
    assert f"{run.base_meta_path} was written before roarfast recorded digests: it is read unverified" in notes
    assert f"{run.base_checkpoint / 'model.safetensors'} was saved before roarfast recorded" in notes


# ---------------------------------------------------------------------------------- run-directory records

def test_a_flipped_dataset_json_is_refused_by_the_commands_that_read_it(run):
    flip_digit(run.dataset_path, '"num_train": ')
    for reader in ("evaluate", "retrain"):
        line = fails_with_one_line(command(reader, run))
        assert line == (f"Error: {run.dataset_path} does not match the sha256 recorded in it when it was written (the "
                        f"file changed on disk); restore it, or remove it and name the dataset again (--dataset, "
                        f"--data-dir, --data-option; `roarfast train` records the latest request anew; every "
                        f"artifact stays where it is)")


def test_a_flipped_stage_time_is_left_out_of_the_report_in_one_note(run, caplog):
    run.record_stage_time("train", 12.5)
    run.record_stage_time("extract", {"grad": 3.25})
    assert run.stage_times() == {"train": 12.5, "extract": {"grad": 3.25}}
    flip_digit(run.stage_times_path, '"train": ')
    # a damaged stages.json must not block the report (nothing else depends on the times): they are left out
    with caplog.at_level("WARNING"):
        cli_ok(*command("report", run))
    assert (f"the stage times are left out: {run.stage_times_path} does not match the sha256 recorded in it when it "
            f"was written (the file changed on disk); remove it (the next sweep records the stage times again) or "
            f"restore it") in caplog.text
    assert run.stage_times() is None


def test_records_written_before_digests_are_read_with_a_note(tmp_path, caplog):
    run = RunDir(tmp_path / "format-1")  # a dataset.json of before digests is of run-directory format 1
    run.root.mkdir()
    run.legacy_dataset_path.write_text(json.dumps({"name": "embedded", "data_dir": None, "options": {"num_train": 10},
                                                   "fingerprint": "x"}))
    with caplog.at_level("WARNING"):
        assert run.dataset_record()["options"] == {"num_train": 10}
    assert f"{run.dataset_path} was written before roarfast recorded digests" in caplog.text


# ----------------------------------------------------------------------------------------------- manifests

def test_a_flipped_manifest_is_refused_with_extract_force(run):
    manifest = run.rank_store.path("grad", "train") / "manifest.json"
    flip_digit(manifest, '"shape": [')
    line = fails_with_one_line(command("retrain", run))
    assert line == (f"Error: {manifest} does not match the sha256 recorded in it when it was written (the file "
                    f"changed on disk); `roarfast extract --force --method grad --run-dir {run.root}` repairs it")
    cli_ok(*command("extract", run))  # the repair it names
    cli_ok(*command("retrain", run))


def test_a_flipped_format_of_a_manifest_is_not_read_as_an_older_one(run):
    path = run.rank_store.path("grad", "train") / "manifest.json"
    manifest = json.loads(path.read_text())
    del manifest[RECORD_DIGEST]
    path.write_text(json.dumps({**manifest, "format": 3}))
    with pytest.raises(UserError, match=f"lacks the {RECORD_DIGEST} it was written with"):
        run.rank_store.manifest("grad", "train")


# ------------------------------------------------------------------------------------------ results.sqlite

def _checkpointed(path) -> bytes:
    """The database's bytes with every row in the main file (none left in a -wal)."""
    with sqlite3.connect(path) as raw:
        raw.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return path.read_bytes()


def _pages(path, name: str) -> set:
    """The page numbers (from 1) of the b-tree `name` (a table or an index)."""
    with sqlite3.connect(path) as raw:
        return {p for (p,) in raw.execute("SELECT pageno FROM dbstat WHERE name = ?", (name,))}


def _offset_in(path, needle: bytes, btree: str) -> int:
    """Where `needle` lies in a page of `btree`."""
    data = _checkpointed(path)
    with sqlite3.connect(path) as raw:
        page_size = raw.execute("PRAGMA page_size").fetchone()[0]
    pages = _pages(path, btree)
    at = data.find(needle)
    while at // page_size + 1 not in pages:
        at = data.find(needle, at + 1)
        assert at >= 0, f"{needle!r} not in {btree}"
    return at


def test_a_flipped_metric_is_refused_by_every_reader(run):
    with ResultsDB(run.results_path) as db:
        row = next(r for r in db.rows() if r["method"] == "grad")
    # the lowest exponent bit of the big-endian double: the accuracy halves or doubles, as in the issue
    flip_byte(run.results_path, _offset_in(run.results_path, struct.pack(">d", row["test_acc"]), "measurements") + 1)
    expected = (f"{run.results_path}: the row (kind=retrain method=grad mode=roar fill=dataset-mean fraction=0.5 "
                f"seed=0) does not match the sha256 written with it (the file changed on disk); restore it from a "
                f"copy, or move it aside to measure again from scratch")
    assert fails_with_one_line(command("report", run)) == f"Error: {expected}"
    assert fails_with_one_line(command("retrain", run)) == f"Error: {expected}"
    with pytest.raises(UserError) as err:
        load(run.root)
    assert str(err.value) == expected


@pytest.mark.parametrize("btree", ["measurements", "measurement_key"])
def test_a_flipped_key_in_the_table_or_its_index_is_refused_when_opened(run, btree):
    with ResultsDB(run.results_path) as db:
        row = next(r for r in db.rows() if r["method"] == "grad")
    flip_byte(run.results_path, _offset_in(run.results_path, row["config_hash"].encode(), btree) + 10, bit=0x01)
    line = fails_with_one_line(command("report", run))
    assert line.startswith(f"Error: {run.results_path}: SQLite's integrity_check failed (")
    assert line.endswith("; restore it from a copy, or move it aside to measure again from scratch")
    with pytest.raises(UserError, match="integrity_check failed"):
        ResultsDB(run.results_path)


def _v5_file(path) -> None:
    """results.sqlite as schema v5 left it: the same rows without their digests. The connection is closed here,
    so its last checkpoint of the write-ahead log lands now, not when it is collected later."""
    raw = sqlite3.connect(path)
    try:
        with raw:
            raw.execute("ALTER TABLE measurements DROP COLUMN row_sha256")
            raw.execute("PRAGMA user_version = 5")
    finally:
        raw.close()


def test_a_v5_file_gets_row_digests_once_saying_its_rows_were_never_verified(run, caplog):
    with ResultsDB(run.results_path) as db:
        rows = db.rows()
    _v5_file(run.results_path)
    before = run.results_path.read_bytes()
    with caplog.at_level("WARNING"):
        with ResultsDB(run.results_path, readonly=True) as db:
            assert db.rows() == rows
        assert run.results_path.read_bytes() == before  # read-only: digested in memory, every time
        assert f"{run.results_path} (schema v5) predates row digests: its {len(rows)} row(s) are read unverified" \
            in caplog.text
        with ResultsDB(run.results_path) as db:
            assert db.rows() == rows
        assert "were given digests of their content as found, which was never verified" in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING"):
        with ResultsDB(run.results_path) as db:  # migrated once: now verified, no note
            assert db.rows() == rows
    assert "predates" not in caplog.text


def test_a_row_without_its_digest_in_a_v6_file_is_refused(run):
    with sqlite3.connect(run.results_path) as raw:
        raw.execute("UPDATE measurements SET row_sha256 = NULL WHERE method = 'grad'")
    with ResultsDB(run.results_path) as db, pytest.raises(UserError, match="does not match the sha256 written"):
        db.rows(kind=RETRAIN)


# --------------------------------------------------------------------------------------- the stream cache

def test_a_flipped_cache_record_is_measured_again(tmp_path, monkeypatch, caplog):
    from roarfast.data import load_dataset
    from tests.test_data_streamed import CROP, RESIZE, _write_tree

    monkeypatch.setenv("ROARFAST_CACHE_DIR", str(tmp_path / "cache"))
    tree = _write_tree(tmp_path / "tree", per_class=(4, 2))

    def stream():
        return load_dataset("imagefolder", tree, resize=RESIZE, crop=CROP, device="cpu", stream=True)

    first = stream()
    records = sorted((tmp_path / "cache" / "imagefolder").glob("*.json"))
    assert records and all(RECORD_DIGEST in json.loads(r.read_text()) for r in records)
    measured = [r for r in records if json.loads(r.read_text())["sums"] is not None]
    flip_digit(measured[0], '"sums": {')
    with caplog.at_level("WARNING"):
        again = stream()
    assert f"{measured[0]} does not match the sha256 recorded in it" in caplog.text and "measuring it again" in \
        caplog.text
    assert (again.mean, again.std, again.fingerprint) == (first.mean, first.std, first.fingerprint)
    read_record(measured[0], "")  # written again, whole


def test_seal_round_trips_every_json_value_and_catches_any_change(tmp_path):
    record = {"a": 0.1 + 0.2, "b": [1, (2, 3)], "c": None, "d": {"e": "é", "f": float("nan")}, "g": tmp_path}
    sealed = json.loads(json.dumps(seal(record)))
    path = tmp_path / "r.json"
    path.write_text(json.dumps(sealed))
    back = read_record(path, "repair")
    assert back["a"] == 0.1 + 0.2 and back["b"] == [1, [2, 3]] and back["g"] == str(tmp_path)
    path.write_text(json.dumps({**sealed, "a": 0.30000000000000005}))  # the same float, written otherwise
    assert read_record(path, "repair")["a"] == 0.1 + 0.2
    path.write_text(json.dumps({**sealed, "a": 0.3}))
    with pytest.raises(UserError, match=r"r.json does not match the sha256 recorded in it .*; repair$"):
        read_record(path, "repair")
    assert read_meta(tmp_path / "nowhere") == {}
