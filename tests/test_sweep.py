"""`roarfast sweep`: the grid, the plan, resumption after kill -9, two processes sharing a run directory,
the Ray executor, and bad input that writes nothing."""

import os
import re
import shutil
import signal
import subprocess
import sys
import time

import pytest
import torch
from click.testing import CliRunner

from roarfast.cli import main
from roarfast.data import load_dataset
from roarfast.planning.grid import Grid, preset_grid
from roarfast.results import ResultsDB
from roarfast.rundir.directory import RunDir

pytestmark = pytest.mark.minutes(4)  # on 2 cores: collected early (tests/conftest.py)

DATA = ["--data-option", "num_train=384", "--data-option", "num_test=128"]
#: 2 methods x roar x 1 fraction x 3 seeds + a control for seed 0 of each = 8 cells
GRID = ["--method", "random,sobel", "--mode", "roar", "--fraction", "0.5", "--seeds", "3", "--control-seeds", "1",
        "--epochs", "1", "--no-progress"]
CELLS = 8
LINE = re.compile(r"^\[sweep\] \d+/\d+ (.+): [\d.]+% ")


def cli(*args, timeout=600):
    return subprocess.run([sys.executable, "-m", "roarfast.cli", *args], capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    """A run directory with a (one-epoch) base model and random/sobel ranks, to copy per test."""
    run_dir = tmp_path_factory.mktemp("sweep") / "base"
    for args in (["train", "--epochs", "1", *DATA], ["extract", "--method", "random,sobel"]):
        result = cli(*args, "--run-dir", str(run_dir), "--no-progress")
        assert result.returncode == 0, result.stderr
    return run_dir


def copy_of(prepared, tmp_path, name="run"):
    target = tmp_path / name
    shutil.copytree(prepared, target)
    return target


def results(run_dir):
    return RunDir(run_dir).results_path


def accuracies(run_dir) -> dict:
    with ResultsDB(results(run_dir)) as db:
        rows = db.rows()
    assert all(r["status"] == "done" for r in rows), [(r["method"], r["status"]) for r in rows]
    keys = [(r["method"], r["mode"], r["fraction"], r["seed"]) for r in rows]
    assert len(keys) == len(set(keys)), "one row per cell"
    return {key: r["test_acc"] for key, r in zip(keys, rows)}


def test_grid_expands_cells_with_controls_and_presets_hold_the_paper_study():
    cells = Grid(methods="sobel", modes=("roar", "kar"), fractions=(0.1, 0.5), seeds=2, control_seeds=1).cells()
    # random joins every grid as the reference; the control follows its cell, for seed 0 only
    assert [c.describe() for c in cells[:3]] == ["random roar 0.1 seed 0", "random roar-mask 0.1 seed 0",
                                                 "random roar 0.1 seed 1"]
    assert len(cells) == 2 * 2 * 2 * 2 + 2 * 2 * 2
    paper = preset_grid("paper")
    assert len([c for c in paper.cells() if not c.control]) == 700
    assert sum(c.control for c in paper.cells()) == 700


@pytest.fixture(scope="module")
def uninterrupted(prepared, tmp_path_factory) -> dict:
    """The grid planned (a dry run), swept here without interruption, cells trained one at a time with the
    defaults, then planned again: {"run_dir" (to read, not to change), "planned", "swept", "again"} (the commands'
    results)."""
    run_dir = copy_of(prepared, tmp_path_factory.mktemp("uninterrupted"), "reference")
    planned = cli("sweep", "--run-dir", str(run_dir), *GRID, "--dry-run")
    assert planned.returncode == 0, planned.stderr
    written_by_the_plan = results(run_dir).exists()
    swept = cli("sweep", "--run-dir", str(run_dir), *GRID)
    assert swept.returncode == 0, swept.stderr
    again = cli("sweep", "--run-dir", str(run_dir), *GRID, "--dry-run")
    return {"run_dir": run_dir, "planned": planned, "written_by_the_plan": written_by_the_plan, "swept": swept,
            "again": again}


def test_dry_run_plans_without_writing_then_reports_progress(uninterrupted):
    run_dir, result = uninterrupted["run_dir"], uninterrupted["planned"]
    assert f"done: 0, to do: {CELLS}" in result.stdout
    assert re.search(r"ETA: \S+: cells \S+ \(a (step measured|training here)", result.stdout), result.stdout
    assert not uninterrupted["written_by_the_plan"]
    # 1 epoch of 384 images is a few optimizer steps: the dry run warns, and the sweep says so again before training
    assert "the cells would train" in result.stdout, result.stdout
    result = uninterrupted["swept"]
    assert re.search(r"^\[sweep\] warning: the cells would train \d+ optimizer steps", result.stdout, re.M), result.stdout
    finished = [LINE.match(line).group(1) for line in result.stdout.splitlines() if LINE.match(line)]
    assert len(finished) == CELLS and "sobel roar-mask 0.5 seed 0" in finished
    # the sweep's ETA starts from the dry run's estimate: known before the first cell, and after every one
    assert re.search(r"\[sweep\] ETA: \S+ \(estimated from the step times kept on this machine", result.stdout)
    assert "ETA unknown" not in result.stdout and "ETA: unknown" not in result.stdout, result.stdout
    again = uninterrupted["again"]
    assert f"done: {CELLS}, to do: 0" in again.stdout and "ETA: 0s (nothing left to do)" in again.stdout
    # every row records what its control's leakage test needs, so the report never opens the dataset for it
    labels = load_dataset("embedded", num_train=384, num_test=128).test.labels.tolist()
    chance = max(labels.count(c) for c in set(labels)) / 128
    with ResultsDB(results(run_dir)) as db:
        assert {(r["extra"]["test_images"], r["extra"]["test_chance"]) for r in db.rows()} == {(128, chance)}


@pytest.mark.parametrize("group", [[], ["--group-size", "3"]], ids=["alone", "groups-of-3"])
def test_kill_9_then_rerun_gives_one_row_per_cell_and_the_uninterrupted_accuracies(prepared, uninterrupted, tmp_path,
                                                                                   group):
    """Killed while a cell (or a group of cells trained together) trains, after one finished: the rerun trains
    what is left, and every row equals the uninterrupted run's, cells trained one at a time."""
    run_dir = copy_of(prepared, tmp_path, "killed")
    proc = subprocess.Popen([sys.executable, "-m", "roarfast.cli", "sweep", "--run-dir", str(run_dir), *GRID, *group],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 300
    try:
        while time.monotonic() < deadline:  # kill it while it trains, after it finished a cell
            if results(run_dir).exists():
                with ResultsDB(results(run_dir)) as db:
                    statuses = [r["status"] for r in db.rows()]
                if "done" in statuses and "running" in statuses:
                    break
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait()
    with ResultsDB(results(run_dir)) as db:
        assert 0 < len(db.rows(status="done")) < CELLS
    result = cli("sweep", "--run-dir", str(run_dir), *GRID, *group)
    assert result.returncode == 0, result.stderr
    assert accuracies(run_dir) == accuracies(uninterrupted["run_dir"])


def test_two_sweeps_split_the_grid_and_never_train_a_cell_twice(prepared, tmp_path):
    run_dir = copy_of(prepared, tmp_path)
    grid = [*GRID[:GRID.index("--seeds")], "--seeds", "5", *GRID[GRID.index("--seeds") + 2:]]
    args = [sys.executable, "-m", "roarfast.cli", "sweep", "--run-dir", str(run_dir), *grid]
    first = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300
    while not results(run_dir).exists() and time.monotonic() < deadline:
        time.sleep(0.05)  # the second starts once the first holds a claim
    second = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    outputs = [p.communicate(timeout=600) for p in (first, second)]
    assert first.returncode == 0 and second.returncode == 0, [o[1][-2000:] for o in outputs]
    trained = [{LINE.match(line).group(1) for line in out.splitlines() if LINE.match(line)} for out, _ in outputs]
    assert not trained[0] & trained[1], "a cell was trained by both"
    assert len(trained[0] | trained[1]) == 2 * 5 + 2
    assert len(accuracies(run_dir)) == 2 * 5 + 2


def test_two_sweeps_on_a_fresh_run_directory_build_the_base_model_and_the_ranks_once(tmp_path):
    """Both start before either has a base model: one trains it and extracts grad's ranks while the other
    waits, then both share the grid."""
    run_dir = tmp_path / "fresh"
    grid = ["--method", "grad", "--mode", "roar", "--fraction", "0.5", "--seeds", "2", "--no-control", "--epochs", "1",
            "--no-progress"]
    args = [sys.executable, "-m", "roarfast.cli", "sweep", "--run-dir", str(run_dir), *DATA, *grid]
    sweeps = [subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outputs = [p.communicate(timeout=600) for p in sweeps]
    assert [p.returncode for p in sweeps] == [0, 0], [err[-2000:] for _, err in outputs]
    said = "\n".join(out for out, _ in outputs)
    assert said.count("[sweep] base model: val") == 1 and said.count("[sweep] base model: reusing") == 1, said
    # extracted once; whether the other sweep waited on the ranks' claim or found them done depends on timing
    assert said.count("[sweep] extract: random, grad") == 1, said
    run = RunDir(run_dir)
    for split in ("train", "test"):  # the ranks were made with the checkpoint the run directory holds
        assert run.rank_store.manifest("grad", split)["checkpoint_sha256"] == run.base_checkpoint_sha256()
    assert len(accuracies(run_dir)) == 2 * 2  # random and grad x 2 seeds, one row each


def test_ray_executor_gives_the_local_rows_with_the_defaults(prepared, uninterrupted, tmp_path):
    pytest.importorskip("ray")
    local = uninterrupted["run_dir"]
    on_ray = copy_of(prepared, tmp_path, "ray")
    result = cli("sweep", "--run-dir", str(on_ray), *GRID, "--executor", "ray")  # no --cpus-per-cell
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    assert accuracies(on_ray) == accuracies(local)
    for run_dir in (local, on_ray):  # each row says how many threads it trained with: the local default
        with ResultsDB(results(run_dir)) as db:
            assert {r["threads"] for r in db.rows()} == {torch.get_num_threads()}


@pytest.mark.parametrize("args, message", [
    (["--preset", "huge"], "'huge' is not one of"),
    (["--executor", "slurm"], "'slurm' is not one of"),
    (["--fraction", "1.5"], "fractions must lie in (0, 1]"),
    (["--fraction", "0"], "fractions must lie in (0, 1]"),
    (["--mode", "roar,keep"], "modes are roar and kar"),
    (["--seeds", "0"], "should be a positive int"),
    (["--seeds", "many"], "expected a number of seeds or `auto`, got 'many'"),
    (["--max-seeds", "5"], "--max-seeds caps --seeds auto: add --seeds auto"),
    (["--margin", "0"], "'--margin': 0.0 is not in the range 0<x<100"),
    (["--epochs", "0"], "--epochs should be a positive int"),
    (["--control-seeds", "0"], "--control-seeds should be a positive int"),
    (["--fill", "blur"], "'blur' is not one of"),
    (["--executor", "ray", "--cpus-per-cell", "0"], "--cpus-per-cell must be > 0"),
    (["--method", "sg-nope"], "sg-nope"),
])
def test_bad_input_is_one_line_and_writes_nothing(tmp_path, args, message):
    run_dir = tmp_path / "run"
    result = CliRunner().invoke(main, ["sweep", "--run-dir", str(run_dir), *DATA, *args])
    assert result.exit_code != 0 and message in result.output, result.output
    assert "Traceback" not in result.output
    assert not results(run_dir).exists()


def test_ray_asked_for_but_missing_says_how_to_install(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray -> ImportError
    run_dir = tmp_path / "run"
    result = CliRunner().invoke(main, ["sweep", "--run-dir", str(run_dir), "--executor", "ray", *DATA])
    assert result.exit_code != 0 and "roarfast[ray]" in result.output, result.output
    assert not results(run_dir).exists()


def test_unknown_config_key_is_refused(tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text("sweep: {seeds: 2, sedes: 3}\n")
    result = CliRunner().invoke(main, ["--config", str(config), "sweep", "--run-dir", str(tmp_path / "run")])
    assert result.exit_code != 0 and "sedes" in result.output
    assert not results(tmp_path / "run").exists()
