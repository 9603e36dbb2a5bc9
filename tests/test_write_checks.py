"""Check before you spend (issue 18, item 4): a run directory that cannot be written (a path through a file,
a read-only directory) or a disk too full for the stage's estimate is refused with one line before anything
is trained or extracted; a write that fails during a stage (a full disk, a read-only filesystem) ends with
one line and leaves every earlier row and chunk intact."""

import errno
import os
import sqlite3

import pytest
from click.testing import CliRunner

from roarfast.common import atomic

from roarfast.stages import basemodel
from roarfast.cli import main
from roarfast.results import ResultsDB
from roarfast.rundir.directory import RunDir
from tests.test_cli_errors import TINY, fails_with_one_line


@pytest.fixture
def no_training(monkeypatch):
    """Fails the test when a classifier starts training: each refusal below must come first."""

    def refuse(*args, **kwargs):
        raise AssertionError("trained before the run directory was checked")

    monkeypatch.setattr(basemodel, "train_classifier", refuse)


def test_a_run_dir_below_a_file_is_refused_before_training(tmp_path, no_training):
    (tmp_path / "file").write_text("not a directory")
    line = fails_with_one_line(["train", "--run-dir", str(tmp_path / "file" / "sub"), "--epochs", "1", *TINY])
    assert f"cannot write {tmp_path / 'file' / 'sub'} (Not a directory" in line and "choose another --run-dir" in line


def read_only(monkeypatch):
    """mkstemp as on a read-only mount (root writes through permission bits, so chmod cannot show it)."""

    def refused(dir=None, **kwargs):
        raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(dir))

    monkeypatch.setattr(atomic.tempfile, "mkstemp", refused)


@pytest.mark.parametrize("command", [["train", "--epochs", "1"], ["extract", "--method", "random"],
                                     ["retrain", "--method", "random", "--epochs", "1"],
                                     ["sweep", "--method", "random", "--seeds", "1", "--no-control", "--epochs", "1"]])
def test_a_read_only_run_dir_is_refused_before_any_work(tmp_path, monkeypatch, no_training, command):
    read_only(monkeypatch)
    line = fails_with_one_line([*command, "--run-dir", str(tmp_path), *TINY])
    assert f"cannot write {tmp_path} (Read-only file system" in line and "choose another --run-dir" in line
    assert not RunDir(tmp_path).results_path.exists() and not RunDir(tmp_path).ranks_root.exists()


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes through permission bits")
def test_a_chmod_read_only_run_dir_is_refused_before_training(tmp_path, no_training):
    tmp_path.chmod(0o555)
    try:
        line = fails_with_one_line(["train", "--run-dir", str(tmp_path), "--epochs", "1", *TINY])
    finally:
        tmp_path.chmod(0o755)
    assert "Permission denied" in line and "choose another --run-dir" in line


def test_a_disk_too_full_for_the_stage_is_refused_before_it_starts(tmp_path, monkeypatch, no_training):
    usage = atomic.shutil.disk_usage(tmp_path)
    monkeypatch.setattr(atomic.shutil, "disk_usage", lambda path: usage._replace(free=5 << 20))
    line = fails_with_one_line(["train", "--run-dir", str(tmp_path), "--epochs", "1", *TINY])
    assert f"{tmp_path} has 5 MiB free, but this writes about 16 MiB there" in line and "free space" in line


def test_the_estimate_counts_the_ranks_an_extraction_writes(tmp_path, monkeypatch):
    """random's ranks are 10 + 10 maps of 32 x 32 uint16: a disk one byte short of them beyond the margin
    refuses the extraction, one with that byte to spare takes it."""
    usage = atomic.shutil.disk_usage(tmp_path)
    free = atomic.WRITE_MARGIN_BYTES + 20 * 32 * 32 * 2 - 1  # one byte short of random's ranks
    monkeypatch.setattr(atomic.shutil, "disk_usage", lambda path: usage._replace(free=free))
    line = fails_with_one_line(["extract", "--run-dir", str(tmp_path), "--method", "random", *TINY])
    assert "this writes about 16 MiB there" in line
    monkeypatch.setattr(atomic.shutil, "disk_usage", lambda path: usage._replace(free=free + 1))
    result = CliRunner().invoke(main, ["extract", "--run-dir", str(tmp_path), "--method", "random", *TINY])
    assert result.exit_code == 0, result.output


def test_a_full_disk_while_recording_cells_keeps_the_rows_before(tmp_path, monkeypatch):
    """The second cell's row meets a full disk at its COMMIT: one line; the first row stays, and the same
    command then trains the second cell only."""
    records = []
    original = ResultsDB._upsert

    def full_on_the_second_row(self, key, values, keep_done):
        if values.get("status") == "done":
            records.append(key)
            if len(records) == 2:
                raise sqlite3.OperationalError("database or disk is full")
        return original(self, key, values, keep_done)

    monkeypatch.setattr(ResultsDB, "_upsert", full_on_the_second_row)
    args = ["retrain", "--run-dir", str(tmp_path), "--method", "random", "--seeds", "2", "--epochs", "1", *TINY]
    line = fails_with_one_line(args)
    assert line == (f"Error: {RunDir(tmp_path).results_path}: database or disk is full; free space on its filesystem "
                    f"and rerun (the rows written before are kept)")
    with ResultsDB(RunDir(tmp_path).results_path) as db:
        assert [r["seed"] for r in db.rows(status="done")] == [0]
    monkeypatch.undo()
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    with ResultsDB(RunDir(tmp_path).results_path) as db:
        assert [r["seed"] for r in db.rows(status="done")] == [0, 1]


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EROFS])
def test_a_refused_checkpoint_write_is_one_line(tmp_path, monkeypatch, code):
    from roarfast.records import checkpoint
    def refused(path, data):
        raise OSError(code, os.strerror(code), str(path))

    monkeypatch.setattr(checkpoint, "replace_bytes", refused)
    line = fails_with_one_line(["train", "--run-dir", str(tmp_path), "--epochs", "1", *TINY])
    (model,) = RunDir(tmp_path).models_root.iterdir()  # the place of the id the training would have saved
    weights = model / checkpoint.WEIGHTS
    assert line.startswith(f"Error: cannot write {weights}: {os.strerror(code)}; what was written before is intact")
    assert ("free space there" if code == errno.ENOSPC else "choose a writable --run-dir") in line
