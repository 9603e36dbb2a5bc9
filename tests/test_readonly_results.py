"""A read-only run directory can be reported on (issue 18, item 5): `roarfast report --out ELSEWHERE` and
`roarfast.results.load` open results.sqlite read-only (SQLite's `mode=ro`, `immutable` when no writer's
-wal file is there): no WAL switch, no -wal or -shm files, the file's bytes unchanged. As root, permission
bits do not stop a write, so every connection to the file is watched instead; a chmod'ed directory is
tried where that means something."""

import os
import sqlite3

import pytest
from click.testing import CliRunner

import roarfast.errors
import roarfast.results
from roarfast.cli import main
from roarfast.measurements.sqlite import SNAPSHOT_TRIES
from roarfast.rundir.directory import RunDir
from tests.test_report_sections import fill_run
from tests.test_write_checks import read_only


@pytest.fixture
def run(tmp_path):
    run = RunDir(tmp_path / "run")
    fill_run(run)  # written, closed: results.sqlite alone, in WAL mode
    return run


def snapshot(run) -> dict:
    return {p.name: p.read_bytes() for p in run.root.iterdir()}


@pytest.fixture
def connections(monkeypatch):
    """Every sqlite3.connect roarfast.results makes: (database, uri)."""
    seen = []
    connect = sqlite3.connect

    def watched(database, *args, uri=False, **kwargs):
        seen.append((str(database), uri))
        return connect(database, *args, uri=uri, **kwargs)

    monkeypatch.setattr(sqlite3, "connect", watched)
    return seen


def opened_read_only(connections, run) -> bool:
    to_file = [(database, uri) for database, uri in connections if str(run.results_path.name) in database]
    return bool(to_file) and all(uri and database.startswith("file:") and "mode=ro" in database
                                 for database, uri in to_file)


def test_report_elsewhere_opens_results_read_only_and_writes_nothing_there(run, tmp_path, connections):
    before = snapshot(run)
    result = CliRunner().invoke(main, ["report", "--run-dir", str(run.root), "--out", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "out" / "index.md").is_file()
    assert opened_read_only(connections, run), connections
    assert snapshot(run) == before  # no -wal, no -shm, no report/, the same bytes


def test_results_load_opens_read_only(run, connections):
    before = snapshot(run)
    rows = roarfast.results.load(run.root, kind="retrain")
    assert len(rows) == 12 and opened_read_only(connections, run)
    assert snapshot(run) == before


def test_a_writers_wal_is_read_through_sqlite_and_its_rows_seen(run, connections):
    """While a sweep holds the database open, its -wal file holds rows not yet in the file: the reader
    goes through SQLite's read-only mode (not immutable) and sees them."""
    writer = roarfast.results.ResultsDB(run.results_path)
    try:
        from tests.test_report_sections import record

        record(writer, roarfast.results.RETRAIN, "late", "roar", "dataset-mean", 0.3)
        rows = roarfast.results.load(run.root, kind="retrain")
    finally:
        writer.close()
    assert "late" in set(rows["method"]) and not any("immutable" in database for database, _ in connections[1:])


def test_report_into_a_read_only_run_dir_says_to_use_out(run, monkeypatch):
    read_only(monkeypatch)
    result = CliRunner().invoke(main, ["report", "--run-dir", str(run.root)])
    assert result.exit_code == 1 and result.output.count("\n") == 1, result.output
    # the report is built beside its directory, then swapped in: the run directory itself must be writable
    assert f"cannot write {run.root} (Read-only file system" in result.output
    assert "choose another --out" in result.output


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes through permission bits")
def test_report_on_a_chmod_read_only_run_dir(run, tmp_path):
    run.root.chmod(0o555)
    try:
        result = CliRunner().invoke(main, ["report", "--run-dir", str(run.root), "--out", str(tmp_path / "out")])
    finally:
        run.root.chmod(0o755)
    assert result.exit_code == 0, result.output



#: a sweep's writes, one row at a time until told to stop, each in a ResultsDB opened and closed (so the -wal
#: comes and goes and every close checkpoints into the file while the test reads it); prints the rows written
WRITER = """
import sys, time
from pathlib import Path
from roarfast.results import RETRAIN, MeasurementKey, ResultsDB

path, stop = sys.argv[1], Path(sys.argv[2])
written = 0
while not stop.exists():
    with ResultsDB(path) as db:
        db.record(MeasurementKey(RETRAIN, "embedded", "fastnet", f"late{written}", "roar", "dataset-mean", 0.5, 0,
                                 "0" * 64), {"test_acc": 0.5, "val_acc": 0.5, "epochs": 0, "seconds": 1.0,
                                             "versions": {}})
    written += 1
    time.sleep(0.01)
print(written)
"""


def test_the_report_reads_while_a_sweep_writes_and_creates_nothing(run, tmp_path):
    """Read-only copies taken while another process writes (its -wal present, or checkpointing into the file
    with no -wal: the immutable read, taken again when the file changed under it) are each a consistent state:
    every row verified, never fewer than the read before; the report is written meanwhile; once the writer is
    gone, a read leaves the run directory as it found it."""
    import subprocess
    import sys

    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    stop = tmp_path / "stop"
    initial = len(roarfast.results.load(run.root))
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(run.results_path), str(stop)], cwd=repo,
                              env={**os.environ, "PYTHONPATH": repo}, stdout=subprocess.PIPE, text=True)
    try:
        seen = [initial]
        while seen[-1] < initial + 5 and writer.poll() is None:  # the writer is under way
            seen.append(len(roarfast.results.load(run.root)))
        result = CliRunner().invoke(main, ["report", "--run-dir", str(run.root), "--out", str(tmp_path / "out")])
        assert result.exit_code == 0, result.output
        for _ in range(8):
            seen.append(len(roarfast.results.load(run.root)))
    finally:
        stop.touch()
        written = int(writer.communicate(timeout=600)[0])
    assert writer.returncode == 0 and seen == sorted(seen) and seen[-1] > initial + 5
    before = snapshot(run)
    assert len(roarfast.results.load(run.root)) == initial + written
    assert snapshot(run) == before


@pytest.mark.parametrize("changed_reads", [1, SNAPSHOT_TRIES])
def test_a_copy_read_while_a_writer_checkpointed_is_taken_again(run, monkeypatch, changed_reads):
    """An immutable read takes no lock: a copy during which a writer wrote and checkpointed into the file
    (here, a row recorded as the copy ends) may mix two states, so it is taken again and the newer state
    read; a file that changes during every read is refused in one line."""
    from tests.test_report_sections import record

    written = []

    class Checkpointed(sqlite3.Connection):
        def backup(self, *args, **kwargs):
            copied = super().backup(*args, **kwargs)
            if len(written) < changed_reads:
                with roarfast.results.ResultsDB(run.results_path) as writer:  # closed: checkpointed, no -wal left
                    record(writer, roarfast.results.RETRAIN, f"late{len(written)}", "roar", "dataset-mean", 0.5)
                written.append(1)
            return copied

    connect = sqlite3.connect
    monkeypatch.setattr(sqlite3, "connect", lambda database, *args, **kwargs: connect(
        database, *args, **({"factory": Checkpointed} if "immutable" in str(database) else {}), **kwargs))
    if changed_reads < SNAPSHOT_TRIES:
        assert len(roarfast.results.load(run.root, kind="retrain")) == 12 + changed_reads
    else:
        with pytest.raises(roarfast.errors.UserError) as err:
            roarfast.results.load(run.root)
        assert str(err.value) == (f"{run.results_path} changed each of the {SNAPSHOT_TRIES} times it was read (a "
                                  f"writer checkpointing it); rerun")
