"""A cell trained data-parallel (--workers-per-cell N: N processes in one gloo group on CPU, each with its
share of every batch): its row says how it was trained and keeps the cell's key (a rerun with one worker
finds it done), its accuracy means what one worker's does (slow: within the seeds' spread), and the
combinations that cannot work are refused in one line."""

import shutil
from importlib.util import find_spec

import pytest
import torch
from click.testing import CliRunner

from roarfast.cli import main
from roarfast.results import ResultsDB
from roarfast.rundir.directory import RunDir

#: 160 images: 144 train after the validation split, so that the batch of 128 splits between two workers
DATA = ["--data-option", "num_train=160", "--data-option", "num_test=64"]
CELL = ["--fraction", "0.5", "--epochs", "1", "--no-progress"]


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    """A run directory with a one-epoch base model and random's ranks."""
    run_dir = tmp_path_factory.mktemp("dp") / "base"
    for args in (["train", "--epochs", "1", *DATA], ["extract", "--method", "random"]):
        result = invoke(*args, "--run-dir", run_dir, "--no-progress")
        assert result.exit_code == 0, result.output
    return run_dir


def rows(run_dir) -> list[dict]:
    with ResultsDB(RunDir(run_dir).results_path, readonly=True) as db:
        return db.rows()


def test_a_data_parallel_row_says_how_and_keeps_the_cells_key(prepared, tmp_path):
    run_dir = shutil.copytree(prepared, tmp_path / "run")
    result = invoke("retrain", "--run-dir", run_dir, *CELL, "--workers-per-cell", 2)
    assert result.exit_code == 0, result.output
    (row,) = rows(run_dir)
    assert row["status"] == "done" and row["extra"]["workers"] == 2
    assert row["threads"] == max(1, torch.get_num_threads() // 2)  # the cores shared between the workers
    # how, not what: the same cell with one worker is the one done
    again = invoke("retrain", "--run-dir", run_dir, *CELL)
    assert again.exit_code == 0, again.output
    assert rows(run_dir) == [row]


@pytest.mark.parametrize("args, message", [
    (["retrain", "--workers-per-cell", "2", "--group-size", "2"],
     "--workers-per-cell 2 and --group-size 2 exclude each other"),
    (["retrain", "--workers-per-cell", "3"],
     "--workers-per-cell 3: each worker takes an equal share of a batch, and the batch has 128 images"),
    pytest.param(["sweep", "--method", "random", "--executor", "ray", "--gpus-per-cell", "0.5", "--workers-per-cell",
                  "2"], "--workers-per-cell 2 takes one GPU per worker: --gpus-per-cell 1 (or 0 on CPUs), got 0.5",
                 marks=pytest.mark.skipif(find_spec("ray") is None, reason="needs Ray: pip install 'roarfast[ray]'")),
])
def test_what_cannot_work_is_one_line_and_trains_nothing(prepared, tmp_path, args, message):
    run_dir = shutil.copytree(prepared, tmp_path / "run")
    result = invoke(*args, "--run-dir", run_dir, *CELL)
    assert result.exit_code != 0 and message in result.output, result.output
    assert len(result.output.strip().splitlines()) == 1 and "Traceback" not in result.output
    assert not RunDir(run_dir).results_path.exists() or rows(run_dir) == []


@pytest.mark.slow
def test_a_data_parallel_cell_learns_as_one_worker_does(tmp_path):
    """Two seeds of a learnable cell (random ROAR 0.1, 3 epochs of batch 16) with one worker and with two:
    every run learns, and the two ways agree within the seeds' spread."""
    data = ["--data-option", "num_train=768", "--data-option", "num_test=256"]
    run_dir = tmp_path / "one"
    for args in (["train", "--epochs", "1", *data], ["extract", "--method", "random"]):
        assert invoke(*args, "--run-dir", run_dir, "--no-progress").exit_code == 0
    shutil.copytree(run_dir, tmp_path / "two")
    cells = ["--fraction", "0.1", "--seeds", "2", "--epochs", "3", "--recipe", "batch_size=16", "--no-progress"]
    accuracies = {}
    for name, workers in (("one", 1), ("two", 2)):
        result = invoke("retrain", "--run-dir", tmp_path / name, *cells, "--workers-per-cell", workers)
        assert result.exit_code == 0, result.output
        accuracies[workers] = [r["test_acc"] for r in sorted(rows(tmp_path / name), key=lambda r: r["seed"])]
    assert min(accuracies[1] + accuracies[2]) >= 0.5, accuracies  # chance: 10%
    spread = max(max(a) - min(a) for a in accuracies.values())
    gap = abs(sum(accuracies[1]) - sum(accuracies[2])) / 2
    assert gap <= max(spread, 0.05), accuracies
