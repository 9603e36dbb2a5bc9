"""`roarfast sweep`: the whole benchmark grid (DESIGN.md section 10) — methods x modes x fractions x
seeds, each cell beside its mask-only control — resumable, shareable and local or on Ray.

It trains the base model when the run directory has none, extracts the ranks the store lacks, then
runs the cells results.sqlite lacks. Every cell is claimed in results.sqlite before it is trained
(roarfast.results: claims and heartbeats), so a killed sweep loses at most its cells in flight and
two sweeps on one run directory split the grid; a sweep returns once every cell of its grid is done.
"""

import json
import math
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from roarfast.cells import FILLS, GRID_MODES, CellSpec, CellTrainer, cell_recipe
from roarfast.errors import UserError

#: estimators of the paper's study: three base estimators and their SmoothGrad ensembles, and the controls
PAPER_METHODS = ("grad", "ig", "gb", "sg", "sg-sq", "var", "sg-ig", "sg-sq-ig", "var-ig", "sg-gb", "sg-sq-gb",
                 "var-gb", "random", "sobel")
#: named grids: `paper` is the paper's study (700 retrainings plus controls); `quick` is what
#: `roarfast run` uses on the embedded dataset: enough seeds for a verdict, minutes on 2 CPU cores
PRESETS = {
    "paper": {"methods": ",".join(PAPER_METHODS), "fractions": (0.1, 0.3, 0.5, 0.7, 0.9), "modes": GRID_MODES,
              "seeds": 5, "control": True, "control_seeds": None, "epochs": None},
    # the ground truth, the reference, a base estimator and its best ensemble; controls are tested against
    # chance on the test split, which one seed already allows (binomial test); the embedded dataset is
    # learned in 3 epochs (base model 96.5% test, random ROAR at 0.5: 70%)
    "quick": {"methods": "oracle,random,grad,sg-sq", "fractions": (0.1, 0.25, 0.5), "modes": GRID_MODES,
              "seeds": 3, "control": True, "control_seeds": 1, "epochs": 3},
}
EXECUTORS = ("local", "ray")
#: how often a sweep waiting on cells that other processes train looks again
POLL_S = 2.0


@dataclass(frozen=True)
class Grid:
    """A sweep's cells: `methods` (comma-separated, as --method) x `modes` x `fractions` x seeds
    `first_seed`.. `first_seed + seeds - 1`, each with its mask-only control when `control` (for the first
    `control_seeds` seeds only, when given). `fill`, `model`, `epochs` and `amp` configure the training."""

    methods: str = ",".join(PAPER_METHODS)
    modes: tuple = GRID_MODES
    fractions: tuple = (0.1, 0.3, 0.5, 0.7, 0.9)
    seeds: int = 1
    first_seed: int = 0
    control: bool = True
    control_seeds: int | None = None
    fill: str = "dataset-mean"
    model: str | None = None
    epochs: int | None = None
    amp: str = "auto"

    def __post_init__(self):
        bad = [m for m in self.modes if m not in GRID_MODES]
        if bad or not self.modes:
            raise UserError(f"modes are {' and '.join(GRID_MODES)}, got {','.join(self.modes) or 'none'}")
        bad = [f for f in self.fractions if not (isinstance(f, (int, float)) and 0.0 < f <= 1.0)]
        if bad or not self.fractions:
            raise UserError(f"fractions must lie in (0, 1], got {', '.join(map(str, bad)) or 'none'}")
        if isinstance(self.seeds, bool) or not isinstance(self.seeds, int) or self.seeds < 1:
            raise UserError(f"--seeds should be a positive int, got {self.seeds!r}")
        if self.control_seeds is not None and self.control_seeds < 1:
            raise UserError(f"--control-seeds should be a positive int, got {self.control_seeds!r}")
        if self.fill not in FILLS:
            raise UserError(f"--fill should be one of {', '.join(FILLS)}, got {self.fill!r}")

    def method_list(self) -> list[str]:
        """The methods, parsed and checked; random is always part of a grid (the reference)."""
        from roarfast.methods import parse_methods

        try:
            methods = parse_methods(self.methods)
        except ValueError as err:
            raise UserError(str(err)) from None
        return methods if "random" in methods else ["random", *methods]

    def cells(self) -> list[CellSpec]:
        """Every cell in run order: by method, mode, fraction, seed; a cell's control right after it."""
        out = []
        for method in self.method_list():
            for mode in self.modes:
                for fraction in self.fractions:
                    for seed in range(self.first_seed, self.first_seed + self.seeds):
                        out.append(CellSpec(method, mode, float(fraction), seed))
                        controlled = self.control_seeds is None or seed < self.first_seed + self.control_seeds
                        if self.control and controlled:
                            out.append(CellSpec(method, mode, float(fraction), seed, control=True))
        return out


def preset_grid(name: str, **overrides) -> Grid:
    """The Grid of preset `name` with `overrides` (None values ignored)."""
    if name not in PRESETS:
        raise UserError(f"--preset should be one of {', '.join(PRESETS)}, got {name!r}")
    values = {**PRESETS[name], **{k: v for k, v in overrides.items() if v is not None}}
    return Grid(**values)


@dataclass
class Plan:
    """What a sweep has left: its cells with their keys (None where the ranks are not extracted yet, so
    the cell cannot be done), which are done, and the seconds per cell measured in this run directory."""

    cells: list
    done: set = field(default_factory=set)
    running: set = field(default_factory=set)
    seconds: dict = field(default_factory=dict)  # "cell" / "control" -> mean seconds of the done ones

    @property
    def todo(self) -> list:
        return [(spec, key) for spec, key in self.cells if spec not in self.done]

    def eta(self, todo=None) -> float | None:
        """Seconds the cells `todo` (default: all left) should take, from the measured rates; None when
        no cell of a needed kind was measured yet."""
        total = 0.0
        for spec, _ in self.todo if todo is None else todo:
            rate = self.seconds.get("control" if spec.control else "cell")
            if rate is None:
                return None
            total += rate
        return total


def make_plan(trainer: CellTrainer, grid: Grid, db) -> Plan:
    """The grid's cells against results.sqlite."""
    from roarfast.results import owner_alive

    params = {m: trainer.ranks_params(m) for m in grid.method_list()}
    plan = Plan(cells=[(spec, trainer.cell(spec, params[spec.method]) if params[spec.method] else None)
                       for spec in grid.cells()])
    for spec, key in plan.cells:
        row = db.get(key) if key is not None else None
        if row is not None and row["status"] == "done":
            plan.done.add(spec)
        elif row is not None and row["status"] == "running" and owner_alive(row["owner"], row["heartbeat"]):
            plan.running.add(spec)
    measured = db.rows(status="done", model=trainer.model_name, dataset=trainer.ds.name)
    for kind, control in (("cell", False), ("control", True)):
        seconds = [r["seconds"] for r in measured if r["mode"].endswith("-mask") == control]
        if seconds:
            plan.seconds[kind] = sum(seconds) / len(seconds)
    return plan


def format_duration(seconds: float | None) -> str:
    if seconds is None or not math.isfinite(seconds):
        return "unknown"
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


def describe_plan(plan: Plan, grid: Grid) -> list[str]:
    """The --dry-run text: cells done and to do, and the ETA from this run directory's measured rates."""
    controls = sum(spec.control for spec, _ in plan.cells)
    todo = plan.todo
    lines = [f"grid: {len(grid.method_list())} methods x {len(grid.modes)} modes x {len(grid.fractions)} fractions "
             f"x {grid.seeds} seeds = {len(plan.cells) - controls} cells + {controls} mask-only controls",
             f"done: {len(plan.done)}, to do: {len(todo)}"
             + (f" ({len(plan.running)} being trained by another process)" if plan.running else "")]
    if plan.seconds:
        rates = ", ".join(f"{format_duration(v)} per {k}" for k, v in sorted(plan.seconds.items()))
        lines.append(f"ETA: {format_duration(plan.eta())} (measured here: {rates})")
    else:
        lines.append("ETA: unknown (no cell has finished in this run directory yet)")
    return lines


def run_sweep(run_dir, grid: Grid, *, executor: str = "local", ray_address: str | None = None,
              cpus_per_cell: float = 1.0, gpus_per_cell: float = 0.0, dry_run: bool = False, dataset=None,
              data_dir=None, dataset_options=None, device="auto", seed: int = 0, progress: bool = True,
              extract_options=None, dataset_obj=None, echo=print) -> dict:
    """Runs `grid` in run_dir: base model, ranks, then every cell not yet done. Returns
    {"plan": Plan, "rows": [row of each cell of the grid]} (rows empty on a dry run)."""
    from roarfast.device import resolve_device
    from roarfast.memory import keep_freed_memory
    from roarfast.results import ResultsDB
    from roarfast.rundir import open_dataset

    keep_freed_memory()
    if executor not in EXECUTORS:
        raise UserError(f"--executor should be one of {', '.join(EXECUTORS)}, got {executor!r}")
    if executor == "ray":
        _import_ray()  # fail before any work when Ray is missing
    run_dir = Path(run_dir)
    device = resolve_device(device)
    ds = dataset_obj if dataset_obj is not None else open_dataset(run_dir, dataset, data_dir, dataset_options)
    methods = grid.method_list()
    if not dry_run:
        _ensure_base_model(run_dir, ds, device, seed, progress, echo)
        _ensure_ranks(run_dir, ds, methods, device, seed, progress, extract_options, echo)
    model_name, recipe = cell_recipe(run_dir, ds, device, model=grid.model, epochs=grid.epochs, amp=grid.amp)
    trainer = CellTrainer(run_dir, ds, model_name, recipe, grid.fill, device, progress=False)
    if not dry_run:
        trainer.check_fill(methods)
    if dry_run:
        if not (run_dir / "results.sqlite").exists():
            plan = Plan(cells=[(spec, None) for spec in grid.cells()])
        else:
            with ResultsDB(run_dir / "results.sqlite") as db:
                plan = make_plan(trainer, grid, db)
        for line in describe_plan(plan, grid):
            echo(line)
        return {"plan": plan, "rows": []}
    with ResultsDB(run_dir / "results.sqlite") as db:
        plan = make_plan(trainer, grid, db)
        for line in describe_plan(plan, grid):
            echo(f"[sweep] {line}")
        if executor == "ray":
            _execute_ray(trainer, plan, db, ray_address, cpus_per_cell, gpus_per_cell, progress, echo)
        else:
            execute_local(trainer, plan, db, progress, echo)
        rows = [db.get(key) for _, key in plan.cells]
        # every retraining of the run directory, this grid's and earlier ones' (other fills, fractions)
        retrained = db.rows(status="done", mode=["roar", "kar", "roar-mask", "kar-mask"])
    _record_stage(run_dir, "retrain", sum(r["seconds"] for r in retrained))
    return {"plan": plan, "rows": rows}


def _record_stage(run_dir, stage: str, value) -> None:
    """Merges one stage's seconds into <run_dir>/stages.json (the report's stage times)."""
    from roarfast.atomic import write_json

    path = Path(run_dir) / "stages.json"
    stages = json.loads(path.read_text()) if path.exists() else {}
    if isinstance(value, dict):
        stages[stage] = {**stages.get(stage, {}), **value}
    else:
        stages[stage] = value
    write_json(path, stages)


def _ensure_base_model(run_dir, ds, device, seed, progress, echo) -> dict:
    """The base model of run_dir when it was trained on this dataset, else a newly trained one."""
    from roarfast.cells import base_meta
    from roarfast.train import run_train

    meta = base_meta(run_dir)
    if meta and meta.get("dataset_fingerprint") == ds.fingerprint:
        echo(f"[sweep] base model: reusing {meta['model']} (test {meta['test_acc']:.1%})")
    else:
        summary = run_train(run_dir, dataset_obj=ds, seed=seed, device=device, progress=progress)
        echo(f"[sweep] base model: val {summary['val_acc']:.1%}, test {summary['test_acc']:.1%} "
             f"({summary['seconds']:.0f} s)")
        meta = base_meta(run_dir)
    _record_stage(run_dir, "train", meta.get("seconds", 0.0))
    return meta


def _ensure_ranks(run_dir, ds, methods, device, seed, progress, extract_options, echo) -> None:
    """Extracts the methods whose ranks the store lacks (a complete store is left as it is)."""
    from roarfast.extract import ExtractOptions, run_extract

    from roarfast.store import RankStore

    store = RankStore(run_dir)
    # a method complete in both splits is used as it is, whatever options `roarfast extract` made it with
    missing = [m for m in methods if m not in store.methods("train") or m not in store.methods("test")]
    if not missing:
        return
    options = replace(extract_options or ExtractOptions(), methods=",".join(missing))
    started = time.perf_counter()
    run_extract(run_dir, options, dataset_obj=ds, device=device, seed=seed, progress=progress)
    # methods extracted together share their passes (one set of noisy samples, one loader pass): one time
    seconds = time.perf_counter() - started
    echo(f"[sweep] extract: {', '.join(missing)} in {seconds:.0f} s")
    _record_stage(run_dir, "extract", {", ".join(missing): seconds})


class _Heartbeat:
    """Refreshes the heartbeat of the claims in `cells` (a set it reads each time) from a thread with its
    own connection, so a long cell is never mistaken for an abandoned one."""

    def __init__(self, db_path, cells: set):
        from roarfast.results import HEARTBEAT_S

        self.db_path, self.cells, self.interval = db_path, cells, HEARTBEAT_S
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="roarfast-heartbeat", daemon=True)

    def _run(self):
        from roarfast.results import ResultsDB

        with ResultsDB(self.db_path) as db:
            while not self._stop.wait(self.interval):
                db.heartbeat(self.cells.copy())  # one C-level copy: the trainer thread adds and removes cells

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


class _Progress:
    """One line per finished cell (method, mode, fraction, seed, accuracy, seconds, count, ETA) over an
    overall bar."""

    def __init__(self, plan: Plan, enabled: bool, echo):
        from roarfast.progress import progress_bar

        self.plan, self.echo = plan, echo
        self.total = len(plan.todo)
        self.finished = 0
        self._bar_cm = progress_bar(total=self.total, desc="sweep", unit="cell", enabled=enabled)
        self.bar = self._bar_cm.__enter__()

    def cell_done(self, spec: CellSpec, metrics: dict, remaining: list):
        self.finished += 1
        kind = "control" if spec.control else "cell"
        rates = self.plan.seconds
        rates[kind] = metrics["seconds"] if kind not in rates else 0.8 * rates[kind] + 0.2 * metrics["seconds"]
        line = (f"[sweep] {self.finished}/{self.total} {spec.describe()}: {metrics['test_acc']:.1%} "
                f"({metrics['seconds']:.1f} s), ETA {format_duration(self.plan.eta(remaining))}")
        self.bar.update(1)
        self.bar.clear()
        self.echo(line)
        self.bar.refresh()

    def close(self):
        self._bar_cm.__exit__(None, None, None)


def execute_local(trainer: CellTrainer, plan: Plan, db, progress: bool = True, echo=print) -> None:
    """Trains the plan's cells in this process, claiming each first; waits for cells other processes
    hold, taking over any whose claimant died, until every cell is done."""
    from roarfast.results import this_process

    pending = [(spec, key) for spec, key in plan.todo]
    claimed = set()
    bar = _Progress(plan, progress, echo)
    owner = this_process()
    failures = []
    try:
        with _Heartbeat(db.path, claimed):
            while pending:
                progressed = False
                for item in list(pending):
                    spec, key = item
                    if key is None:
                        key = trainer.cell(spec)
                    if not db.claim(key, owner):
                        if db.is_done(key):
                            pending.remove(item)
                        continue
                    claimed.add(key)
                    try:
                        metrics = trainer.train(spec)
                    except (KeyboardInterrupt, UserError):
                        db.release(key, owner)
                        raise
                    except Exception as err:  # noqa: BLE001  (recorded; the sweep goes on with other cells)
                        db.mark_failed(key, f"{type(err).__name__}: {err}")
                        failures.append((spec, err))
                        echo(f"[sweep] {spec.describe()}: FAILED ({type(err).__name__}: {err})")
                        pending.remove(item)
                        continue
                    finally:
                        claimed.discard(key)
                    db.record(key, metrics)
                    pending.remove(item)
                    progressed = True
                    bar.cell_done(spec, metrics, pending)
                if pending and not progressed:
                    time.sleep(POLL_S)  # the rest is held by live processes: wait for them (or their end)
    finally:
        bar.close()
    if failures:
        spec, err = failures[0]
        raise UserError(f"{len(failures)} cell(s) failed, e.g. {spec.describe()}: {type(err).__name__}: {err} "
                        f"(marked failed in results.sqlite; the same command retries them)")


def _import_ray():
    try:
        import ray
    except ImportError:
        raise UserError("--executor ray needs Ray: pip install 'roarfast[ray]'") from None
    return ray


#: per Ray worker process: the CellTrainer of the last run directory it served, so that a worker
#: loads the dataset and the ranks once for all the cells it trains
_WORKER_TRAINERS = {}


def _ray_train_cell(run_dir: str, settings: dict, spec: CellSpec) -> dict:
    """A Ray task: trains one cell from what the run directory holds (a shared filesystem across nodes)."""
    import torch

    from roarfast.rundir import open_dataset

    key = (run_dir, json.dumps(settings, sort_keys=True))
    if key not in _WORKER_TRAINERS:
        torch.set_num_threads(settings["threads"])
        ds = open_dataset(run_dir)
        device = settings["device"]
        model_name, recipe = cell_recipe(run_dir, ds, device, model=settings["model"], epochs=settings["epochs"],
                                         amp=settings["amp"])
        if recipe.to_dict() != settings["recipe"]:
            raise UserError(f"the worker's recipe for {model_name} differs from the driver's: a different "
                            f"device or roarfast version on the worker ({recipe} vs {settings['recipe']})")
        _WORKER_TRAINERS.clear()
        _WORKER_TRAINERS[key] = CellTrainer(run_dir, ds, model_name, recipe, settings["fill"], device)
    return _WORKER_TRAINERS[key].train(spec)


def _execute_ray(trainer: CellTrainer, plan: Plan, db, address, cpus_per_cell, gpus_per_cell, progress, echo):
    """One Ray task per cell; this process (the driver) claims each cell before submitting it, keeps its
    heartbeat, and writes its row when the task returns."""
    import torch

    from roarfast.results import this_process

    ray = _import_ray()
    if cpus_per_cell <= 0 or gpus_per_cell < 0:
        raise UserError(f"--cpus-per-cell must be > 0 and --gpus-per-cell >= 0, got {cpus_per_cell} and "
                        f"{gpus_per_cell}")
    if not ray.is_initialized():
        ray.init(address=address, include_dashboard=False, log_to_driver=False)
    remote = ray.remote(num_cpus=cpus_per_cell, num_gpus=gpus_per_cell, max_retries=0)(_ray_train_cell)
    settings = {"device": "cuda" if gpus_per_cell > 0 else "cpu", "model": trainer.model_name,
                "epochs": trainer.recipe.epochs, "amp": "off" if trainer.recipe.amp is None else trainer.recipe.amp,
                "fill": trainer.fill, "recipe": trainer.recipe.to_dict(),
                "threads": max(1, int(cpus_per_cell)) if gpus_per_cell == 0 else torch.get_num_threads()}
    slots = max(1, int(ray.cluster_resources().get("GPU" if gpus_per_cell > 0 else "CPU", 1)
                       // (gpus_per_cell if gpus_per_cell > 0 else cpus_per_cell)))
    owner = this_process()
    pending = list(plan.todo)
    in_flight = {}  # ObjectRef -> (spec, key)
    claimed = set()
    bar = _Progress(plan, progress, echo)
    failures = []
    try:
        with _Heartbeat(db.path, claimed):
            while pending or in_flight:
                submitted = False
                for item in list(pending):
                    if len(in_flight) >= slots:
                        break
                    spec, key = item
                    key = key or trainer.cell(spec)
                    if db.claim(key, owner):
                        claimed.add(key)
                        in_flight[remote.remote(str(trainer.run_dir), settings, spec)] = (spec, key)
                        pending.remove(item)
                        submitted = True
                    elif db.is_done(key):
                        pending.remove(item)
                if not in_flight:
                    if pending and not submitted:
                        time.sleep(POLL_S)
                    continue
                ready, _ = ray.wait(list(in_flight), num_returns=1, timeout=POLL_S)
                for ref in ready:
                    spec, key = in_flight.pop(ref)
                    claimed.discard(key)
                    try:
                        metrics = ray.get(ref)
                    except Exception as err:  # noqa: BLE001  (recorded; the sweep goes on with other cells)
                        db.mark_failed(key, f"{type(err).__name__}: {err}")
                        failures.append((spec, err))
                        echo(f"[sweep] {spec.describe()}: FAILED on Ray ({type(err).__name__})")
                        continue
                    db.record(key, metrics)
                    bar.cell_done(spec, metrics, pending)
    except BaseException:
        for spec, key in in_flight.values():
            db.release(key, owner)
        raise
    finally:
        bar.close()
    if failures:
        spec, err = failures[0]
        raise UserError(f"{len(failures)} cell(s) failed on Ray, e.g. {spec.describe()}: {err}")
