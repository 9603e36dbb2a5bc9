"""Extraction on a local multi-node Ray cluster (tests/cluster.py: a head without CPUs, worker nodes of 1 CPU):
each chunk of a split is a task, the chunks spread over the nodes, and the store the driver writes holds the
bytes of a local extraction's; a node removed while it computes a chunk has that chunk computed on another, each
chunk written once; a node that joins a running extraction gets the next chunk; a driver killed mid-extraction
leaves a store that the same command finishes, computing only the chunks left (here a sweep, whose cells then
train on the cluster too). The tests that remove or add a node
start their own cluster and come first; the others share one."""

import filecmp
import re
import shutil

import pytest
from click.testing import CliRunner

from roarfast.cli import main
from roarfast.records.access import Records
from roarfast.records.ranks import MANIFEST, RankStoreRecord
from tests.cluster import (JOIN_S, MODEL, OBJECT_STORE_BYTES, assert_each_cell_once_and_nothing_claimed, local_cluster,
                           driven, losing_node, ray_or_skip, roarfast, start_roarfast, wait_for)

pytestmark = pytest.mark.minutes(2.5)  # on 2 cores: collected early (tests/conftest.py)

#: 256 images: 192 train (6 chunks of 32), 64 test (2 chunks); chunks hold whole compute batches, made 32 images
#: (the device's default is 256: one chunk a split)
DATA = ["--data-option", "num_train=192", "--data-option", "num_test=64"]
CHUNK = ["--chunk-images", "32", "--compute-batch", "32"]
CHUNKS = 8
#: two cheap methods and a gradient one, computed together chunk by chunk
METHODS = "random,sobel,grad"
EXTRACT = ["extract", "--method", METHODS, *CHUNK, "--model", MODEL, "--no-progress"]


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    """(a run directory with a one-epoch base model, to copy per test; a copy of it where METHODS were extracted
    here, with this process's thread count, which a Ray task computes with by default on nodes of any size)."""
    ray_or_skip()
    folder = tmp_path_factory.mktemp("extract")
    base = folder / "base"
    result = CliRunner().invoke(main, ["train", "--epochs", "1", *DATA, "--model", MODEL, "--run-dir", str(base),
                                       "--no-progress"])
    assert result.exit_code == 0, result.output
    local = shutil.copytree(base, folder / "local")
    result = CliRunner().invoke(main, [*EXTRACT, "--run-dir", str(local)])
    assert result.exit_code == 0, result.output
    return base, local


def extract_on(cluster, run_dir, *extra):
    return [*EXTRACT, "--run-dir", str(run_dir), "--executor", "ray", "--address", cluster.address, *extra]


def chunks_on_nodes(said: str) -> dict:
    """{node id's first 8 hex: chunks} from the driver's line "extract: N chunk(s) on Ray, T thread(s) each: a on
    node X, ..."."""
    (line,) = [line for line in said.splitlines() if " chunk(s) on Ray, " in line]
    parts = line.split(" each: ")[1].split(", ")
    return {part.split(" on node ")[1]: int(part.split(" on node ")[0]) for part in parts}


def manifest(store):
    """The manifest of the rank store `store` (`.../<split>`), read back verified (None before it exists)."""
    return Records(store).get(RankStoreRecord, at=store / MANIFEST)


def assert_stores_equal(run_dir, local, methods=METHODS.split(",")) -> None:
    """Every rank file of `methods` in run_dir equals the local extraction's byte for byte, and each store's
    manifest lists every chunk done once, with the local one's checksums."""
    for method in methods:
        for ranks in sorted((local / "ranks" / method).rglob("ranks.npy")):
            twin = run_dir / ranks.relative_to(local)
            assert filecmp.cmp(ranks, twin, shallow=False), twin
            here, there = manifest(twin.parent), manifest(ranks.parent)
            assert here["complete"] and here["chunks_done"] == [[0, len(here["checksums"])]]
            assert here["checksums"] == there["checksums"]


def test_a_removed_nodes_chunk_is_computed_on_another_node(prepared, tmp_path):
    base, local = prepared
    run_dir = shutil.copytree(base, tmp_path / "run")
    with local_cluster(tmp_path / "cluster", nodes=2) as (cluster, (lost, kept), observed):
        said = losing_node(extract_on(cluster, run_dir), cluster, lost, observed, tmp_path / "driver.log",
                           "a chunk on the node")
    # every chunk came back once, all from the node kept (the lost one's was computed there again)
    assert chunks_on_nodes(said) == {kept.node_id[:8]: CHUNKS}
    assert_stores_equal(run_dir, local)


@pytest.mark.slow  # the placement that test_cluster_cells.py's join test checks on cells: a minute more for CI
def test_a_node_that_joins_a_running_extraction_gets_chunks(prepared, tmp_path):
    """While the chunk in flight holds the only node, a node that joins gets the next chunk (within JOIN_S: the
    driver's next look, then its worker's start), and the driver says it joined; the store is a local extraction's."""
    base, local = prepared
    run_dir = shutil.copytree(base, tmp_path / "run")
    log = tmp_path / "driver.log"
    with local_cluster(tmp_path / "cluster", nodes=1) as (cluster, (first,), observed):
        observed.pause({"forward": 600})  # each chunk holds its node until released

        def meanwhile():
            wait_for(lambda: observed.started_on(first), "a chunk on the first node")
            joined.append(cluster.add_node(num_cpus=1, object_store_memory=OBJECT_STORE_BYTES))
            wait_for(lambda: observed.started_on(joined[0]), "a chunk on the node that joined", timeout=JOIN_S)
            observed.pause({})
        joined = []
        said = driven(extract_on(cluster, run_dir), log, meanwhile)
    (second,) = joined
    assert re.search(rf"extract: Ray: node {second.node_id[:8]} \(.+\) joined: 1 task\(s\) at a time there", said)
    spread = chunks_on_nodes(said)
    assert set(spread) == {first.node_id[:8], second.node_id[:8]} and sum(spread.values()) == CHUNKS
    assert_stores_equal(run_dir, local)


@pytest.fixture(scope="module")
def two_nodes(tmp_path_factory):
    """A cluster of two 1-CPU worker nodes, for the tests that remove none: (Cluster, nodes, Observed)."""
    with local_cluster(tmp_path_factory.mktemp("nodes"), nodes=2) as started:
        yield started


def test_chunks_spread_over_the_nodes_and_the_store_equals_a_local_extraction(prepared, two_nodes, tmp_path):
    base, local = prepared
    run_dir = shutil.copytree(base, tmp_path / "run")
    cluster, nodes, observed = two_nodes
    observed.pause({})
    result = roarfast(*extract_on(cluster, run_dir))
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    spread = chunks_on_nodes(result.stdout)
    assert set(spread) == {node.node_id[:8] for node in nodes} and sum(spread.values()) == CHUNKS
    assert_stores_equal(run_dir, local)
    # a task that cannot be scheduled anywhere is refused before any chunk is computed
    refused = roarfast(*extract_on(cluster, run_dir, "--gpus-per-task", "1"))
    assert refused.returncode != 0 and "Traceback" not in refused.stderr
    assert ("an extraction task asks for 1 GPUs on one node, and the largest node of the Ray cluster has 0: lower "
            "--gpus-per-task") in refused.stderr, refused.stderr[-2000:]


def test_a_relative_run_directory_is_extracted_into_by_every_node(prepared, two_nodes, tmp_path):
    """The driver names the run directory relative to where it works; each Ray worker, in a working directory of
    its own, reads it at the absolute path the driver hands it (it used to find no dataset record there and fail
    on it), and the store holds a local extraction's bytes."""
    base, local = prepared
    shutil.copytree(base, tmp_path / "run")
    cluster, _, observed = two_nodes
    observed.pause({})
    result = roarfast(*extract_on(cluster, "run"), cwd=tmp_path)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    assert sum(chunks_on_nodes(result.stdout).values()) == CHUNKS
    assert_stores_equal(tmp_path / "run", local)


def done_chunks(run_dir, method: str, split: str) -> int:
    """The chunks done in `method`'s store of `split` (0 before it exists)."""
    manifests = [manifest(store) for store in (run_dir / "ranks" / method).glob(f"*/{split}")]
    return sum(stop - start for manifest in manifests if manifest for start, stop in manifest["chunks_done"])


def test_a_killed_driver_leaves_a_store_that_the_same_sweep_finishes(prepared, two_nodes, tmp_path):
    base, local = prepared
    run_dir = shutil.copytree(base, tmp_path / "run")
    cluster, _, observed = two_nodes
    sweep = ["sweep", "--run-dir", str(run_dir), "--method", "grad", "--mode", "roar", "--fraction", "0.5",
             "--seeds", "1", "--no-control", "--epochs", "1", "--model", MODEL, *CHUNK, "--no-progress",
             "--executor", "ray", "--address", cluster.address]
    observed.pause({"forward": 1})  # a second per chunk: the driver dies with chunks done and chunks left
    driver = start_roarfast(*sweep, log=tmp_path / "driver.log")
    try:
        # both methods' chunk: a chunk's ranks are written method after method, so one may be a chunk behind
        wait_for(lambda: all(done_chunks(run_dir, m, "train") for m in ("grad", "random")), "a chunk of each written")
    finally:
        driver.kill()  # SIGKILL: the store's lock and the claim on its ranks go with it
        driver.wait()
    done = {m: done_chunks(run_dir, m, "train") + done_chunks(run_dir, m, "test") for m in ("grad", "random")}
    assert 0 < min(done.values()) and max(done.values()) < CHUNKS, done
    observed.pause({})
    result = roarfast(*sweep)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    # the rerun computed the chunks left alone, and the stores hold what a local extraction writes
    assert sum(chunks_on_nodes(result.stdout).values()) == CHUNKS - min(done.values())
    assert_stores_equal(run_dir, local, ["grad", "random"])
    assert_each_cell_once_and_nothing_claimed(run_dir, 2)  # grad's cell and random's


def test_a_study_on_ray_extracts_and_trains_its_cells_on_the_cluster(prepared, two_nodes, tmp_path):
    from roarfast import Study

    base, local = prepared
    run_dir = shutil.copytree(base, tmp_path / "run")
    cluster, nodes, observed = two_nodes
    observed.pause({})
    study = Study(run_dir, model=MODEL, methods=["grad"], fractions=[0.5], modes=["roar"], seeds=1, control=False,
                  epochs=1, extract_options={"chunk_images": 32, "compute_batch": 32}, progress=False, executor="ray",
                  ray={"address": cluster.address})
    cells = study.run()
    assert_stores_equal(run_dir, local, ["grad", "random"])
    found = assert_each_cell_once_and_nothing_claimed(run_dir, 2)
    assert {r["extra"]["ray_node"] for r in found} <= {node.node_id for node in nodes}
    assert sorted(cells["method"]) == ["grad", "random"]
