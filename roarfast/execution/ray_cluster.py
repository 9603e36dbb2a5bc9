"""Ray as the Ray executor (roarfast.execution.backends.ray, which holds its options) uses it: connecting, what a
task asks for (from the most one live node holds), and how often Ray runs again a task whose worker or node died;
and the threads this process computes with, which a task is given by default (where the tasks run:
roarfast.execution.ray_placement). Ray stays optional: `import_ray` says how to install it.
"""

from roarfast.errors import UserError

#: times Ray runs a task again whose worker or node died (not a task that raised: that one fails once)
RAY_TASK_RETRIES = 3
#: how often a driver waiting on Ray tasks looks again, at the nodes too
WAIT_S = 2.0


def local_threads() -> int:
    """The CPU threads this process computes with (torch's default: one per core, or OMP_NUM_THREADS): CPU
    results can depend on it, so a Ray task is given as many by default."""
    # late: loads torch, and --help imports this module
    import torch

    return torch.get_num_threads()


def import_ray():
    """The ray module, or a UserError saying how to install it."""
    try:
        import ray
    except ImportError:
        raise UserError("--executor ray needs Ray: pip install 'roarfast[ray]'") from None
    return ray


def connect(options):
    """The ray module, connected to the cluster of `options` (a RayOptions: its address) once per process."""
    ray = import_ray()
    if not ray.is_initialized():
        ray.init(address=options.address, include_dashboard=False, log_to_driver=False)
    return ray


def largest_node(ray, resource: str) -> float:
    """The most of `resource` (CPU, GPU) that one live node of the cluster has."""
    return max((node["Resources"].get(resource, 0) for node in ray.nodes() if node.get("Alive")), default=0)


def task_resources(ray, cpus: float | None, gpus: float, workers: int = 1, unit: str = "cell",
                   threads: int | None = None) -> tuple:
    """(CPUs, GPUs, threads, note) of one worker of a task: a retraining `unit` "cell" (of `workers` processes) or
    an extraction "task". threads: what it computes with, `threads` where given (--threads-per-cell), else its
    CPUs where given, else local_threads(). CPUs None: the threads, at most what the largest node holds for the
    task's workers (a task asking for more would never be scheduled), and then `note` is the line that says the
    task runs more threads than it reserves (else None); 0 with GPUs: a GPU task's work is on its GPUs, which
    bound how many run on a node, and a CPU asked for besides would leave idle the GPUs of a node with fewer CPUs
    than GPUs (a head started with --num-cpus=0, a pod whose CPU limit is below its GPUs). A task's workers share
    one node, which must hold them all (else one line naming the flags that lower it); a task asking for no CPU and
    no GPU is refused (one line)."""
    if threads is None:
        threads = max(1, int(cpus)) if cpus is not None and gpus == 0 else local_threads()
    note = None
    if cpus is None and gpus > 0:
        cpus = 0
    elif cpus is None:
        room = int(largest_node(ray, "CPU") // workers)
        cpus = max(1, min(threads, room))
        if cpus < threads:
            what = "a cell" if unit == "cell" else "an extraction task"
            note = (f"Ray: {what} computes with {threads} threads (this process's count, so that its results equal "
                    f"the local executor's) and reserves {cpus}, all the largest node has for it: such a node runs "
                    f"more threads than it has CPUs" + (" (--threads-per-cell fewer changes the rows)"
                                                         if unit == "cell" else ""))
    if cpus <= 0 and gpus <= 0:  # a task asking for nothing: Ray would start every one at once on any node
        raise UserError(f"--cpus-per-{unit} {cpus:g} without --gpus-per-{unit}: a task needs a CPU or a GPU; give "
                        f"--cpus-per-{unit} 1 or more, or leave it out")
    for resource, amount in (("CPU", cpus), ("GPU", gpus)):
        largest = largest_node(ray, resource)
        if amount * workers > largest:
            what, lower = (("a cell", "--workers-per-cell or ") if unit == "cell" else ("an extraction task", ""))
            split = f" ({workers} worker(s) x {amount:g})" if unit == "cell" else ""
            raise UserError(f"{what} asks for {amount * workers:g} {resource}s{split} on one node, and the largest "
                            f"node of the Ray cluster has {largest:g}: lower {lower}--{resource.lower()}s-per-{unit}")
    return cpus, gpus, threads, note

