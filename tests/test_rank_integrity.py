"""Ranks are trusted only as written, for the model they were made with (issue 18, items 1 and 2): random
bytes written over rank rows (the issue's `dd` reproduction) stop retrain and evaluate with one line naming
the file, the chunk and `roarfast extract --force`, with no cell trained, and the report leaves the picture
out saying why; ranks stamped with an earlier base checkpoint are refused by every reader with both
hashes and the remedy."""

import shutil

import numpy as np
import pytest
from click.testing import CliRunner

from roarfast.cli import main
from roarfast.errors import UserError
from roarfast.results import ResultsDB
from roarfast.rundir.directory import RunDir
from tests.test_cli_errors import TINY, cli_ok, fails_with_one_line
from tests.test_store import damage


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    """A run directory with a base model, grad and random ranks and one finished cell each."""
    run_dir = tmp_path_factory.mktemp("integrity") / "run"
    cli_ok("train", "--run-dir", str(run_dir), "--epochs", "1", *TINY)
    cli_ok("extract", "--run-dir", str(run_dir), "--method", "grad,random", *TINY)
    cli_ok("retrain", "--run-dir", str(run_dir), "--method", "grad", "--epochs", "1", "--fraction", "0.5", *TINY)
    return run_dir


@pytest.fixture
def run_dir(prepared, tmp_path):
    copy = tmp_path / "run"
    shutil.copytree(prepared, copy)
    return copy


def done_rows(run_dir) -> int:
    with ResultsDB(RunDir(run_dir).results_path) as db:
        return len(db.rows(status="done"))


def test_damaged_train_ranks_stop_retrain_with_one_line_and_no_cell_trained(run_dir):
    store = RunDir(run_dir).rank_store
    damage(store.path("grad", "train"), row=2, rows=3)
    before = done_rows(run_dir)
    line = fails_with_one_line(["retrain", "--run-dir", str(run_dir), "--method", "grad", "--epochs", "1",
                                "--fraction", "0.3", *TINY])
    assert f"{store.path('grad', 'train') / 'ranks.npy'}: chunk 0 (rows 0-" in line
    assert f"`roarfast extract --force --method grad --run-dir {run_dir}` repairs it" in line
    assert done_rows(run_dir) == before  # nothing was trained on it
    cli_ok("extract", "--run-dir", str(run_dir), "--method", "grad", "--force", *TINY)  # the repair it names
    cli_ok("retrain", "--run-dir", str(run_dir), "--method", "grad", "--epochs", "1", "--fraction", "0.3", *TINY)
    assert done_rows(run_dir) == before + 2  # grad and random at 0.3


def test_damaged_test_ranks_stop_evaluate_and_the_report_says_why_it_has_no_picture(run_dir):
    store = RunDir(run_dir).rank_store
    damage(store.path("grad", "test"), row=1)
    line = fails_with_one_line(["evaluate", "--run-dir", str(run_dir), "--method", "grad", "--metric", "morf",
                                "--fraction", "0.5", *TINY])
    assert f"{store.path('grad', 'test') / 'ranks.npy'}: chunk 0" in line and "extract --force --method grad" in line
    result = CliRunner().invoke(main, ["report", "--run-dir", str(run_dir)])
    assert result.exit_code == 0, result.output
    notes = (RunDir(run_dir).report_dir / "index.md").read_text()
    assert "example images not drawn" in notes and "chunk 0" in notes
    assert not (RunDir(run_dir).report_dir / "examples.png").exists()


def test_ranks_of_an_earlier_base_model_are_refused_by_every_reader(run_dir):
    run = RunDir(run_dir)
    stamped = run.rank_store.manifest("grad", "train")["checkpoint_sha256"]
    earlier = run.head().ranks["grad"]
    cli_ok("train", "--run-dir", str(run_dir), "--epochs", "1", "--seed", "1", *TINY)
    current = run.base_checkpoint_sha256()
    assert current != stamped
    before = done_rows(run_dir)
    # the latest request's ranks are those of the new base model: each reader says to extract them
    commands = [
        ["retrain", "--method", "grad", "--epochs", "1", "--fraction", "0.3"],
        ["evaluate", "--method", "grad", "--metric", "morf", "--fraction", "0.5"],
        ["leakage", "--method", "grad", "--fill", "dataset-mean", "--fraction", "0.5", "--max-images", "8"],
    ]
    for command in commands:
        line = fails_with_one_line([*command, "--run-dir", str(run_dir), *TINY])
        assert "roarfast extract" in line and "grad" in line and f"--run-dir {run_dir}" in line, command
    assert done_rows(run_dir) == before
    # the earlier ones, kept whole, are refused with both hashes when read for the new base model
    with pytest.raises(UserError, match=f"were made with another model: stored checkpoint sha256 {stamped}, current "
                                        f"checkpoint {current}; `roarfast extract --force --method grad --run-dir "
                                        f"{run_dir}` remakes them"):
        run.read_ranks("grad", "train", run.dataset_record()["fingerprint"], rank_id=earlier)
    # random's ranks ignore the model (no stamp): they stay usable
    cli_ok("retrain", "--run-dir", str(run_dir), "--method", "random", "--epochs", "1", "--fraction", "0.3", *TINY)
    assert "also in this run directory:" in cli_ok("report", "--run-dir", str(run_dir))  # the earlier base's cells


def test_ranks_without_their_base_model_are_refused(run_dir):
    run = RunDir(run_dir)
    shutil.rmtree(run.base_checkpoint)
    line = fails_with_one_line(["retrain", "--run-dir", str(run_dir), "--method", "grad", "--epochs", "1",
                                "--fraction", "0.3", *TINY])
    assert "holds no model" in line and f"roarfast extract --force --method grad --run-dir {run_dir}" in line
    assert np.load(run.rank_store.path("grad", "train") / "ranks.npy").shape[0] == 10  # nothing was removed
