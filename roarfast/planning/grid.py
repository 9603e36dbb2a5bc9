"""The benchmark grid (README, "The whole benchmark"): the named presets, a Grid's cells, the plan of what is
left against results.sqlite, and its ETA from the rates measured in the run directory. `roarfast sweep` runs a
plan through the executors; nothing below the sweep imports this module.
"""

from dataclasses import dataclass, field, replace

from roarfast.stages.cells import Cell, CellOptions, cell_methods
from roarfast.errors import UserError
from roarfast.rundir.configurations import grid_of
from roarfast.records.model import ModelRecord
from roarfast.modes import MODES, is_control
from roarfast.common.options import MAX_SEEDS, check_positive, check_seed
from roarfast.common.plugins import shown_method
from roarfast.common.progress import format_duration
from roarfast.recipe import BASE_MODEL, Recipe, default_model, effective_recipe
from roarfast.stages.step_times import STEP_FIELDS

#: estimators of the paper's study: three base estimators and their SmoothGrad ensembles, and the controls
PAPER_METHODS = ("grad", "ig", "gb", "sg", "sg-sq", "var", "sg-ig", "sg-sq-ig", "var-ig", "sg-gb", "sg-sq-gb",
                 "var-gb", "random", "sobel")
#: named grids: `paper` is the paper's study (700 retrainings plus controls); `quick` is what
#: `roarfast run` uses on the embedded dataset: enough seeds for a verdict, minutes on 2 CPU cores
PRESETS = {
    "paper": {"methods": ",".join(PAPER_METHODS), "fractions": (0.1, 0.3, 0.5, 0.7, 0.9), "modes": MODES,
              "seeds": 5, "control": True, "control_seeds": None, "epochs": None},
    # the ground truth, the reference, a base estimator and its best ensemble; controls are tested against
    # chance on the test split, which one seed already allows (binomial test); the embedded dataset is
    # learned in 3 epochs (`roarfast run`: fastnet-small on 1,500 training images, demo.py; base model 100%
    # test, random ROAR at 0.5: 74-78%)
    "quick": {"methods": "oracle,random,grad,sg-sq", "fractions": (0.1, 0.25, 0.5), "modes": MODES,
              "seeds": 3, "control": True, "control_seeds": 1, "epochs": 3, "truth_only": ("oracle",)},
}


@dataclass(frozen=True)
class Grid(CellOptions):
    """A sweep's cells: CellOptions (methods x modes x fractions x seeds, how each trains) with the seeds
    starting at `first_seed`, each cell with its mask-only control when `control` (for the first
    `control_seeds` seeds only, when given). `truth_only`: a preset's methods that read ground-truth masks,
    left out (for_data) where the data has none; methods the user names are never left out."""

    methods: str = ",".join(PAPER_METHODS)
    modes: tuple = MODES
    fractions: tuple = (0.1, 0.3, 0.5, 0.7, 0.9)
    first_seed: int = 0
    control: bool = True
    control_seeds: int | None = None
    truth_only: tuple = ()

    def __post_init__(self):
        super().__post_init__()
        check_positive("--control-seeds", self.control_seeds, optional=True, most=MAX_SEEDS)
        check_seed("--seed", self.first_seed)
        check_seed("--seed + --seeds - 1 (the last seed)", self.first_seed + self.seeds - 1)

    def method_list(self) -> list[str]:
        return cell_methods(self.methods)

    def for_data(self, selection, name: str, ground_truth: bool) -> tuple["Grid", object, str | None]:
        """This grid and `selection` (a roarfast.methods.selection.Selection of method_list()) for the dataset
        `name`: without the truth_only methods when the data has no ground-truth masks, with the line that says
        so (else None); a method the user named that reads masks the data lacks is refused (UserError:
        Selection.check_ground_truth), before anything is trained."""
        grid, note = self, None
        left_out = [m for m in selection.names if m in self.truth_only]
        if left_out and not ground_truth:
            kept = [m for m in selection.names if m not in left_out]
            grid, selection = replace(self, methods=",".join(kept), truth_only=()), selection.only(kept)
            note = f"the preset's {', '.join(left_out)} left out: dataset {name} has no ground-truth masks"
        selection.check_ground_truth(name, ground_truth)
        return grid, selection, note

    def cells(self, methods: list[str] | None = None) -> list[Cell]:
        """Every cell in run order: by method, mode, fraction, seed; a cell's control right after it. `methods`:
        method_list() as a stage resolved it (Selection.names), so that it is not parsed again."""
        methods = self.method_list() if methods is None else methods
        return self.expand(methods, self.first_seed, self.control, self.control_seeds)

    def record(self, methods: list[str]) -> dict:
        """The grid of `methods` (as the stage resolved them) as its configuration records it
        (roarfast.rundir.configurations.grid_of)."""
        seeds = range(self.first_seed, self.first_seed + self.seeds)
        controls = (seeds if self.control_seeds is None else seeds[:self.control_seeds]) if self.control else ()
        return grid_of(methods, self.modes, self.fractions, seeds, controls, self.fill)


def sweep_base(run, ds, grid: Grid, device, seed: int) -> tuple:
    """(id, spec, recipe) of the base model a sweep of `grid` on ds (a Dataset or a preview's outline) takes:
    HEAD's when it was trained on this data with `seed`, or adopted for this data (`train --weights`), of
    grid.model when it names one (spec and recipe None: its meta says them); else the one of the id the grid's
    own settings make, reused where the run directory holds it, else trained beside the others."""
    # late: loads torch, and --help imports this module
    from roarfast.models.probe import checked_model

    head = run.head()
    meta = run.model_meta(head.base)
    if meta and meta.get("dataset_fingerprint") == ds.fingerprint and (meta.get("seed") == seed or "adopted" in meta):
        named = None if grid.model is None else checked_model(grid.model, ds).name
        if named in (None, meta["model"]):
            return head.base, None, None
    spec = checked_model(grid.model or default_model(ds, device), ds)
    recipe = effective_recipe(spec, device, ds, grid, stage=BASE_MODEL)  # the grid's --epochs are its cells'
    return ModelRecord.trained(spec, ds, recipe, seed).id, spec, recipe


def preset_grid(name: str, **overrides) -> Grid:
    """The Grid of preset `name` with `overrides` (None values ignored)."""
    if name not in PRESETS:
        raise UserError(f"--preset should be one of {', '.join(PRESETS)}, got {name!r}")
    given = {k: v for k, v in overrides.items() if v is not None}
    if "methods" in given:  # methods the user names are theirs: one the data cannot serve is refused
        given["truth_only"] = ()
    return Grid(**{**PRESETS[name], **given})


@dataclass
class Plan:
    """What a sweep has left: its cells with their keys (None where the ranks are not extracted yet, so
    the cell cannot be done), which are done, and the seconds per cell measured in this run directory."""

    cells: list
    done: set = field(default_factory=set)
    running: set = field(default_factory=set)
    seconds: dict = field(default_factory=dict)  # "cell" / "control" -> mean seconds of the done ones
    estimated: dict = field(default_factory=dict)  # "cell" / "control" -> seconds a dry run estimates, where unmeasured

    @property
    def methods(self) -> list[str]:
        """The methods of its cells, in run order."""
        return list(dict.fromkeys(cell.method for cell, _ in self.cells))

    @property
    def todo(self) -> list:
        return [(cell, key) for cell, key in self.cells if cell not in self.done]

    def eta(self, todo=None) -> float | None:
        """Seconds the cells `todo` (default: all left) should take, from the measured rates, else the estimated
        ones; None when a needed kind has neither."""
        total = 0.0
        for cell, _ in self.todo if todo is None else todo:
            rate = self.seconds.get(rate_kind(cell), self.estimated.get(rate_kind(cell)))
            if rate is None:
                return None
            total += rate
        return total

    def finished(self, cell: Cell, seconds: float, remaining: list) -> float | None:
        """Folds a cell just trained (in `seconds`) into the rates; returns the ETA of `remaining`."""
        kind = rate_kind(cell)
        self.seconds[kind] = seconds if kind not in self.seconds else 0.8 * self.seconds[kind] + 0.2 * seconds
        return self.eta(remaining)


def rate_kind(cell: Cell) -> str:
    """Controls train on patterns alone and are timed apart from the cells."""
    return "control" if cell.control else "cell"


def make_plan(trainer, grid: Grid, db, methods: list[str]) -> Plan:
    """The grid's cells of `methods` (its method_list() as the stage resolved it: Selection.names) against
    results.sqlite (db), keyed by the CellTrainer `trainer` (a cell's key holds its base model and its ranks' id:
    a cell of another base model or other ranks is never done here); a method whose ranks' provenance the
    trainer does not know has no key, so none of its cells is done. In a run directory of format 1 (a dry run
    reads it as it is), a cell its migration will prove is done."""
    # late: loads torch, and --help imports this module
    from roarfast.rundir.migrate import migrated_row
    from roarfast.records.claims import owner_alive

    params = {m: trainer.ranks_params(m) for m in methods}
    plan = Plan(cells=[(cell, trainer.key(cell, params[cell.method]) if params[cell.method] else None)
                       for cell in grid.cells(methods)])
    for cell, key in plan.cells:
        row = (db.get(key) or migrated_row(trainer.run, db, key)) if key is not None else None
        if row is not None and row["status"] == "done":
            plan.done.add(cell)
        elif row is not None and row["status"] == "running" and owner_alive(row["owner"], row["heartbeat"]):
            plan.running.add(cell)
    plan.seconds = measured_rates(trainer.run, db, trainer.model_name, trainer.ds, trainer.recipe)
    return plan


def measured_rates(run, db, model: str, ds, recipe) -> dict:
    """{"cell" / "control": the mean seconds a cell of `recipe` on ds (a Dataset or a preview's outline) should
    take}, from the retrainings of `model` on this dataset done in the run directory (db: its results), each
    scaled from its own epochs and training images to these; only those trained with the same step settings
    (roarfast.stages.step_times.STEP_FIELDS: batch, precision, augmentation), whose data the run directory records."""
    # late: loads torch, and --help imports this module
    from roarfast.measurements.row import RETRAIN

    images = {ds.fingerprint: len(ds.train_index)}
    scaled = {}
    for row in db.rows(kind=RETRAIN, status="done", model=model, dataset=ds.name):
        config = row.get("config") or {}
        if "recipe" not in config or not row["epochs"]:
            continue
        done = Recipe.from_dict(config["recipe"])
        if any(getattr(done, name) != getattr(recipe, name) for name in STEP_FIELDS):
            continue
        fingerprint = config.get("dataset")
        if fingerprint not in images:
            record = (run.dataset_record(fingerprint) if fingerprint else None) or {}
            counts = record.get("images")
            images[fingerprint] = counts["train"] - counts["validation"] if counts else None
        if images[fingerprint]:
            per_image_epoch = row["seconds"] / (row["epochs"] * images[fingerprint])
            kind = "control" if is_control(row["mode"]) else "cell"
            scaled.setdefault(kind, []).append(per_image_epoch * recipe.epochs * len(ds.train_index))
    return {kind: sum(seconds) / len(seconds) for kind, seconds in scaled.items()}


def describe_grid(plan: Plan, grid: Grid) -> tuple[str, str]:
    """(the grid: methods x modes x fractions x seeds = cells + controls; the cells done and to do)."""
    controls = sum(cell.control for cell, _ in plan.cells)
    seeds = range(grid.first_seed, grid.first_seed + grid.seeds)
    controlled = seeds if grid.control_seeds is None else seeds[:grid.control_seeds]
    shape = (f"methods {', '.join(map(shown_method, plan.methods))} x modes {', '.join(grid.modes)} x fractions "
             f"{', '.join(f'{f:g}' for f in grid.fractions)} x seeds {_span(seeds)} = {len(plan.cells) - controls} cells"
             + (f" + {controls} mask-only controls (seeds {_span(controlled)})" if controls else ", no controls"))
    progress = (f"done: {len(plan.done)}, to do: {len(plan.todo)}"
                + (f" ({len(plan.running)} being trained by another process)" if plan.running else ""))
    return shape, progress


def _span(seeds: range) -> str:
    return str(seeds[0]) if len(seeds) == 1 else f"{seeds[0]}-{seeds[-1]}"


def describe_plan(plan: Plan, grid: Grid) -> list[str]:
    """The lines a sweep starts with: its grid, the cells done and to do, and the ETA from this run directory's
    measured rates, else from the estimate a dry run gives (Plan.estimated)."""
    shape, progress = describe_grid(plan, grid)
    lines = [f"grid: {shape}", progress]
    sources = []
    if plan.seconds:
        sources.append("measured here: " + ", ".join(f"{format_duration(v)} per {k}"
                                                       for k, v in sorted(plan.seconds.items())))
    estimated = {k: v for k, v in plan.estimated.items() if k not in plan.seconds}
    if estimated:
        sources.append("estimated from the step times kept on this machine, as a dry run: " + ", ".join(
            f"{format_duration(v)} per {k}" for k, v in sorted(estimated.items())))
    if not plan.todo:
        lines.append("ETA: 0s (nothing left to do)")
    elif sources and plan.eta() is not None:
        lines.append(f"ETA: {format_duration(plan.eta())} ({'; '.join(sources)})")
    else:
        lines.append("ETA: unknown (no cell has finished in this run directory yet, and no step time was kept)")
    return lines
