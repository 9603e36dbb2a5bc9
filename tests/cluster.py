"""A local multi-node Ray cluster for the tests, and what they observe of a run directory after it.

`local_cluster` starts `ray.cluster_utils.Cluster` on this machine: a head node with no CPUs (it runs only
the driver's side of Ray, so every task lands on a worker node), worker nodes of 1 CPU and a small object
store each, and failure detection in about a second (a removed node's tasks are retried soon); it is shut
down whatever happens. Worker processes import this checkout (PYTHONPATH) and the test model
(tests/cluster_model.py), which reads the test's folder: `Observed.pause` sets a node's pause,
`Observed.builds` says on which nodes cells started. Without Ray the tests skip with the install command.
"""

import contextlib
import fcntl
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
INSTALL = "pip install 'roarfast[ray]'"
#: each node's object store: the cells exchange only their metrics
OBJECT_STORE_BYTES = 80 << 20
#: a node missing 3 health checks 300 ms apart is dead (Ray's default takes tens of seconds)
FAST_FAILURE_DETECTION = {"health_check_period_ms": 300, "health_check_failure_threshold": 3,
                          "health_check_initial_delay_ms": 0}
#: the cells' model: fastnet after its node's pause (tests/cluster_model.py)
MODEL = "tests.cluster_model:paused_fastnet"
#: how soon a node that joins a running driver starts its first task: the driver's next look at the nodes (2 s),
#: then the node's first worker starts (a Python process importing torch and roarfast: seconds on a quiet machine,
#: 15-25 s on this test machine's 2 shared cores with a cluster of three nodes)
JOIN_S = 60.0


def ray_or_skip():
    """The ray module, or the test skipped with the command that installs it."""
    return pytest.importorskip("ray", reason=f"the cluster tests need Ray: {INSTALL}")


@dataclass
class Observed:
    """The test's folder, shared with the test model in every worker."""

    folder: Path

    def pause(self, seconds: dict) -> None:
        """Sets the pause before a cell's model is built: {node id or "*": seconds}, or {"fail": message}: every
        build raises. Written whole at once: the workers read it again while they pause."""
        (self.folder / "pauses.json.new").write_text(json.dumps(seconds))
        os.replace(self.folder / "pauses.json.new", self.folder / "pauses.json")

    def builds(self) -> list[dict]:
        """Every model built in a Ray worker so far: {"node", "pid", "time"}."""
        path = self.folder / "builds.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []

    def started_on(self, node) -> bool:
        """Whether a cell or a chunk started on `node` (a node of the cluster): a model was built there."""
        return any(build["node"] == node.node_id for build in self.builds())


@contextlib.contextmanager
def local_cluster(folder: Path, nodes: int = 2, cpus: int = 1, gpus: int = 0, head_gpus: int = 0):
    """(Cluster, [worker nodes], Observed): a head without CPUs and `nodes` worker nodes of `cpus` CPUs; `gpus` and
    `head_gpus`: GPUs that Ray counts on each worker node and on the head, none of them real (a task asking for one
    is scheduled as on GPUs, and must not use CUDA)."""
    ray = ray_or_skip()
    from ray.cluster_utils import Cluster

    folder.mkdir(parents=True, exist_ok=True)
    saved = {name: os.environ.get(name) for name in ("PYTHONPATH", "ROARFAST_TEST_CLUSTER_DIR")}
    # the nodes' processes inherit this environment: this checkout and the test model import in every worker
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), saved["PYTHONPATH"]) if p)
    os.environ["ROARFAST_TEST_CLUSTER_DIR"] = str(folder)
    cluster = None
    try:
        cluster = Cluster(initialize_head=True, head_node_args={
            "num_cpus": 0, "num_gpus": head_gpus, "object_store_memory": OBJECT_STORE_BYTES,
            "include_dashboard": False, "_system_config": FAST_FAILURE_DETECTION})
        workers = [cluster.add_node(num_cpus=cpus, num_gpus=gpus, object_store_memory=OBJECT_STORE_BYTES)
                   for _ in range(nodes)]
        cluster.wait_for_nodes()
        yield cluster, workers, Observed(folder)
    finally:
        if ray.is_initialized():
            ray.shutdown()
        if cluster is not None:
            cluster.shutdown()
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def roarfast(*args, timeout: float = 300, cwd=None) -> subprocess.CompletedProcess:
    """`python -m roarfast.cli ARGS` in a process of its own (a driver the test may kill), working in `cwd`."""
    return subprocess.run([sys.executable, "-m", "roarfast.cli", *args], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=cwd)


def start_roarfast(*args, log: Path) -> subprocess.Popen:
    """`python -m roarfast.cli ARGS` started in the background, its output in `log`."""
    with open(log, "w") as out:
        return subprocess.Popen([sys.executable, "-m", "roarfast.cli", *args], stdout=out, stderr=subprocess.STDOUT,
                                env={**os.environ, "PYTHONPATH": str(ROOT)})


def wait_for(condition, what: str, timeout: float = 120.0):
    """Returns once `condition()` holds; fails the test after `timeout` seconds, naming `what` it waited for."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"waited {timeout:.0f} s for {what}"
        time.sleep(0.2)


def losing_node(args, cluster, lost, observed: Observed, log: Path, what: str, then=lambda: None) -> str:
    """Runs `roarfast ARGS` in a driver of its own, removes the node `lost` once a model was built there (`what`
    it builds: its tasks pause there until it goes), runs `then()`, and returns what the driver said once it
    succeeded."""
    observed.pause({lost.node_id: 600})

    def meanwhile():
        wait_for(lambda: any(b["node"] == lost.node_id for b in observed.builds()), what)
        cluster.remove_node(lost, allow_graceful=False)
        then()
    return driven(args, log, meanwhile)


def driven(args, log: Path, meanwhile) -> str:
    """Runs `roarfast ARGS` in a driver of its own, calls `meanwhile()` while it runs, and returns what the driver
    said once it succeeded (killed, whatever happens, before the test goes on)."""
    driver = start_roarfast(*args, log=log)
    try:
        meanwhile()
        code = driver.wait(timeout=300)
    finally:
        if driver.poll() is None:
            driver.kill()
    said = log.read_text()
    assert code == 0, said[-3000:]
    return said


def rows(run_dir) -> list[dict]:
    """Every row of the run directory's results.sqlite (read-only)."""
    from roarfast.results import ResultsDB
    from roarfast.rundir.directory import RunDir

    path = RunDir(run_dir).results_path
    if not path.exists():
        return []
    with ResultsDB(path, readonly=True) as db:
        return db.rows()


def assert_each_cell_once_and_nothing_claimed(run_dir, cells: int) -> list[dict]:
    """The rows of `cells` retraining cells: one done row each, none running or failed, and no claim lock
    held (every lock file of the run directory can be taken now). Returns the rows."""
    from roarfast.rundir.directory import RunDir

    found = rows(run_dir)
    keys = [(r["method"], r["mode"], r["fraction"], r["seed"]) for r in found]
    assert len(keys) == len(set(keys)) == cells, keys
    assert {r["status"] for r in found} == {"done"}, [(k, r["status"], r["error"]) for k, r in zip(keys, found)]
    assert all(r["owner"] is None for r in found)
    for lock in RunDir(run_dir).claims_dir.glob("*.lock"):
        with open(lock) as held:
            fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)  # BlockingIOError: someone still holds it
    return found
