"""Cells on a local multi-node Ray cluster (tests/cluster.py: a head without CPUs, worker nodes of 1 CPU):
they spread over the nodes and each row names the node that trained it; a node removed mid-run has its cell
run again on another (or, every worker node lost, on one that joins later, the driver saying that it waits and
when work resumes), each cell ends with one row and nothing stays claimed; a node that joins a running sweep gets
the next cell; a cell that raises is marked failed once, never run again; a driver killed mid-run
leaves claims that a rerun takes over and finishes; a data-parallel cell trains on one node's CPUs; a cell trains
with the threads asked for on nodes with fewer CPUs, which a line says. The tests
that change their cluster (nodes removed or added, a 2-CPU node) start their own and come first; the others
share one."""

import re
import shutil
import socket

import pytest
from click.testing import CliRunner

from roarfast.cli import main
from tests.cluster import (JOIN_S, MODEL, OBJECT_STORE_BYTES, assert_each_cell_once_and_nothing_claimed,
                           driven, local_cluster, losing_node, ray_or_skip, roarfast, rows, start_roarfast, wait_for)

pytestmark = pytest.mark.minutes(6)  # on 2 cores: collected early (tests/conftest.py)

#: 160 images: 144 train after the validation split, so that a batch of 128 splits between two workers
DATA = ["--data-option", "num_train=160", "--data-option", "num_test=64"]
#: random x roar x 2 fractions x 2 seeds, no controls: 4 cells of one epoch
GRID = ["--method", "random", "--mode", "roar", "--fraction", "0.25,0.75", "--seeds", "2", "--no-control",
        "--epochs", "1", "--model", MODEL, "--no-progress"]
CELLS = 4
#: two cells (one fraction): one for each node of the join test
TWO = [*GRID[:GRID.index("--fraction") + 1], "0.25", *GRID[GRID.index("--fraction") + 2:]]
#: the driver's line when the cells wait for a node (every worker node lost)
WAITS = "[sweep] Ray: no live node can run a cell (1 CPU): waiting for a node to join"
#: its line when the cluster has no worker node yet
EMPTY = "[sweep] Ray: no live node has CPUs or GPUs: waiting for a node to join"


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    """A run directory with a one-epoch base model of the sweeps' model, which they reuse, and random's ranks, to copy
    per test."""
    ray_or_skip()
    run_dir = tmp_path_factory.mktemp("cluster") / "base"
    for args in (["train", "--epochs", "1", "--model", MODEL, *DATA], ["extract", "--method", "random"]):
        result = CliRunner().invoke(main, [*args, "--run-dir", str(run_dir), "--no-progress"])
        assert result.exit_code == 0, result.output
    return run_dir


def copy_of(prepared, tmp_path):
    return shutil.copytree(prepared, tmp_path / "run")


def sweep(run_dir, cluster, *extra, grid=GRID):
    return ["sweep", "--run-dir", str(run_dir), *grid, "--executor", "ray", "--address", cluster.address, *extra]


def sweep_losing(run_dir, cluster, lost, observed, log, then=lambda: None) -> str:
    """Runs the sweep in a driver of its own, removes the node `lost` while one of its cells is in flight (its
    cells pause until it goes), runs `then()`, and returns what the driver said once it succeeded."""
    return losing_node(sweep(run_dir, cluster), cluster, lost, observed, log, "a cell on the node", then)


def test_a_removed_nodes_cell_runs_again_on_another_node(prepared, tmp_path):
    run_dir = copy_of(prepared, tmp_path)
    with local_cluster(tmp_path / "cluster", nodes=2) as (cluster, (lost, kept), observed):
        said = sweep_losing(run_dir, cluster, lost, observed, tmp_path / "driver.log")
        found = assert_each_cell_once_and_nothing_claimed(run_dir, CELLS)
    assert "FAILED" not in said
    # the cell that was in flight on the lost node finished on the other, like every cell
    assert {r["extra"]["ray_node"] for r in found} == {kept.node_id}


def test_when_every_worker_node_is_lost_the_cells_wait_for_a_new_one(prepared, tmp_path):
    run_dir = copy_of(prepared, tmp_path)
    joined = []
    log = tmp_path / "driver.log"

    def replace_it():
        # no node with a CPU now: the lost node's task waits to run again, and the driver says it waits
        wait_for(lambda: WAITS in log.read_text(), "the driver's line that it waits for a node")
        assert "FAILED" not in log.read_text(), log.read_text()[-3000:]
        joined.append(cluster.add_node(num_cpus=1, object_store_memory=OBJECT_STORE_BYTES))

    with local_cluster(tmp_path / "cluster", nodes=1) as (cluster, (lost,), observed):
        said = sweep_losing(run_dir, cluster, lost, observed, log, then=replace_it)
        found = assert_each_cell_once_and_nothing_claimed(run_dir, CELLS)
    assert {r["extra"]["ray_node"] for r in found} == {joined[0].node_id}
    assert f"[sweep] Ray: node {lost.node_id[:8]} left: its 1 task(s) in flight run again on another node" in said
    assert re.search(rf"\[sweep\] Ray: node {joined[0].node_id[:8]} \(.+\) joined with 1 CPU: work resumes after "
                     rf"(\d+m)?[0-9.]+s of waiting", said), said[-3000:]


def test_a_sweep_waits_for_a_node_and_a_node_that_joins_gets_cells(prepared, tmp_path):
    """A cluster with no worker node yet: the driver says it waits, then when work resumes and after how long. A node
    that joins while every cell in flight holds the other node gets the next cell (within JOIN_S: the driver's next
    look, then its worker's start), and the driver says it joined; the rows (two cells) name both nodes."""
    run_dir = copy_of(prepared, tmp_path)
    log = tmp_path / "driver.log"
    with local_cluster(tmp_path / "cluster", nodes=0) as (cluster, _, observed):
        observed.pause({"*": 600})  # each cell holds its node until released

        def meanwhile():
            wait_for(lambda: EMPTY in log.read_text(), "the driver's line that it waits for a node")
            nodes.append(cluster.add_node(num_cpus=1, object_store_memory=OBJECT_STORE_BYTES))
            # the first cell, claimed once the driver has looked at the nodes, is sent to the first node and holds
            # its one CPU from then: the second node joins while the first one's worker still starts (side by side:
            # the test's seconds saved), and the driver sees it join at its next look
            wait_for(lambda: any(r["status"] == "running" for r in rows(run_dir)), "the first cell claimed")
            nodes.append(cluster.add_node(num_cpus=1, object_store_memory=OBJECT_STORE_BYTES))
            wait_for(lambda: observed.started_on(nodes[1]), "a cell on the node that joined", timeout=JOIN_S)
            observed.pause({})
        nodes = []
        said = driven(sweep(run_dir, cluster, grid=TWO), log, meanwhile)
        first, second = nodes
        found = assert_each_cell_once_and_nothing_claimed(run_dir, 2)
    assert re.search(rf"\[sweep\] Ray: node {first.node_id[:8]} \(.+\) joined with 1 CPU: work resumes after "
                     rf"(\d+m)?[0-9.]+s of waiting", said), said[-3000:]
    assert re.search(rf"\[sweep\] Ray: node {second.node_id[:8]} \(.+\) joined: 1 task\(s\) at a time there", said)
    assert {r["extra"]["ray_node"] for r in found} == {first.node_id, second.node_id}


@pytest.mark.slow
def test_a_data_parallel_cell_trains_on_one_nodes_cpus(prepared, tmp_path):
    run_dir = copy_of(prepared, tmp_path)
    one_cell = [*GRID[:GRID.index("--fraction")], "--fraction", "0.5", "--seeds", "1",
                *GRID[GRID.index("--no-control"):]]
    with local_cluster(tmp_path / "cluster", nodes=1, cpus=2) as (cluster, (node,), _):
        result = roarfast(*sweep(run_dir, cluster, "--workers-per-cell", "2", grid=one_cell))
        assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
        (row,) = assert_each_cell_once_and_nothing_claimed(run_dir, 1)
    assert row["extra"]["workers"] == 2 and row["extra"]["ray_node"] == node.node_id
    assert row["threads"] == 1  # each worker one of the cell's two CPUs



@pytest.fixture(scope="module")
def two_nodes(tmp_path_factory):
    """A cluster of two 1-CPU worker nodes, for the tests that remove none: (Cluster, nodes, Observed)."""
    with local_cluster(tmp_path_factory.mktemp("nodes"), nodes=2) as started:
        yield started


def test_cells_spread_over_the_nodes_and_each_row_names_its_node(prepared, two_nodes, tmp_path):
    run_dir = copy_of(prepared, tmp_path)
    cluster, nodes, observed = two_nodes
    observed.pause({})
    result = roarfast(*sweep(run_dir, cluster, "--threads-per-cell", "2"))
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    found = assert_each_cell_once_and_nothing_claimed(run_dir, CELLS)
    # two cells of one CPU each are in flight at once, one on each 1-CPU node, each with the threads asked for
    assert {r["extra"]["ray_node"] for r in found} == {node.node_id for node in nodes}
    assert {r["extra"]["host"] for r in found} == {socket.gethostname()}
    assert {r["threads"] for r in found} == {2}
    assert "[sweep] Ray: a cell computes with 2 threads" in result.stdout, result.stdout[-2000:]
    # a data-parallel cell's two workers share one node: none of these has two CPUs
    refused = roarfast(*sweep(run_dir, cluster, "--fraction", "0.9", "--workers-per-cell", "2"))
    assert refused.returncode != 0 and "Traceback" not in refused.stderr
    assert ("a cell asks for 2 CPUs (2 worker(s) x 1) on one node, and the largest node of the Ray cluster has 1"
            in refused.stderr), refused.stderr[-2000:]
    assert len(rows(run_dir)) == CELLS  # the refused cell was never claimed


def test_a_killed_driver_leaves_claims_that_a_rerun_takes_over(prepared, two_nodes, tmp_path):
    run_dir = copy_of(prepared, tmp_path)
    cluster, _, observed = two_nodes
    observed.pause({"*": 3})  # cells long enough to be in flight when the driver dies
    driver = start_roarfast(*sweep(run_dir, cluster), log=tmp_path / "driver.log")
    try:
        wait_for(lambda: any(r["status"] == "done" for r in rows(run_dir)), "a finished cell")
    finally:
        driver.kill()  # SIGKILL: no claim given back
        driver.wait()
    left = rows(run_dir)
    done = {(r["fraction"], r["seed"]): (r["test_acc"], r["finished"]) for r in left if r["status"] == "done"}
    assert any(r["status"] == "running" for r in left), "no cell was in flight when the driver died"
    observed.pause({})
    result = roarfast(*sweep(run_dir, cluster))
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    found = assert_each_cell_once_and_nothing_claimed(run_dir, CELLS)
    # the dead driver's claims were taken over at once (its process is gone), its finished cells kept as they were
    assert "waiting for the cells" not in result.stdout
    after = {(r["fraction"], r["seed"]): (r["test_acc"], r["finished"]) for r in found}
    assert {key: after[key] for key in done} == done


def test_a_cell_that_raises_is_marked_failed_not_run_again(prepared, two_nodes, tmp_path):
    run_dir = copy_of(prepared, tmp_path)
    cluster, _, observed = two_nodes
    before = len(observed.builds())
    observed.pause({"fail": "the model cannot be built"})
    try:
        result = roarfast(*sweep(run_dir, cluster))
    finally:
        observed.pause({})
    assert result.returncode != 0 and "Traceback" not in result.stderr
    assert "4 cell(s) failed on Ray" in result.stderr and "the same command retries them" in result.stderr
    found = rows(run_dir)
    assert len(found) == CELLS and {r["status"] for r in found} == {"failed"}
    assert all("the model cannot be built" in r["error"] for r in found)
    assert len(observed.builds()) - before == CELLS  # each task ran once: a raising cell is no node failure


def test_a_relative_run_directory_is_found_by_every_node(prepared, two_nodes, tmp_path):
    """The driver names the run directory relative to where it works; the Ray workers, each in a working
    directory of its own, find it at the absolute path the driver hands them (they used to look for it in their
    own directory, and fail every cell for want of ranks)."""
    copy_of(prepared, tmp_path)
    cluster, nodes, observed = two_nodes
    observed.pause({})
    result = roarfast(*sweep("run", cluster), cwd=tmp_path)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    found = assert_each_cell_once_and_nothing_claimed(tmp_path / "run", CELLS)
    assert {r["extra"]["ray_node"] for r in found} <= {node.node_id for node in nodes}
