"""The executors: cells trained here (local; or side by side in single-thread processes of this machine) or as
Ray tasks (ray), each claimed in results.sqlite before it is trained (roarfast.results: claims and heartbeats)
and finished there in one transaction.

Both executors share one path for a cell's life in the database (`_Claims`): claiming it, keeping the
heartbeat of its claim, and finishing it (its row recorded, or marked failed and the run going on with
the others), so `roarfast retrain` and `roarfast sweep` resume, share a run directory and fail alike.

This process (on Ray: the driver) holds every claim and writes every row; workers and cell processes only
train (roarfast.stages.cell_workers). So a lost worker node holds no claim: Ray runs its cells again elsewhere
(RAY_TASK_RETRIES), and a lost driver's claims are taken over by the next sweep (its process gone; from another
host, once its heartbeat is stale).
"""

import multiprocessing
import socket
import threading
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

import torch

from roarfast.stages.cell_workers import die_with_parent, train_cells, train_data_parallel, worker_settings
from roarfast.stages.cells import Cell, CellTrainer
from roarfast.rundir.claims import HEARTBEAT_STALE_S
from roarfast.errors import UserError
from roarfast.common.options import check_positive
from roarfast.common.progress import format_duration, progress_bar
from roarfast.execution.ray_cluster import RAY_TASK_RETRIES, RayOptions, connect, local_threads, slots, task_resources
from roarfast.results import HEARTBEAT_S, ResultsDB, this_process

#: how often an executor waiting on cells that other processes train looks again
POLL_S = 2.0


class Progress:
    """One line per finished cell (method, mode, fraction, seed, accuracy, seconds, count and, given
    `eta(cell, seconds, remaining)` -> seconds left or None, the ETA) over an overall bar, which shows the ETA
    from `start` (the plan's estimate) before the first cell finishes."""

    def __init__(self, total: int, enabled: bool, echo, eta=None, start: float | None = None):
        self.total, self.echo, self.eta = total, echo, eta
        self.finished = 0
        self._bar_cm = progress_bar(total=total, desc="sweep", unit="cell", enabled=enabled)
        self.bar = self._bar_cm.__enter__()
        if start is not None:
            self.bar.set_postfix(ETA=format_duration(start))

    def cell_done(self, cell: Cell, metrics: dict, remaining: list):
        self.finished += 1
        line = (f"[sweep] {self.finished}/{self.total} {cell.describe()}: {metrics['test_acc']:.1%} "
                f"({metrics['seconds']:.1f} s)")
        if self.eta is not None:
            left = format_duration(self.eta(cell, metrics['seconds'], remaining))
            line += f", ETA {left}"
            self.bar.set_postfix(ETA=left)
        self.bar.update(1)
        self.bar.clear()
        self.echo(line)
        self.bar.refresh()

    def close(self):
        self._bar_cm.__exit__(None, None, None)


class _Heartbeat:
    """Refreshes the heartbeat of the claims in `keys` (a set it reads each time) from a thread with its
    own connection, so a long cell is never mistaken for an abandoned one."""

    def __init__(self, db_path, keys: set):
        self.db_path, self.keys, self.interval = db_path, keys, HEARTBEAT_S
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="roarfast-heartbeat", daemon=True)

    def _run(self):
        with ResultsDB(self.db_path) as db:
            while not self._stop.wait(self.interval):
                db.heartbeat(self.keys.copy())  # one C-level copy: the trainer thread adds and removes claims

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


class _Claims:
    """The life of a cell in results.sqlite, written once for every executor: claimed by this process
    (with a heartbeat while held), then finished: recorded, or marked failed while the others go on."""

    def __init__(self, db, progress: Progress, echo, where: str = ""):
        self.db, self.progress, self.echo, self.where = db, progress, echo, where
        self.owner = this_process()
        self.held = set()
        self.failures = []
        self.waited_for = set()  # the other claimants this run said it waits for

    def heartbeat(self) -> _Heartbeat:
        return _Heartbeat(self.db.path, self.held)

    def claim(self, key) -> bool | None:
        """True: claimed, ours to train now; None: done already (by anyone); False: a live process holds it."""
        if self.db.claim(key, self.owner):
            self.held.add(key)
            return True
        row = self.db.get(key)
        if row["status"] == "done":
            return None
        self._say_waiting(row["owner"])
        return False

    def _say_waiting(self, holder: dict) -> None:
        """Says once per claimant that its cells are left to it, and when they would be taken over."""
        name = f"pid {holder.get('pid')} on {holder.get('host')}"
        if name not in self.waited_for:
            self.waited_for.add(name)
            self.echo(f"[sweep] waiting for the cells that {name} trains (taken over once it is gone: from another "
                      f"host or pid namespace, after {HEARTBEAT_STALE_S:.0f} s without its heartbeat)")

    def release(self, key) -> None:
        """Gives a claim back unfinished (an interrupted run)."""
        self.held.discard(key)
        self.db.release(key, self.owner)

    def finish(self, cell: Cell, key, remaining: list, metrics: dict | None = None,
               error: Exception | None = None) -> None:
        """Records the cell's metrics, or marks it failed with `error` (the run goes on with other cells)."""
        self.held.discard(key)
        if error is not None:
            self.db.mark_failed(key, f"{type(error).__name__}: {error}")
            self.failures.append((cell, error))
            self.echo(f"[sweep] {cell.describe()}: FAILED{self.where} ({type(error).__name__}: {error})")
            return
        self.db.record(key, metrics)
        self.progress.cell_done(cell, metrics, remaining)

    def raise_failures(self) -> None:
        if self.failures:
            cell, err = self.failures[0]
            raise UserError(f"{len(self.failures)} cell(s) failed{self.where}, e.g. {cell.describe()}: "
                            f"{type(err).__name__}: {err} (marked failed in {self.db.path}; the same command "
                            f"retries them)")


def check_workers(workers: int, group_size: int | None, device, ray: RayOptions | None = None) -> None:
    """Refuses, in one line, a --workers-per-cell that cannot work with the other choices (`ray`: the Ray
    executor's): grouped cells (a group shares one device, a data-parallel cell spans several), a fraction of
    a GPU per worker, or more workers than this machine's GPUs (the local executor on CUDA)."""
    check_positive("--workers-per-cell", workers)
    if workers == 1:
        return
    if group_size not in (None, 1):
        raise UserError(f"--workers-per-cell {workers} and --group-size {group_size} exclude each other: a group "
                        f"shares one device, a data-parallel cell spans several; choose one")
    if ray is not None and ray.gpus_per_cell not in (0, 1):
        raise UserError(f"--workers-per-cell {workers} takes one GPU per worker: --gpus-per-cell 1 (or 0 on CPUs), "
                        f"got {ray.gpus_per_cell:g}")
    if ray is None and _device_type(device) == "cuda" and workers > torch.cuda.device_count():
        raise UserError(f"--workers-per-cell {workers}: this machine has {torch.cuda.device_count()} GPU(s); use "
                        f"at most that many, or --executor ray on a node with more")


def _check_batch(trainer: CellTrainer, workers: int) -> None:
    """Refuses a batch that the workers cannot split evenly, before any cell is claimed."""
    batch = min(trainer.recipe.batch_size, len(trainer.ds.train_index))
    if batch % workers:
        raise UserError(f"--workers-per-cell {workers}: each worker takes an equal share of a batch, and the "
                        f"batch has {batch} images; choose a divisor of {batch} (or set the batch with --recipe)")


def _device_type(device) -> str:
    return torch.device(device).type


class _DataParallel:
    """The local executor's trainer of data-parallel cells: keys them as `trainer`, trains each claimed cell
    over `workers` processes of this machine (cell_workers.train_data_parallel), each with its share of the
    CPU threads on CPU."""

    def __init__(self, trainer: CellTrainer, workers: int):
        device = _device_type(trainer.device)
        threads = max(1, local_threads() // workers) if device == "cpu" else local_threads()
        self.key = trainer.key
        self.run_dir = str(trainer.run.root)
        self.settings = worker_settings(trainer, device, threads, workers)

    def train_cells(self, cells: list) -> list:
        return train_data_parallel(self.run_dir, self.settings, cells)


def execute(trainer: CellTrainer, todo: list, db, *, executor: str = "local", ray: RayOptions | None = None,
            progress: Progress | None = None, echo=print, group_size: int = 1, workers_per_cell: int = 1,
            cell_processes: int = 1) -> None:
    """Trains the cells `todo` ([(Cell, key or None)]) with `executor`, claiming each first, `group_size` at
    a time (trainer.train_cells: together, or each alone at 1), or each over `workers_per_cell` processes
    (data-parallel), or (local, CPU) side by side in `cell_processes` single-thread processes; waits for cells
    other processes hold, taking over any whose claimant died, until every cell is done."""
    if cell_processes != 1 and (executor, group_size, workers_per_cell, _device_type(trainer.device)) != (
            "local", 1, 1, "cpu"):
        raise UserError(f"{cell_processes} cell processes train one cell each on the CPU with the local executor, "
                        f"not with --executor {executor}, --group-size {group_size}, --workers-per-cell "
                        f"{workers_per_cell} on {trainer.device}")
    ray = (ray or RayOptions()) if executor == "ray" else None
    if workers_per_cell != 1:
        check_workers(workers_per_cell, group_size, trainer.device, ray)
        _check_batch(trainer, workers_per_cell)
    progress = progress or Progress(len(todo), enabled=False, echo=echo)
    try:
        if executor == "ray":
            _execute_ray(trainer, list(todo), _Claims(db, progress, echo, where=" on Ray"), ray, group_size,
                         workers_per_cell)
        elif cell_processes > 1:
            _execute_processes(trainer, list(todo), _Claims(db, progress, echo), cell_processes)
        else:
            local = trainer if workers_per_cell == 1 else _DataParallel(trainer, workers_per_cell)
            _execute_local(local, list(todo), _Claims(db, progress, echo), group_size)
    finally:
        progress.close()


def _claim_group(trainer: CellTrainer, pending: list, claims: _Claims, size: int) -> list:
    """Up to `size` cells of `pending`, in order, claimed in one pass and taken out of it ([(cell, key)]);
    cells done by anyone leave `pending`, cells a live process holds stay there (the group is smaller)."""
    group = []
    for item in list(pending):
        if len(group) == size:
            break
        cell, key = item
        key = key or trainer.key(cell)
        claimed = claims.claim(key)
        if claimed is not False:
            pending.remove(item)
        if claimed:
            group.append((cell, key))
    return group


def _train_claimed(trainer: CellTrainer, group: list) -> list:
    """Per cell of the claimed `group` its metrics or the exception that failed it (trainer.train_cells; a
    single cell's exception is its outcome too). UserError and interruptions propagate."""
    try:
        return trainer.train_cells([cell for cell, _ in group])
    except (KeyboardInterrupt, UserError):
        raise
    except Exception as err:  # noqa: BLE001  (recorded; the run goes on with other cells)
        return [err] * len(group)


def _finish_group(claims: _Claims, group: list, outcomes: list, pending: list) -> None:
    """Records, or marks failed, each cell of `group` by its outcome (metrics or an exception)."""
    for (cell, key), outcome in zip(group, outcomes):
        if isinstance(outcome, BaseException):
            claims.finish(cell, key, pending, error=outcome)
        else:
            claims.finish(cell, key, pending, metrics=outcome)


def _execute_local(trainer: CellTrainer, pending: list, claims: _Claims, group_size: int = 1) -> None:
    """The cells trained in this process, `group_size` at a time."""
    with claims.heartbeat():
        while pending:
            group = _claim_group(trainer, pending, claims, group_size)
            if not group:
                time.sleep(POLL_S)  # the rest is held by live processes: wait for them (or their end)
                continue
            try:
                outcomes = _train_claimed(trainer, group)
            except (KeyboardInterrupt, UserError):
                for _, key in group:
                    claims.release(key)
                raise
            _finish_group(claims, group, outcomes, pending)
    claims.raise_failures()


def _ray_train_cells(run_dir: str, settings: dict, cells: list) -> list:
    """A Ray task: trains `cells` (cell_workers.train_cells) and adds to each cell's metrics where it was
    trained: the host name and Ray's node id."""
    import ray

    node = {"host": socket.gethostname(), "ray_node": ray.get_runtime_context().get_node_id()}
    return [r if isinstance(r, BaseException) else {**r, **node} for r in train_cells(run_dir, settings, cells)]


def _execute_elsewhere(trainer: CellTrainer, pending: list, claims: _Claims, group_size: int, capacity, submit,
                       ready, outcome) -> None:
    """The loop of the executors whose cells train in other processes (Ray tasks, local processes): this process
    claims each group of `group_size` cells, submits it (`submit(cells)` -> a handle), keeps at most `capacity()`
    groups in flight, and finishes a group once `ready(handles)` (waiting at most POLL_S) returns its handle, by
    `outcome(handle)` (per cell its metrics or exception; an exception raised here fails the whole group). The
    claims in flight are given back when this process ends the loop by an exception (an interruption)."""
    in_flight = {}  # handle -> [(cell, key)]
    try:
        with claims.heartbeat():
            while pending or in_flight:
                submitted = False
                limit = capacity()
                while pending and len(in_flight) < limit:
                    group = _claim_group(trainer, pending, claims, group_size)
                    if not group:
                        break
                    in_flight[submit([cell for cell, _ in group])] = group
                    submitted = True
                if not in_flight:
                    if pending and not submitted:
                        time.sleep(POLL_S)
                    continue
                for handle in ready(list(in_flight)):
                    group = in_flight.pop(handle)
                    try:
                        outcomes = outcome(handle)
                    except Exception as err:  # noqa: BLE001  (recorded; the run goes on with other cells)
                        outcomes = [err] * len(group)
                    _finish_group(claims, group, outcomes, pending)
    except BaseException:
        for group in in_flight.values():
            for _, key in group:
                claims.release(key)
        raise
    claims.raise_failures()


def _execute_ray(trainer: CellTrainer, pending: list, claims: _Claims, options: RayOptions,
                 group_size: int = 1, workers: int = 1) -> None:
    """One Ray task per group of `group_size` cells (with one cell's resources, times its `workers`); this
    process (the driver) claims each cell before submitting it, keeps its heartbeat, and finishes it when the
    task returns. A task whose worker or node dies runs again elsewhere (RAY_TASK_RETRIES) under the same
    claim; as many tasks are in flight as the live nodes can run, counted again as nodes come and go."""
    ray = connect(options)
    cpus, gpus = task_resources(ray, options.cpus_per_cell, options.gpus_per_cell, workers)
    remote = ray.remote(num_cpus=cpus * workers, num_gpus=gpus * workers, max_retries=RAY_TASK_RETRIES,
                        retry_exceptions=False)(_ray_train_cells)
    settings = worker_settings(trainer, "cuda" if gpus > 0 else "cpu",
                               max(1, int(cpus)) if gpus == 0 else local_threads(), workers)
    settings["grouping"]["size"] = group_size
    _execute_elsewhere(trainer, pending, claims, group_size,
                       capacity=lambda: slots(ray, cpus * workers, gpus * workers),
                       submit=lambda cells: remote.remote(str(trainer.run.root), settings, cells),
                       ready=lambda refs: ray.wait(refs, num_returns=1, timeout=POLL_S)[0], outcome=ray.get)


def _execute_processes(trainer: CellTrainer, pending: list, claims: _Claims, processes: int) -> None:
    """The cells trained side by side, one at a time in each of `processes` single-thread processes of this
    machine (spawned once; each rebuilds the trainer from the run directory: cell_workers.train_cells)."""
    settings = worker_settings(trainer, "cpu", 1)
    pool = ProcessPoolExecutor(processes, mp_context=multiprocessing.get_context("spawn"), initializer=die_with_parent)
    try:
        _execute_elsewhere(trainer, pending, claims, 1, capacity=lambda: processes,
                           submit=lambda cells: pool.submit(train_cells, str(trainer.run.root), settings, cells),
                           ready=lambda futures: wait(futures, timeout=POLL_S, return_when=FIRST_COMPLETED).done,
                           outcome=lambda future: future.result())
    finally:
        pool.shutdown(cancel_futures=True)
