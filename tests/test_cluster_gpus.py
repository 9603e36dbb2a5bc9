"""GPU tasks on the documented Slurm layout, on a local Ray cluster whose GPUs are counted, not real
(tests/cluster.py): a head started with no CPUs and 4 GPUs, a worker node with 4 GPUs and 1 CPU. A task asking for a
GPU as a cell or an extraction task does by default (ray_cluster.task_resources), placed as the driver places them
(ray_placement.Placement), runs on every GPU at once: 8 tasks together, 4 on each node, each with a GPU of its own.
The tasks only note where they ran (no CUDA here); a barrier makes each wait for all 8, so the test fails unless
all of them run at the same time."""

import time
from pathlib import Path

from roarfast.execution.ray_cluster import task_resources
from roarfast.execution.ray_placement import Placement, Waiting
from tests.cluster import local_cluster, ray_or_skip

GPUS_A_NODE = 4
TASKS = 2 * GPUS_A_NODE


def _where_together(folder: str, tasks: int, timeout: float) -> tuple:
    """A task: notes that it runs, waits until `tasks` do (or `timeout` seconds), and returns (its node, its GPU ids,
    how many ran when it stopped waiting)."""
    import ray

    (Path(folder) / f"{ray.get_runtime_context().get_task_id()}.running").touch()
    deadline = time.monotonic() + timeout
    while len(list(Path(folder).glob("*.running"))) < tasks and time.monotonic() < deadline:
        time.sleep(0.1)
    return ray.get_runtime_context().get_node_id(), ray.get_gpu_ids(), len(list(Path(folder).glob("*.running")))


def test_gpu_tasks_use_every_gpu_of_a_head_without_cpus(tmp_path):
    ray = ray_or_skip()
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    with local_cluster(tmp_path / "cluster", nodes=1, cpus=1, gpus=GPUS_A_NODE, head_gpus=GPUS_A_NODE) as (
            cluster, (worker,), _):
        ray.init(address=cluster.address, include_dashboard=False, log_to_driver=False)
        cpus, gpus, _, _ = task_resources(ray, None, 1.0)
        assert (cpus, gpus) == (0, 1.0)
        said = []
        placement = Placement(ray, {"CPU": cpus, "GPU": gpus}, "a cell", Waiting(said.append, ""))
        remote = ray.remote(num_cpus=cpus, num_gpus=gpus, max_retries=0)(_where_together)
        assert placement.capacity() == TASKS
        refs = [placement.submit(remote, str(barrier), TASKS, 120.0) for _ in range(TASKS)]
        ran = ray.get(refs, timeout=300)
        head = ray.get_runtime_context().get_node_id()  # the driver's node
    assert said == []
    assert {count for _, _, count in ran} == {TASKS}  # all 8 ran at once
    for node in (head, worker.node_id):
        ids = [tuple(gpu_ids) for where, gpu_ids, _ in ran if where == node]
        assert len(ids) == GPUS_A_NODE and all(len(each) == 1 for each in ids) and len(set(ids)) == GPUS_A_NODE
