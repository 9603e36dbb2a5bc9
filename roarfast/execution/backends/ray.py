"""The Ray executor: each group of retraining cells and each chunk of an extraction a task on a Ray cluster, with
its options (`RayOptions`: the cluster's address, what a cell and an extraction task each ask for; connecting and
the live nodes' resources in roarfast.execution.ray_cluster). This process, the driver, claims and records every
cell and writes every chunk (roarfast.execution.executors, roarfast.stages.extract_tasks say why); a task rebuilds
its work from the run directory at the driver's absolute path and first checks that its node sees what the driver
sees (roarfast.stages.worker_view). A task whose worker or node dies runs again elsewhere (RAY_TASK_RETRIES); the
driver places each task on a live node with room, looking again at the nodes every few seconds, so that a node
that joins gets work at once, and says when it waits for one (roarfast.execution.ray_placement).
"""

import socket
import time
from dataclasses import dataclass

from roarfast.common.options import CELLS, CHUNKS, flag
from roarfast.errors import UserError
from roarfast.stages.executor import Executor
from roarfast.execution.ray_cluster import (RAY_TASK_RETRIES, WAIT_S, connect, import_ray, local_threads,
                                            task_resources)
from roarfast.execution.ray_placement import Placement, Waiting, await_nodes
from roarfast.execution.registry import register_executor


@dataclass(frozen=True)
class RayOptions:
    """--executor ray: the cluster (`address`, None: a local Ray instance), each extraction task's resources (a
    chunk of a split's images) and each retraining cell's. A CPU task computes with its CPUs as threads where they
    are given, else with the threads this process computes with (local_threads), so that Ray's ranks and rows
    equal the local executor's, reserving as many CPUs (at most the largest node's: task_resources); no CPU where
    GPUs are asked for (the GPUs bound how many run on a node)."""

    address: str | None = flag("--address", uses=(CELLS, CHUNKS),
                               help="Ray cluster address (default: start a local Ray instance)")
    cpus_per_task: float | None = flag(
        "--cpus-per-task", kind=float, uses=(CHUNKS,),
        help="Ray: CPUs per extraction task, each a thread  [default: the threads of this process (torch's count: one "
             "per core, or OMP_NUM_THREADS), so that the ranks equal a local extraction's, reserving at most the largest "
             "node's CPUs (a line says so); 0 with --gpus-per-task: the GPUs bound how many run on a node]")
    gpus_per_task: float = flag("--gpus-per-task", default=0.0, kind=float, uses=(CHUNKS,), show_default=True,
                                help="Ray: GPUs per extraction task (then computed on CUDA), fractions allowed")
    cpus_per_cell: float | None = flag(
        "--cpus-per-cell", kind=float, uses=(CELLS,),
        help="Ray: CPUs each cell (each worker of one) reserves, and its threads without --threads-per-cell  "
             "[default: its threads, at most the largest node's CPUs; 0 with --gpus-per-cell: the GPUs bound how many "
             "run on a node]")
    gpus_per_cell: float = flag("--gpus-per-cell", default=0.0, kind=float, uses=(CELLS,),
                                help="Ray: GPUs per cell, fractions allowed (0.25: four small models share a GPU); 1 "
                                     "with --workers-per-cell (a GPU per worker)")

    def __post_init__(self):
        for unit in ("cell", "task"):
            cpus, gpus = getattr(self, f"cpus_per_{unit}"), getattr(self, f"gpus_per_{unit}")
            if (cpus is not None and not cpus > 0) or not gpus >= 0:
                raise UserError(f"--cpus-per-{unit} must be > 0 and --gpus-per-{unit} >= 0, got {cpus} and {gpus}")


@register_executor("ray", "on a Ray cluster, each chunk of a split's images (--chunk-images) and each retraining "
                   "cell a task (README, 'On a cluster')", options=RayOptions, order=1)
class RayExecutor(Executor):
    """--executor ray: the cluster and each task's resources as `options` (a RayOptions) say."""

    where = " on Ray"
    remote = True

    def __init__(self, options: RayOptions | None = None):
        self.options = options or RayOptions()

    def prepare(self) -> None:
        import_ray()  # before any work: Ray missing is one line saying how to install it

    def check_workers(self, workers: int, device) -> None:
        if self.options.gpus_per_cell not in (0, 1):
            raise UserError(f"--workers-per-cell {workers} takes one GPU per worker: --gpus-per-cell 1 (or 0 on "
                            f"CPUs), got {self.options.gpus_per_cell:g}")

    def cell_threads(self, device, threads: int | None, *, workers_per_cell: int = 1, cell_processes: int = 1) -> int:
        """`threads`, else --cpus-per-cell on CPUs where given, else as the local executor's cells train with (this
        process's threads, shared by a data-parallel cell's workers on CPUs), whatever the nodes hold."""
        if threads is not None:
            return threads
        cpus, gpus = self.options.cpus_per_cell, self.options.gpus_per_cell
        if gpus > 0:
            return local_threads()
        return max(1, int(cpus)) if cpus is not None else max(1, local_threads() // workers_per_cell)

    def run_cells(self, trainer, pending: list, claims, *, group_size: int, workers_per_cell: int,
                  cell_processes: int, threads: int) -> None:
        """One Ray task per group of `group_size` cells (with one cell's resources, times its workers), each cell
        trained with `threads` threads; this process claims each cell before submitting it, keeps its heartbeat,
        and finishes it when the task returns, under the same claim when Ray runs the task again after its node
        died."""
        # late: loads torch and the cell trainer, and every --help lists this backend's options
        from roarfast.execution.executors import POLL_S, execute_elsewhere
        from roarfast.stages.cell_workers import worker_settings
        ray = connect(self.options)
        workers = workers_per_cell
        waiting = Waiting(claims.echo, "[sweep] ")
        await_nodes(ray, waiting)
        cpus, gpus, threads, note = task_resources(ray, self.options.cpus_per_cell, self.options.gpus_per_cell,
                                                   workers, threads=threads)
        if note:
            claims.echo(f"[sweep] {note}")
        remote = ray.remote(num_cpus=cpus * workers, num_gpus=gpus * workers, max_retries=RAY_TASK_RETRIES,
                            retry_exceptions=False)(_ray_train_cells)
        placement = Placement(ray, {"CPU": cpus * workers, "GPU": gpus * workers}, "a cell", waiting)
        settings = worker_settings(trainer, "cuda" if gpus > 0 else "cpu", threads, workers)
        settings["grouping"]["size"] = group_size
        run_dir = settings["view"]["run_dir"]
        execute_elsewhere(trainer, pending, claims, group_size, capacity=placement.capacity,
                          submit=lambda cells: placement.submit(remote, run_dir, settings, cells),
                          ready=lambda refs: placement.done(ray.wait(refs, num_returns=1, timeout=POLL_S)[0]),
                          outcome=lambda ref: _outcome(ray, ref))

    def chunk_runner(self):
        return RayChunks(self.options)


def _ray_train_cells(run_dir: str, settings: dict, cells: list) -> list:
    """A Ray task: trains `cells` (cell_workers.train_cells, once this node was seen to see the run directory)
    and adds to each cell's metrics where it was trained: the host name and Ray's node id."""
    import ray

    # late: a worker's side, which loads torch and the cell trainer
    from roarfast.stages.cell_workers import train_cells
    from roarfast.stages.worker_view import this_node

    node = {"host": socket.gethostname(), "ray_node": ray.get_runtime_context().get_node_id()}
    trained = train_cells(run_dir, settings, cells, this_node(node["ray_node"]))
    return [r if isinstance(r, BaseException) else {**r, **node} for r in trained]


def _outcome(ray, ref) -> list:
    """A cells task's outcomes; a node that cannot see the run directory (worker_view.NotShared) as its one
    line, which ends the run; any other exception fails the task's cells."""
    # late: the worker view loads the run directory's records, and every --help lists this backend's options
    from roarfast.stages.worker_view import NotShared

    try:
        return ray.get(ref)
    except ray.exceptions.RayTaskError as err:
        cause = getattr(err, "cause", None)
        if isinstance(cause, NotShared):
            raise NotShared(str(cause)) from None
        raise


def _ray_chunk(run_dir: str, settings: dict, chunk) -> dict:
    """A Ray task: the ranks of `chunk` ({method: (ranks, maps or None, NaN/Inf count)}, numpy arrays) and the
    Ray node that computed them."""
    import ray

    # late: a worker's side, which loads torch and the estimators
    from roarfast.stages.extract_tasks import worker_explainer
    from roarfast.stages.worker_view import this_node

    node = ray.get_runtime_context().get_node_id()
    out = worker_explainer(run_dir, settings, this_node(node)).ranks(chunk)
    return {"ranks": {m: (ranks.numpy(), None if maps is None else maps.numpy(), nonfinite)
                      for m, (ranks, maps, nonfinite) in out.items()}, "node": node}


class RayChunks:
    """Chunks computed as Ray tasks on the cluster of `options` (a RayOptions), each with --cpus-per-task CPUs and
    threads (default: this process's threads, reserving at most the largest node's CPUs, which `note` then says)
    and --gpus-per-task GPUs (then on CUDA). A task whose worker or node dies runs again elsewhere
    (RAY_TASK_RETRIES); each is placed on a live node with room (ray_placement.Placement), so a node that joins
    gets chunks at once; with none that can run one, it waits for one, and says so (printed, as extract's lines)."""

    def __init__(self, options):
        # late: loads torch, and every --help lists this backend's options
        import torch

        self.ray = connect(options)
        self.waiting = Waiting(print, "extract: ")
        await_nodes(self.ray, self.waiting)
        self.cpus, self.gpus, self.threads, note = task_resources(self.ray, options.cpus_per_task,
                                                                  options.gpus_per_task, unit="task")
        self.note = note and f"extract: {note}"
        self.device = torch.device("cuda" if self.gpus > 0 else "cpu")

    def results(self, run_dir: str, settings: dict, chunks: list):
        """Yields (chunk, {method: (ranks, maps or None, NaN/Inf count)}, node id) as the tasks of `chunks`
        finish; a task that raised ends the extraction in one line (the chunks written are kept)."""
        remote = self.ray.remote(num_cpus=self.cpus, num_gpus=self.gpus, max_retries=RAY_TASK_RETRIES,
                                 retry_exceptions=False)(_ray_chunk)
        placement = Placement(self.ray, {"CPU": self.cpus, "GPU": self.gpus}, "an extraction task", self.waiting)
        pending, in_flight = list(chunks), {}
        try:
            while pending or in_flight:
                room = placement.capacity()
                while pending and len(in_flight) < room:
                    chunk = pending.pop(0)
                    in_flight[placement.submit(remote, run_dir, settings, chunk)] = chunk
                if not in_flight:  # no node can run one now: placement said so
                    time.sleep(WAIT_S)
                    continue
                ready = placement.done(self.ray.wait(list(in_flight), num_returns=1, timeout=WAIT_S)[0])
                for ref in ready:
                    chunk = in_flight.pop(ref)
                    result = self._get(ref, chunk)
                    yield chunk, result["ranks"], result["node"]
        finally:
            for ref in in_flight:  # an interrupted or failed extraction leaves nothing computing
                self.ray.cancel(ref, force=True)

    def _get(self, ref, chunk) -> dict:
        """The task's result; its exception as one line (a UserError as it was raised)."""
        try:
            return self.ray.get(ref)
        except self.ray.exceptions.RayTaskError as err:
            cause = getattr(err, "cause", None) or err
        except self.ray.exceptions.RayError as err:
            cause = err
        if isinstance(cause, UserError):
            raise UserError(str(cause)) from None
        first = str(cause).strip().splitlines()[-1] if str(cause).strip() else ""
        raise UserError(f"extract on Ray: {chunk.describe()} failed ({type(cause).__name__}: {first}); the chunks "
                        f"written are kept, and the same command goes on with the rest") from None
