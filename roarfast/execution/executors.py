"""The executors' one path for a cell's life in results.sqlite, whatever the backend (roarfast.stages.executor):
each cell claimed by this process before it is trained (roarfast.measurements.db: claims and heartbeats), then
finished there in one transaction (recorded, or marked failed while the run goes on with the others: `Claims`),
so `roarfast retrain` and `roarfast sweep` resume, share a run directory and fail alike; `execute`, what the
sweep and retrain call with the Executor they were given; and the one in-flight loop of the backends whose cells train in other
processes (`execute_elsewhere`: local cell processes, Ray tasks).

This process (on Ray: the driver) holds every claim and writes every row; workers and cell processes only
train (roarfast.stages.cell_workers). So a lost worker node holds no claim: Ray runs its cells again elsewhere
(RAY_TASK_RETRIES), and a lost driver's claims are taken over by the next sweep (its process gone; from another
host, once its heartbeat is stale).
"""

import threading
import time
from contextlib import contextmanager

import torch

from roarfast.stages.cells import Cell, CellTrainer
from roarfast.stages.worker_view import NotShared
from roarfast.records.claims import HEARTBEAT_STALE_S
from roarfast.errors import UserError
from roarfast.common.options import check_positive
from roarfast.common.progress import format_duration, progress_bar
from roarfast.stages.executor import Executor
from roarfast.execution.registry import make_executor
from roarfast.measurements.db import ResultsDB
from roarfast.records.claims import HEARTBEAT_S, this_process

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


class Claims:
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


def check_workers(workers: int, group_size: int | None, device, executor: Executor | None = None) -> None:
    """Refuses, in one line, a --workers-per-cell that cannot work with the other choices: grouped cells (a group
    shares one device, a data-parallel cell spans several), or what `executor` (default: the local one) cannot
    give each worker (Executor.check_workers: a fraction of a GPU on Ray, more GPUs than this machine has)."""
    check_positive("--workers-per-cell", workers)
    if workers == 1:
        return
    if group_size not in (None, 1):
        raise UserError(f"--workers-per-cell {workers} and --group-size {group_size} exclude each other: a group "
                        f"shares one device, a data-parallel cell spans several; choose one")
    make_executor(executor).check_workers(workers, device)


def _check_batch(trainer: CellTrainer, workers: int) -> None:
    """Refuses a batch that the workers cannot split evenly, before any cell is claimed."""
    batch = min(trainer.recipe.batch_size, len(trainer.ds.train_index))
    if batch % workers:
        raise UserError(f"--workers-per-cell {workers}: each worker takes an equal share of a batch, and the "
                        f"batch has {batch} images; choose a divisor of {batch} (or set the batch with --recipe)")


def device_type(device) -> str:
    return torch.device(device).type


def execute(trainer: CellTrainer, todo: list, db, *, executor: Executor | str | None = None,
            progress: Progress | None = None, echo=print, group_size: int = 1, workers_per_cell: int = 1,
            cell_processes: int = 1, threads: int | None = None) -> None:
    """Trains the cells `todo` ([(Cell, key or None)]) with `executor` (an Executor, or its name: the registry
    makes it; None: the local one), claiming each first, `group_size` at a time (trainer.train_cells: together,
    or each alone at 1), or each over `workers_per_cell` processes (data-parallel), or (local, CPU) side by side
    in `cell_processes` processes, each cell with `threads` CPU threads (None: the executor's default,
    Executor.cell_threads); waits for cells other processes hold, taking over any whose claimant died, until every
    cell is done."""
    executor = make_executor(executor)
    if cell_processes != 1:
        executor.check_processes(cell_processes, trainer.device, group_size=group_size,
                                 workers_per_cell=workers_per_cell)
    if workers_per_cell != 1:
        check_workers(workers_per_cell, group_size, trainer.device, executor)
        _check_batch(trainer, workers_per_cell)
    threads = executor.cell_threads(trainer.device, threads, workers_per_cell=workers_per_cell,
                                    cell_processes=cell_processes)
    progress = progress or Progress(len(todo), enabled=False, echo=echo)
    try:
        executor.run_cells(trainer, list(todo), Claims(db, progress, echo, where=executor.where),
                           group_size=group_size, workers_per_cell=workers_per_cell, cell_processes=cell_processes,
                           threads=threads)
    finally:
        progress.close()


def thread_note(rows: list, threads: int) -> str | None:
    """The line that says that done cells of a configuration (`rows`, results rows) trained with other CPU thread
    counts than its cells left will (`threads`), which CPU accuracies depend on; None where none did (or none
    recorded its count: rows before results schema v4)."""
    others = {}
    for row in rows:
        if row is not None and row["status"] == "done" and row["threads"] not in (None, threads):
            others[row["threads"]] = others.get(row["threads"], 0) + 1
    if not others:
        return None
    counts = ", ".join(f"{n} with {t} thread{'s' if t > 1 else ''}" for t, n in sorted(others.items()))
    return (f"{sum(others.values())} done cell(s) of this configuration trained with other CPU thread counts ({counts})"
            f" than those left will ({threads}): CPU accuracies depend on it, and the report says so; "
            f"--threads-per-cell sets it")


@contextmanager
def torch_threads(threads: int):
    """torch at `threads` threads in this process for the duration, its count restored after."""
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def claim_group(trainer: CellTrainer, pending: list, claims: Claims, size: int) -> list:
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


def train_claimed(trainer: CellTrainer, group: list) -> list:
    """Per cell of the claimed `group` its metrics or the exception that failed it (trainer.train_cells; a
    single cell's exception is its outcome too). UserError and interruptions propagate."""
    try:
        return trainer.train_cells([cell for cell, _ in group])
    except (KeyboardInterrupt, UserError):
        raise
    except Exception as err:  # noqa: BLE001  (recorded; the run goes on with other cells)
        return [err] * len(group)


def finish_group(claims: Claims, group: list, outcomes: list, pending: list) -> None:
    """Records, or marks failed, each cell of `group` by its outcome (metrics or an exception)."""
    for (cell, key), outcome in zip(group, outcomes):
        if isinstance(outcome, BaseException):
            claims.finish(cell, key, pending, error=outcome)
        else:
            claims.finish(cell, key, pending, metrics=outcome)


def execute_elsewhere(trainer: CellTrainer, pending: list, claims: Claims, group_size: int, capacity, submit,
                       ready, outcome) -> None:
    """The loop of the executors whose cells train in other processes (Ray tasks, local processes): this process
    claims each group of `group_size` cells, submits it (`submit(cells)` -> a handle), keeps at most `capacity()`
    groups in flight, and finishes a group once `ready(handles)` (waiting at most POLL_S) returns its handle, by
    `outcome(handle)` (per cell its metrics or exception; an exception raised here fails the whole group, but
    worker_view.NotShared, a worker that does not see the run directory, which ends the run in its one line).
    The claims in flight are given back when this process ends the loop by an exception (an interruption,
    NotShared)."""
    in_flight = {}  # handle -> [(cell, key)]
    try:
        with claims.heartbeat():
            while pending or in_flight:
                submitted = False
                limit = capacity()
                while pending and len(in_flight) < limit:
                    group = claim_group(trainer, pending, claims, group_size)
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
                    except NotShared:  # no worker can work there: the run ends in its line
                        in_flight[handle] = group  # given back with the others
                        raise
                    except Exception as err:  # noqa: BLE001  (recorded; the run goes on with other cells)
                        outcomes = [err] * len(group)
                    finish_group(claims, group, outcomes, pending)
    except BaseException:
        for group in in_flight.values():
            for _, key in group:
                claims.release(key)
        raise
    claims.raise_failures()
