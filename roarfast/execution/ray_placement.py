"""Where the driver's Ray tasks run, and what the driver says about the nodes meanwhile: the Ray executor places its
cells and its extraction's chunks with `Placement`, and says with `Waiting` when no node can run them.

Left to Ray, a task queues for whichever node frees first, and a node's warm worker is there first: the tasks the
driver submitted when a node joined ran mostly on the nodes already there, and the new node, whose first worker
starts cold, got a task tens of seconds later and then sat idle for whole cells while the old nodes ran several
(measured on a local cluster of 1-CPU nodes). So the driver places each task itself: at every look (every WAIT_S at
most) it reads the live nodes, counts how many tasks of this size each holds at once and how many of its own are
there, and pins the next task to the node with the most room (Ray's node affinity, soft: a task whose node dies
runs again elsewhere, RAY_TASK_RETRIES). A node that joins has room at its first look, and the next task goes there.
"""

import math
import time
from collections import Counter

from roarfast.common.progress import format_duration
from roarfast.execution.ray_cluster import WAIT_S

#: how often a driver that waits for a node says again that it waits, with the time waited
SAY_EVERY_S = 60.0
#: a node's resources as Ray counts them, in its fixed point (1/10,000): 1 / 0.1 holds 10 tasks, not 9
_EPSILON = 1e-6


def describe(node: dict) -> str:
    """A node as the driver names it: its id's first 8 hex digits and its host."""
    return f"node {node['NodeID'][:8]} ({node.get('NodeManagerHostname', '?')})"


def amounts(request: dict) -> str:
    """{"CPU": 1, "GPU": 0.5} as "1 CPU and 0.5 GPU"; what a task asks for, or a node has."""
    said = [f"{amount:g} {resource}{'s' if amount > 1 else ''}" for resource, amount in request.items() if amount > 0]
    return " and ".join(said) or "no CPU or GPU"


def holds(resources: dict, request: dict) -> int:
    """How many tasks asking for `request` ({resource: amount}, some positive) a node of `resources` runs at once."""
    return min(math.floor(resources.get(resource, 0) / amount + _EPSILON)
               for resource, amount in request.items() if amount > 0)


def live_nodes(ray) -> dict:
    """{node id: Ray's record of it} of the cluster's live nodes, read now."""
    return {node["NodeID"]: node for node in ray.nodes() if node.get("Alive")}


def processors(node: dict) -> dict:
    """A node's CPUs and GPUs, {"CPU": n, "GPU": m}."""
    return {resource: node["Resources"].get(resource, 0) for resource in ("CPU", "GPU")}


def _has_any(node: dict) -> bool:
    return any(processors(node).values())


class Waiting:
    """The driver's lines while no node can run its tasks: one when the wait starts (`still`, with why), again every
    SAY_EVERY_S with the time waited, and one when work resumes (`over`, with the node that ended it). `echo` says a
    line, each starting with `prefix`; `clock` is time.monotonic but in tests."""

    def __init__(self, echo, prefix: str, clock=time.monotonic):
        self.echo, self.prefix, self.clock = echo, prefix, clock
        self.since = self.said = None

    def still(self, why: str) -> None:
        now = self.clock()
        if self.since is None:
            self.since = self.said = now
            self.echo(f"{self.prefix}Ray: {why}: waiting for a node to join (a task left on a lost node runs then)")
        elif now - self.said >= SAY_EVERY_S:
            self.said = now
            self.echo(f"{self.prefix}Ray: still waiting for a node ({why}): {format_duration(now - self.since)} so "
                      f"far")

    def over(self, node: dict) -> bool:
        """Says that `node` ended the wait, if one was going on (True then)."""
        if self.since is None:
            return False
        waited, self.since = self.clock() - self.since, None
        self.echo(f"{self.prefix}Ray: {describe(node)} joined with {amounts(processors(node))}: work resumes after "
                  f"{format_duration(waited)} of waiting")
        return True


def await_nodes(ray, waiting: Waiting, sleep=time.sleep) -> None:
    """Returns once a live node has CPUs or GPUs: before what a task asks for is decided from the largest node
    (ray_cluster.task_resources), an empty cluster (its worker nodes not started yet, or all lost) is waited for,
    as `waiting` says."""
    while True:
        nodes = [node for node in live_nodes(ray).values() if _has_any(node)]
        if nodes:
            waiting.over(nodes[0])
            return
        waiting.still("no live node has CPUs or GPUs")
        sleep(WAIT_S)


class Placement:
    """The Ray tasks of one driver loop, each asking for `request` ({"CPU": n, "GPU": m}), placed by the driver on
    the live nodes (see the module's doc): `capacity()` looks at the nodes and says how many may be in flight,
    `submit` pins the next one to the node with the most room, `done` forgets those that finished. It says, through
    `waiting` (whose echo and prefix it uses), a node that joins or leaves, one too small for a task, and the
    waits when none can run one. `what`: a task, as the lines name it ("a cell", "an extraction task")."""

    def __init__(self, ray, request: dict, what: str, waiting: Waiting):
        # late: Ray is optional, and only a driver on Ray places tasks
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        self.pin = lambda node: NodeAffinitySchedulingStrategy(node, soft=True)
        self.ray, self.what, self.waiting = ray, what, waiting
        self.request = {resource: amount for resource, amount in request.items() if amount > 0}
        self.tasks = {}  # task's ref -> the node it was pinned to
        self.holds = {}  # live node id -> tasks it runs at once
        self.seen = None  # the live nodes of the last look (None before the first)

    def capacity(self) -> int:
        """How many tasks may be in flight now: the ones in flight, and the room the live nodes have left (read
        now), less the tasks of lost nodes, which Ray runs again on one of them."""
        nodes = live_nodes(self.ray)
        self.holds = {node: holds(record["Resources"], self.request) for node, record in nodes.items()}
        self._say(nodes)
        lost = sum(1 for node in self.tasks.values() if node not in self.holds)
        return len(self.tasks) + max(0, sum(self._free().values()) - lost)

    def submit(self, remote, *args):
        """Submits `remote`(*args) pinned to the live node with the most room (capacity() said there is some)."""
        free = self._free()
        node = max(free, key=free.get)
        ref = remote.options(scheduling_strategy=self.pin(node)).remote(*args)
        self.tasks[ref] = node
        return ref

    def done(self, refs: list) -> list:
        """`refs`, tasks that finished, forgotten (their room is free again)."""
        for ref in refs:
            self.tasks.pop(ref, None)
        return refs

    def _free(self) -> dict:
        used = Counter(self.tasks.values())
        return {node: max(0, room - used[node]) for node, room in self.holds.items()}

    def _say(self, nodes: dict) -> None:
        """The lines of this look: a node left or joined since the last look (at the first, one too small), the wait
        while no node can run a task, and its end."""
        first = self.seen is None
        joined = [] if first else [node for node in nodes if node not in self.seen]
        used = Counter(self.tasks.values())
        for node in [] if first else sorted(self.seen - set(nodes)):
            again = f": its {used[node]} task(s) in flight run again on another node" if used[node] else ""
            self.waiting.echo(f"{self.waiting.prefix}Ray: node {node[:8]} left{again}")
        self.seen = set(nodes)
        usable = [node for node in [*joined, *nodes] if self.holds[node]]
        if not usable:
            self.waiting.still(f"no live node can run {self.what} ({amounts(self.request)})")
        elif self.waiting.over(nodes[usable[0]]):
            joined = [node for node in joined if node != usable[0]]  # the line that ends the wait named it
        for node in nodes if first else joined:
            self._say_joined(nodes[node], first)

    def _say_joined(self, node: dict, first: bool) -> None:
        """A node that joined (or, at the first look, is there) as what it runs; one too small for a task (not an
        empty one, as a head started with no CPUs) as running none."""
        room = self.holds[node["NodeID"]]
        if room == 0 and _has_any(node):
            self.waiting.echo(f"{self.waiting.prefix}Ray: {describe(node)} has {amounts(processors(node))}, too "
                              f"little for {self.what} ({amounts(self.request)}): it runs none")
        elif room and not first:
            self.waiting.echo(f"{self.waiting.prefix}Ray: {describe(node)} joined: {room} task(s) at a time there")
