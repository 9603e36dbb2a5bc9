"""Cells trained side by side in single-thread processes of this machine (executors.execute's
`cell_processes`, what `roarfast run` uses on a CPU): each cell trained once and recorded by the sweep's
process, with the accuracies the same cells reach trained one after another at one thread; more cells of the
configuration trained with other threads (--threads-per-cell) record them, and a line says so."""

import os
import shutil
import subprocess
import sys
from types import SimpleNamespace

import pytest

from roarfast.stages.cells import Cell
from roarfast.errors import UserError
from roarfast.execution.executors import execute
from roarfast.planning.grid import Grid
from roarfast.results import ResultsDB
from roarfast.rundir.directory import RunDir
from roarfast.orchestration.sweep import run_sweep

DATA = ["--data-option", "num_train=384", "--data-option", "num_test=128"]
#: random and sobel x roar x 0.5 x 2 seeds, a control for seed 0 of each: 6 cells
GRID = dict(methods="random,sobel", modes=("roar",), fractions=(0.5,), seeds=2, control_seeds=1, epochs=1)


def cli(*args, env=None):
    result = subprocess.run([sys.executable, "-m", "roarfast.cli", *args], capture_output=True, text=True,
                            timeout=600, env={**os.environ, **(env or {})})
    assert result.returncode == 0, result.stderr[-3000:]
    return result


def rows(run_dir) -> dict:
    with ResultsDB(RunDir(run_dir).results_path) as db:
        return {(r["method"], r["mode"], r["seed"]): r for r in db.rows()}


def test_cells_in_single_thread_processes_equal_cells_trained_here_at_one_thread(tmp_path):
    prepared = tmp_path / "prepared"  # a base model and the ranks, copied for each way
    cli("train", "--epochs", "1", *DATA, "--run-dir", str(prepared), "--no-progress")
    cli("extract", "--method", "random,sobel", "--run-dir", str(prepared), "--no-progress")
    for name in ("here", "processes"):
        shutil.copytree(prepared, tmp_path / name)
    cli("sweep", "--run-dir", str(tmp_path / "here"), "--method", "random,sobel", "--mode", "roar", "--fraction", "0.5",
        "--seeds", "2", "--control-seeds", "1", "--epochs", "1", "--no-progress", env={"OMP_NUM_THREADS": "1"})
    lines = []
    run_sweep(tmp_path / "processes", Grid(**GRID), progress=False, echo=lines.append, cell_processes=2)
    here, processes = rows(tmp_path / "here"), rows(tmp_path / "processes")
    assert len(processes) == 6 and {r["status"] for r in processes.values()} == {"done"}
    assert {key: r["test_acc"] for key, r in processes.items()} == {key: r["test_acc"] for key, r in here.items()}
    assert {r["threads"] for r in processes.values()} == {1}
    assert sum(line.startswith("[sweep] ") and "/6 " in line for line in lines) == 6  # one progress line a cell
    # a third seed, each cell trained with the 2 threads asked for: its rows record them, and a line says that the
    # done cells of the configuration trained with another count
    lines.clear()
    run_sweep(tmp_path / "processes", Grid(**{**GRID, "seeds": 3}), progress=False, echo=lines.append,
              threads_per_cell=2)
    third = {key: r["threads"] for key, r in rows(tmp_path / "processes").items() if key[2] == 2}
    assert third == {("random", "roar", 2): 2, ("sobel", "roar", 2): 2}
    assert ("[sweep] 6 done cell(s) of this configuration trained with other CPU thread counts (6 with 1 thread) than "
            "those left will (2): CPU accuracies depend on it, and the report says so; --threads-per-cell sets it"
            ) in lines


@pytest.mark.parametrize("device, options", [("cpu", dict(group_size=2)), ("cpu", dict(executor="ray")),
                                             ("cpu", dict(workers_per_cell=2)), ("cuda", {})])
def test_cell_processes_refuse_the_other_ways_of_training_cells(tmp_path, device, options):
    trainer = SimpleNamespace(device=device)  # refused before anything of the trainer is used
    with ResultsDB(tmp_path / "r.sqlite") as db:
        with pytest.raises(UserError, match="2 cell processes train one cell"):
            execute(trainer, [(Cell("random", "roar", 0.5, 0), None)], db, cell_processes=2, **options)
        assert db.rows() == []  # nothing claimed
