"""Where the Ray driver places its tasks and what it says about the nodes (roarfast.execution.ray_placement), on a
fake cluster whose node table the test writes (no Ray processes): a GPU task asks for its GPUs only, so the
documented Slurm layout (a head started with --num-cpus=0 and 4 GPUs a node) runs a task on every GPU; a node that
joins gets the next task, a lost node's tasks keep their room, a node too small for a task is said; a driver with no
node that can run a task says so when it starts waiting, again each minute with the time waited, and when work
resumes."""

from types import SimpleNamespace

import pytest

from roarfast.execution.ray_cluster import task_resources
from roarfast.execution.ray_placement import SAY_EVERY_S, Placement, Waiting, await_nodes, holds

pytest.importorskip("ray", reason="the placement pins tasks with Ray's node affinity")


def node(name: str, cpus: float = 0, gpus: float = 0) -> dict:
    """A node-table entry as ray.nodes() gives it; `name`, hex digits, padded to a node id."""
    resources = {"memory": 1e9, "object_store_memory": 1e8, **({"CPU": cpus} if cpus else {}),
                 **({"GPU": gpus} if gpus else {})}
    return {"NodeID": name.ljust(56, "0"), "Alive": True, "NodeManagerHostname": f"host-{name}",
            "Resources": resources}


class FakeCluster:
    """ray as Placement uses it: `table`, the node table the test edits; `remote`, a task whose submissions are
    noted as the node each was pinned to."""

    def __init__(self, *nodes):
        self.table = list(nodes)
        self.pinned = []

    def nodes(self):
        return self.table

    def leave(self, name: str) -> None:
        for entry in self.table:
            if entry["NodeID"].startswith(name):
                entry["Alive"] = False

    @property
    def remote(self):
        def options(scheduling_strategy):
            assert scheduling_strategy.soft  # a task whose node dies runs again elsewhere
            return SimpleNamespace(remote=lambda *args: self.pinned.append(scheduling_strategy.node_id[:4]) or object())
        return SimpleNamespace(options=options)


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def fill(placement: Placement, cluster: FakeCluster) -> list:
    """Submits tasks while capacity() allows; the nodes they were pinned to (names), in order."""
    before = len(cluster.pinned)
    while len(placement.tasks) < placement.capacity():
        placement.submit(cluster.remote)
    return cluster.pinned[before:]


def test_gpu_tasks_ask_for_no_cpu_so_every_gpu_of_the_slurm_layout_runs_one():
    """The head started with --num-cpus=0 and every node with 4 GPUs: 16 tasks of one GPU run at once, 4 on the head,
    where asking for a CPU besides left the head's 4 GPUs idle (12)."""
    cluster = FakeCluster(node("e0", cpus=0, gpus=4), *(node(f"a{i}", cpus=64, gpus=4) for i in range(3)))
    cpus, gpus, threads, note = task_resources(cluster, None, 1.0)
    assert (cpus, gpus, note) == (0, 1.0, None)
    said = []
    placement = Placement(cluster, {"CPU": cpus, "GPU": gpus}, "a cell", Waiting(said.append, "[sweep] "))
    pinned = fill(placement, cluster)
    assert sorted(pinned) == sorted(["e000", "a000", "a100", "a200"] * 4)
    assert said == []  # every node can run a cell: nothing to say
    # a CPU asked for explicitly (--cpus-per-cell 1) is what the head lacks, and a line says it runs none
    said.clear()
    with_cpu = Placement(cluster, {"CPU": 1, "GPU": 1}, "a cell", Waiting(said.append, "[sweep] "))
    assert with_cpu.capacity() == 12
    assert said == ["[sweep] Ray: node e0000000 (host-e0) has 4 GPUs, too little for a cell (1 CPU and 1 GPU): it "
                    "runs none"]
    # quarter GPUs: four tasks a GPU; Ray's fixed point counts 1 / 0.1 as ten
    assert Placement(cluster, {"GPU": 0.25}, "a cell", Waiting(said.append, "")).capacity() == 64
    assert holds({"GPU": 1.0}, {"GPU": 0.1}) == 10


def test_a_node_that_joins_gets_the_next_task_and_a_lost_ones_tasks_keep_their_room():
    cluster = FakeCluster(node("e0"), node("a", cpus=1))
    said = []
    placement = Placement(cluster, {"CPU": 1}, "a cell", Waiting(said.append, "[sweep] "))
    assert fill(placement, cluster) == ["a000"]
    cluster.table.append(node("b", cpus=2))
    assert fill(placement, cluster) == ["b000", "b000"]  # a is full: the new node takes the tasks its room allows
    assert said == ["[sweep] Ray: node b0000000 (host-b) joined: 2 task(s) at a time there"]
    cluster.leave("b")
    # b's two tasks run again elsewhere (Ray's retries), on the room left: none for new ones until they end
    assert fill(placement, cluster) == []
    assert said[1:] == ["[sweep] Ray: node b0000000 left: its 2 task(s) in flight run again on another node"]
    cluster.table.append(node("c", cpus=3))
    assert fill(placement, cluster) == ["c000"]  # three slots, two of them for b's tasks
    placement.done(list(placement.tasks))
    assert sorted(fill(placement, cluster)) == ["a000", "c000", "c000", "c000"]


def test_the_driver_says_when_it_waits_for_a_node_how_long_and_when_work_resumes():
    clock, said = Clock(), []
    waiting = Waiting(said.append, "[sweep] ", clock=clock)
    cluster = FakeCluster(node("e0"))
    sleeps = []

    def sleep(seconds):  # each look at the nodes takes the driver's wait between two looks
        sleeps.append(seconds)
        clock.now += seconds
        if clock.now >= 1000 + 90:
            cluster.table.append(node("a", cpus=1))

    await_nodes(cluster, waiting, sleep=sleep)
    assert said == ["[sweep] Ray: no live node has CPUs or GPUs: waiting for a node to join (a task left on a lost "
                    "node runs then)",
                    "[sweep] Ray: still waiting for a node (no live node has CPUs or GPUs): 1m00s so far",
                    "[sweep] Ray: node a0000000 (host-a) joined with 1 CPU: work resumes after 1m30s of waiting"]
    assert SAY_EVERY_S == 60 and set(sleeps) == {2.0}
    # the same lines once the nodes are lost mid-run, for what a task asks for
    said.clear()
    placement = Placement(cluster, {"CPU": 2}, "an extraction task", Waiting(said.append, "extract: ", clock=clock))
    assert placement.capacity() == 0
    clock.now += SAY_EVERY_S - 1
    assert placement.capacity() == 0 and len(said) == 2  # a's line (too small), and the wait's first line
    clock.now += 1
    placement.capacity()
    cluster.table.append(node("b", cpus=4))
    clock.now += 5
    assert placement.capacity() == 2
    assert said == ["extract: Ray: no live node can run an extraction task (2 CPUs): waiting for a node to join (a "
                    "task left on a lost node runs then)",
                    "extract: Ray: node a0000000 (host-a) has 1 CPU, too little for an extraction task (2 CPUs): it "
                    "runs none",
                    "extract: Ray: still waiting for a node (no live node can run an extraction task (2 CPUs)): 1m00s "
                    "so far",
                    "extract: Ray: node b0000000 (host-b) joined with 4 CPUs: work resumes after 1m05s of waiting"]
