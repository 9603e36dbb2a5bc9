"""The executors: cells trained here (local) or as Ray tasks (ray), each claimed in results.sqlite before
it is trained (roarfast.results: claims and heartbeats) and finished there in one transaction.

Both executors share one path for a cell's life in the database (`_Claims`): claiming it, keeping the
heartbeat of its claim, and finishing it (its row recorded, or marked failed and the run going on with
the others), so `roarfast retrain` and `roarfast sweep` resume, share a run directory and fail alike.
"""

import threading
import time
from dataclasses import dataclass

from roarfast.cells import Cell, CellTrainer, cell_model
from roarfast.errors import UserError
from roarfast.plugins import named_imports
from roarfast.recipe import Recipe

EXECUTORS = ("local", "ray")
#: how often an executor waiting on cells that other processes train looks again
POLL_S = 2.0


@dataclass(frozen=True)
class RayOptions:
    """--executor ray: the cluster (`address`, None: a local Ray instance) and each cell's resources;
    `cpus_per_cell` None: as many as the threads a cell trains with here (local_threads), so that Ray's
    rows equal the local executor's."""

    address: str | None = None
    cpus_per_cell: float | None = None
    gpus_per_cell: float = 0.0

    def __post_init__(self):
        if (self.cpus_per_cell is not None and not self.cpus_per_cell > 0) or not self.gpus_per_cell >= 0:
            raise UserError(f"--cpus-per-cell must be > 0 and --gpus-per-cell >= 0, got {self.cpus_per_cell} and "
                            f"{self.gpus_per_cell}")


def local_threads() -> int:
    """The CPU threads a cell trains with in this process (torch's default: one per core, or
    OMP_NUM_THREADS): CPU accuracies depend on it, so a Ray worker is given as many by default."""
    import torch

    return torch.get_num_threads()


def import_ray():
    """The ray module, or a UserError saying how to install it."""
    try:
        import ray
    except ImportError:
        raise UserError("--executor ray needs Ray: pip install 'roarfast[ray]'") from None
    return ray


class Progress:
    """One line per finished cell (method, mode, fraction, seed, accuracy, seconds, count and, given
    `eta(cell, seconds, remaining)` -> seconds left or None, the ETA) over an overall bar."""

    def __init__(self, total: int, enabled: bool, echo, eta=None):
        from roarfast.progress import progress_bar

        self.total, self.echo, self.eta = total, echo, eta
        self.finished = 0
        self._bar_cm = progress_bar(total=total, desc="sweep", unit="cell", enabled=enabled)
        self.bar = self._bar_cm.__enter__()

    def cell_done(self, cell: Cell, metrics: dict, remaining: list):
        from roarfast.progress import format_duration

        self.finished += 1
        line = (f"[sweep] {self.finished}/{self.total} {cell.describe()}: {metrics['test_acc']:.1%} "
                f"({metrics['seconds']:.1f} s)")
        if self.eta is not None:
            line += f", ETA {format_duration(self.eta(cell, metrics['seconds'], remaining))}"
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
        from roarfast.results import HEARTBEAT_S

        self.db_path, self.keys, self.interval = db_path, keys, HEARTBEAT_S
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="roarfast-heartbeat", daemon=True)

    def _run(self):
        from roarfast.results import ResultsDB

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
        from roarfast.results import this_process

        self.db, self.progress, self.echo, self.where = db, progress, echo, where
        self.owner = this_process()
        self.held = set()
        self.failures = []

    def heartbeat(self) -> _Heartbeat:
        return _Heartbeat(self.db.path, self.held)

    def claim(self, key) -> bool | None:
        """True: claimed, ours to train now; None: done already (by anyone); False: a live process holds it."""
        if self.db.claim(key, self.owner):
            self.held.add(key)
            return True
        return None if self.db.is_done(key) else False

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


def execute(trainer: CellTrainer, todo: list, db, *, executor: str = "local", ray: RayOptions | None = None,
            progress: Progress | None = None, echo=print, group_size: int = 1) -> None:
    """Trains the cells `todo` ([(Cell, key or None)]) with `executor`, claiming each first, `group_size` at
    a time (trainer.train_cells: together, or each alone at 1); waits for cells other processes hold, taking
    over any whose claimant died, until every cell is done."""
    progress = progress or Progress(len(todo), enabled=False, echo=echo)
    try:
        if executor == "ray":
            _execute_ray(trainer, list(todo), _Claims(db, progress, echo, where=" on Ray"), ray or RayOptions(),
                         group_size)
        else:
            _execute_local(trainer, list(todo), _Claims(db, progress, echo), group_size)
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


#: per Ray worker process: the CellTrainer of the last run directory it served, so that a worker
#: loads the dataset and the ranks once for all the cells it trains
_WORKER_TRAINERS = {}


def _ray_train_cells(run_dir: str, settings: dict, cells: list) -> list:
    """A Ray task: trains `cells` (one alone, or several together) from what the run directory holds (a
    shared filesystem across nodes); returns per cell its metrics or the exception that failed it."""
    import json

    import torch

    from roarfast.models.spec import check_source
    from roarfast.plugins import user_named
    from roarfast.rundir import RunDir
    from roarfast.train import Grouping

    key = (run_dir, json.dumps(settings, sort_keys=True))
    if key not in _WORKER_TRAINERS:
        torch.set_num_threads(settings["threads"])
        run = RunDir(run_dir)
        with user_named(settings["imports"]):  # what the driver's user named: the records may name it here too
            ds = run.open_dataset()
        device = settings["device"]
        model = cell_model(run, ds, device, settings["model"])
        check_source(model, settings["model_source"], "the sweep's driver")
        # the driver's recipe as it recorded it: a worker on another device or version trains the same cells
        recipe = Recipe.from_dict(settings["recipe"])
        _WORKER_TRAINERS.clear()
        _WORKER_TRAINERS[key] = CellTrainer(run, ds, model, recipe, settings["fill"], device,
                                            grouping=Grouping(**settings["grouping"]))
    trainer = _WORKER_TRAINERS[key]
    return trainer.train_cells(cells)


def _default_cpus(ray) -> int:
    """CPUs (and threads) of a CPU cell on Ray when --cpus-per-cell is not given: local_threads(), at most the
    CPUs of the largest node (a task asking for more would never be scheduled)."""
    largest = max((node["Resources"].get("CPU", 0) for node in ray.nodes() if node.get("Alive")), default=1)
    return max(1, min(local_threads(), int(largest)))


def _execute_ray(trainer: CellTrainer, pending: list, claims: _Claims, options: RayOptions,
                 group_size: int = 1) -> None:
    """One Ray task per group of `group_size` cells (with one cell's resources); this process (the driver)
    claims each cell before submitting it, keeps its heartbeat, and finishes it when the task returns."""
    ray = import_ray()
    if not ray.is_initialized():
        ray.init(address=options.address, include_dashboard=False, log_to_driver=False)
    gpus = options.gpus_per_cell
    cpus = options.cpus_per_cell if options.cpus_per_cell is not None else (_default_cpus(ray) if gpus == 0 else 1)
    remote = ray.remote(num_cpus=cpus, num_gpus=gpus, max_retries=0)(_ray_train_cells)
    settings = {"device": "cuda" if gpus > 0 else "cpu", "model": trainer.model_name,
                "model_source": trainer.model.source_sha256, "fill": trainer.fill, "recipe": trainer.recipe.to_dict(),
                "threads": max(1, int(cpus)) if gpus == 0 else local_threads(),
                "grouping": {"size": group_size, "how": trainer.grouping.how, "compile": trainer.grouping.compile},
                "imports": named_imports()}
    slots = max(1, int(ray.cluster_resources().get("GPU" if gpus > 0 else "CPU", 1) // (gpus if gpus > 0 else cpus)))
    in_flight = {}  # ObjectRef -> [(cell, key)]
    try:
        with claims.heartbeat():
            while pending or in_flight:
                submitted = False
                while pending and len(in_flight) < slots:
                    group = _claim_group(trainer, pending, claims, group_size)
                    if not group:
                        break
                    in_flight[remote.remote(str(trainer.run.root), settings, [cell for cell, _ in group])] = group
                    submitted = True
                if not in_flight:
                    if pending and not submitted:
                        time.sleep(POLL_S)
                    continue
                ready, _ = ray.wait(list(in_flight), num_returns=1, timeout=POLL_S)
                for ref in ready:
                    group = in_flight.pop(ref)
                    try:
                        outcomes = ray.get(ref)
                    except Exception as err:  # noqa: BLE001  (recorded; the run goes on with other cells)
                        outcomes = [err] * len(group)
                    _finish_group(claims, group, outcomes, pending)
    except BaseException:
        for group in in_flight.values():
            for _, key in group:
                claims.release(key)
        raise
    claims.raise_failures()
