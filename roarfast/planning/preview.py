"""What a sweep would do, found without doing any of it: `roarfast sweep --dry-run` prints it and a Study
displays it. The data (canvas, image counts, classes), the base model's recipe (a reused one's as its meta.json
records it) and whether it is reused (by id) or trained beside the ones kept, the ranks extracted or reused (by
id; RunDir.ranks_to_make: a store of another provenance is made again), the cells done and to do (cells whose
ranks are made again are never done) and their configuration's id, and each stage's cost (roarfast.planning.costs:
images, bytes on disk, peak memory, device-hours, its time over N workers) on this machine's device or on a
stated one: the cells from the rates measured in the run directory scaled to their epochs and images where
there are any, else, as the other stages, from measured step times (roarfast.planning.estimate, kept per machine in
roarfast.stages.step_times). Nothing is trained, extracted or written; the run directory is only read.

A run directory that records its dataset (HEAD.json, written with the base model) is previewed from that
record when the same dataset is asked for, and a fresh one from the dataset's outline where its loader gives
one (roarfast.data.outline_dataset: the embedded dataset's options, an image tree's listing), so a dry run
does not load (generate, decode) the data; any other dataset is loaded.
"""

import html
import math
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from roarfast.records.model import adopted_text
from roarfast.stages.basemodel import trained_at
from roarfast.stages.cells import CellTrainer, cell_model
from roarfast.records.checkpoint import recorded_model
from roarfast.data import outline_dataset
from roarfast.data.base import Canvas
from roarfast.planning import seeds
from roarfast.planning.grid import Grid, Plan, describe_grid, make_plan, measured_rates, sweep_base
from roarfast.records.ids import SHOWN_CHARS
from roarfast import stats
from roarfast.stats.learning import AT_CHANCE, clearly_above_chance, judge
from roarfast.modes import MODES
from roarfast.common.options import check_positive
from roarfast.common.plugins import shown_method
from roarfast.planning.costs import Cost, Costing, Target, gib, hours, plan_target
from roarfast.common.progress import format_duration
from roarfast.recipe import BASE_MODEL, Recipe, effective_recipe
from roarfast.rundir.results import open_results


@dataclass(frozen=True)
class SplitOutline:
    """A split as a preview knows it: its image count and the (C, H, W) of one image."""

    images: int
    shape: tuple

    def __len__(self) -> int:
        return self.images


@dataclass(frozen=True)
class DataOutline(Canvas):
    """What a preview reads of a dataset (the Dataset attributes that recipes and cell keys read), from a loaded
    Dataset or from the run directory's record of it (`recorded`: that file; the data was not read again)."""

    name: str
    fingerprint: str
    train: SplitOutline
    test: SplitOutline
    val_images: int
    num_classes: int
    mean: tuple
    std: tuple
    ground_truth: bool  # whether it has ground-truth masks (what oracle reads)
    recorded: Path | None = None
    listed: bool = False  # described by its loader's outline: no image decoded, so no fingerprint nor statistics
    streamed: bool | None = None  # its splits stay on disk (stream=true), in memory (false); None: by size (auto)

    @property
    def train_index(self) -> range:
        """Stands for the training images (the train split less validation): only its length is read."""
        return range(len(self.train) - self.val_images)

    def describe(self) -> str:
        canvas = "x".join(str(v) for v in self.train.shape)
        text = (f"{self.name}: canvas {canvas}, {len(self.train):,} train ({self.val_images:,} of them held out for "
                f"validation) / {len(self.test):,} test images, {self.num_classes} classes")
        if self.listed:
            return text + " (outlined without decoding an image)"
        return text + (f" (as {self.recorded} records it; not read again)" if self.recorded else "")


def outline_of(ds) -> DataOutline:
    """The outline of a loaded roarfast Dataset."""
    return DataOutline(name=ds.name, fingerprint=ds.fingerprint, train=SplitOutline(len(ds.train), ds.train.shape),
                       test=SplitOutline(len(ds.test), ds.test.shape), val_images=len(ds.val_index),
                       num_classes=ds.num_classes, mean=tuple(ds.mean), std=tuple(ds.std),
                       ground_truth=ds.train.masks is not None, streamed=ds.streamed)


def recorded_outline(run, dataset=None, data_dir=None, dataset_options=None) -> DataOutline | None:
    """The outline of the dataset the run directory records (dataset.json, with the base model's meta for its
    statistics) when the dataset asked for is that one; None when it is another or the record says too little
    (then the data is loaded)."""
    record = run.dataset_record()
    meta = run.base_meta()
    if (record is None or "images" not in record or "ground_truth" not in record
            or meta.get("dataset_fingerprint") != record["fingerprint"]):
        return None
    name, where, options = run.dataset_spec(dataset, data_dir, dataset_options)
    where = None if where is None else str(Path(where).expanduser().resolve())
    if (name, where, options) != (record["name"], record["data_dir"], record["options"]):
        return None
    shape = tuple(record["shape"])
    return DataOutline(name=record["name"], fingerprint=record["fingerprint"],
                       train=SplitOutline(record["images"]["train"], shape),
                       test=SplitOutline(record["images"]["test"], shape), val_images=record["images"]["validation"],
                       num_classes=meta["num_classes"], mean=tuple(meta["mean"]), std=tuple(meta["std"]),
                       ground_truth=record["ground_truth"], recorded=run.dataset_path,
                       streamed=_streamed(record["options"]))


def listed_outline(run, dataset=None, data_dir=None, dataset_options=None) -> DataOutline | None:
    """The outline of a built-in dataset that declares one (roarfast.data.outline_dataset: no image decoded) when
    the run directory holds nothing that its fingerprint would be compared with (no base model, results or
    ranks); None otherwise. Its statistics are placeholders: only the time estimates read them (an IG
    baseline), and time does not depend on them."""
    if run.models() or run.results_path.exists() or run.rank_stores():
        return None
    name, where, options = run.dataset_spec(dataset, data_dir, dataset_options)
    found = outline_dataset(name, where, **options)
    if found is None:
        return None
    shape = found["shape"]
    return DataOutline(name=name, fingerprint=None, train=SplitOutline(found["train"], shape),
                       test=SplitOutline(found["test"], shape), val_images=found["validation"],
                       num_classes=found["classes"], mean=(0.5,) * shape[0], std=(0.25,) * shape[0],
                       ground_truth=found["ground_truth"], listed=True, streamed=_streamed(options))


def _streamed(options: dict) -> bool | None:
    """Whether data read with `options` (a dataset's --data-option values) streams: its `stream` option where it
    is true or false; None where it has none or it is auto (then the data's size decides)."""
    stream = options.get("stream")
    return stream if isinstance(stream, bool) else None


@dataclass(repr=False)
class Preview:
    """What a sweep of `grid` would do in a run directory now (preview_sweep); printed (str, repr) as the dry run's
    lines, displayed in Jupyter as their table."""

    grid: Grid
    data: DataOutline
    base_model: str
    base_recipe: object
    base_meta: dict  # the reused base model's meta.json; {} when the sweep trains one
    cells_model: str
    cells_recipe: object
    remade: list  # methods whose ranks the sweep extracts (missing, or of another provenance)
    plan: Plan
    target: Target  # the device the stages are costed on
    workers: int = 1
    stages: dict = field(default_factory=dict)  # "base model", "ranks", "cells" -> planning.Cost
    left_out: str | None = None  # the preset's methods the data cannot serve, said (Grid.for_data)
    base_id: str | None = None  # the base model's id (roarfast.records.ids); None where the data is not read yet
    kept_models: tuple = ()  # the ids of the base models the run directory keeps
    trained: str = ""  # when the reused base model was trained
    rank_ids: dict = field(default_factory=dict)  # {method: rank id} where known (the stores reused, at least)
    configuration: str | None = None  # the id of the configuration the cells belong to, where known
    configuration_known: bool = False  # whether the run directory records that configuration
    warnings: list = field(default_factory=list)  # what to know before training (learning_warnings)
    cell_threads: int | None = None  # the CPU threads each cell trains with (Executor.cell_threads); None: unsaid
    seeds: list = field(default_factory=list)  # what the planned seeds detect, what --detect needs (planning.seeds)
    adopting: dict | None = None  # the weights a Study adopts first ({file, file_sha256}), where not kept yet
    run_dir: str = ""  # the run directory, as the lines' commands name it

    @property
    def base_reused(self) -> bool:
        return bool(self.base_meta)

    @property
    def adopted(self) -> dict | None:
        """The reused base model's record of adopted weights ({file, file_sha256, weights_sha256}), or those a
        Study adopts first; None where the base model is trained."""
        return self.base_meta.get("adopted") or self.adopting

    @property
    def eta(self) -> float | None:
        """Seconds of every stage left on `workers` workers, or None when one is unknown."""
        seconds = [stage.wall(self.workers) for stage in self.stages.values()]
        return None if any(s is None for s in seconds) else sum(seconds)

    def rows(self) -> list[tuple[str, str]]:
        """(what, says) in reading order: the lines of the dry run and the rows of the Study's table."""
        cells = f"{_recipe_text(self.cells_model, self.cells_recipe)}, fill {self.grid.fill}"
        # adopted weights have no epochs, and train refuses --epochs beside --weights: what applies is said instead
        train = shlex.join(["roarfast", "train", "--run-dir", self.run_dir, "--model", self.base_model])
        base = (f"none (adopted weights, trained elsewhere; to train one here instead: `{train}`, without --weights, "
                f"or a Study without weights=)"
                if self.adopted else f"{self.base_recipe.epochs} epochs (its own: train --epochs)")
        cells += f"; epochs: the cells {self.cells_recipe.epochs} (sweep --epochs sets these), the base model {base}"
        if self.cell_threads is not None and self.target.device.type == "cpu":
            cells += (f"; {self.cell_threads} CPU thread{'s' if self.cell_threads > 1 else ''} a cell (its row records "
                      f"it: --threads-per-cell)")
        grid, progress = describe_grid(self.plan, self.grid)
        grid += f" ({self.left_out})" if self.left_out else ""
        if self.configuration:
            progress += (f"; configuration {_short(self.configuration)} ("
                         + ("recorded: its done cells are reused)" if self.configuration_known else "new)"))
        plan = [(f"plan, {name}", self._cost_text(stage)) for name, stage in self.stages.items()]
        workers = f"{self.workers} worker" + ("s" if self.workers > 1 else "")
        return [("data", self.data.describe()), ("base model", self._base_text()), ("ranks", self._ranks_text()),
                ("cells", cells), ("grid", grid), ("progress", progress),
                *(("seeds", line) for line in self.seeds),
                ("plan", f"on {self.target.name}, {workers}"), *plan, ("ETA", self._eta_text()),
                *(("warning", w) for w in self.warnings)]

    def lines(self) -> list[str]:
        return [f"{what}: {says}" for what, says in self.rows()]

    def __str__(self) -> str:
        """The plan as `roarfast sweep --dry-run` prints it."""
        return "\n".join(self.lines())

    # the plan, not the dataclass's fields (a dump of every record and object it holds)
    __repr__ = __str__

    def _repr_html_(self) -> str:
        """The plan as a table, where Jupyter displays it."""
        return self.html("What the sweep would do (nothing was run)")

    def html(self, title: str) -> str:
        cells = "".join(f"<tr><th style='text-align:left'>{html.escape(what)}</th>"
                        f"<td style='text-align:left'>{html.escape(says)}</td></tr>" for what, says in self.rows())
        return f"<div class='roarfast-preview'><b>{html.escape(title)}</b><table>{cells}</table></div>"

    def _base_text(self) -> str:
        recipe = _recipe_text(self.base_model, self.base_recipe)
        if self.adopted and not self.base_reused:  # a Study's weights, adopted (evaluated, not trained) first
            return (f"{self.base_model}, {adopted_text(self.adopted)}: to adopt as {_short(self.base_id)} (evaluated "
                    f"on the validation and test images first){_took(self.stages)}")
        if self.adopted:  # nothing was trained: no recipe to state
            return (f"{self.base_model}, {adopted_text(self.adopted)}: reused {_short(self.base_id)} (adopted "
                    f"{self.trained}, test {self.base_meta['test_acc']:.1%} on this dataset"
                    f"{_normalization(self.base_meta)})")
        if self.base_reused:
            return (f"{recipe} (as its meta.json records it): reused {_short(self.base_id)} (trained {self.trained} on "
                    f"this dataset, test {self.base_meta['test_acc']:.1%})")
        others = ", ".join(_short(m) for m in self.kept_models[:3]) + (", ..." if len(self.kept_models) > 3 else "")
        beside = f" beside the {len(self.kept_models)} kept ({others}), which stay as they are" if self.kept_models \
            else ""
        named = f" as {_short(self.base_id)}" if self.base_id else ""
        return f"{recipe}: to train{beside}{named}{_took(self.stages)}"

    def _ranks_text(self) -> str:
        kept = [m for m in self.plan.methods if m not in self.remade]
        text = (f"to extract: {', '.join(map(shown_method, self.remade))}" + _took(self.stages, "ranks")) \
            if self.remade else "to extract: none"
        reused = ', '.join(f'{shown_method(m)} {_short(self.rank_ids.get(m))}' for m in kept)
        return text + (f"; reused: {reused}" if kept else "")

    def _cost_text(self, cost) -> str:
        if not cost.work:
            return f"{cost.source}: nothing to compute"
        parts = [cost.work, *([f"{gib(cost.stored)} on disk"] if cost.stored else []),
                 f"peak memory {gib(cost.peak)}" + (f" of {gib(self.target.memory)}" if self.target.memory else "")
                 + _peaks_text(cost.peaks),
                 f"{hours(cost.seconds)} device-hours ({cost.source})"]
        if self.workers > 1:
            parts.append(f"{format_duration(cost.wall(self.workers))} on {self.workers} workers")
        return "; ".join(parts)

    def _eta_text(self) -> str:
        parts = ", ".join(f"{name} {format_duration(stage.wall(self.workers))} ({stage.source})"
                          for name, stage in self.stages.items() if stage.seconds != 0)
        return f"{format_duration(self.eta)}" + (f": {parts}" if parts else " (nothing left to do)")


def _peaks_text(peaks) -> str:
    """An extraction's peak by estimator (Cost.peaks): what each one's largest pass holds at the compute batch."""
    if not peaks:
        return ""
    return " (by estimator, its largest pass: " + ", ".join(
        f"{shown_method(method)} {gib(peak)} at {rows:,} rows" for method, peak, rows in peaks) + ")"


def preview_sweep(run, grid: Grid, selection, extract_options, *, dataset=None, data_dir=None, dataset_options=None,
                  dataset_obj=None, device=None, seed: int = 0, plan_device: str | None = None,
                  workers: int = 1, cell_threads: int | None = None, seeds_auto: bool = False,
                  detect: float | None = None, max_seeds: int | None = None, adopting=None) -> Preview:
    """The Preview of run_sweep(run.root, grid, ...) with the same arguments (`selection`: the grid's estimators
    as the sweep or the Study resolved them, a roarfast.methods.selection.Selection, looked up no further;
    `extract_options`: an ExtractOptions, the sweep's), on `device` (a torch.device); its stages costed on
    --plan-device `plan_device` (roarfast.planning.costs.plan_target; None: `device`) shared by `workers` workers;
    `cell_threads`: the CPU threads each cell would train with (the executor's choice), said with the cells.
    `seeds_auto`, `detect`, `max_seeds`: --seeds auto, --detect and --max-seeds (the seeds' lines: planning.seeds).
    `adopting`: the weights a Study adopts before its sweep (roarfast.stages.basemodel.Adopted), its base model."""
    check_positive("--plan-workers", workers)
    if dataset_obj is not None:
        data = outline_of(dataset_obj)
    else:
        data = (recorded_outline(run, dataset, data_dir, dataset_options)
                or listed_outline(run, dataset, data_dir, dataset_options)
                or outline_of(run.open_dataset(dataset, data_dir, dataset_options)))
    # as the sweep leaves out or refuses them
    grid, selection, note = grid.for_data(selection, data.name, data.ground_truth)
    target = plan_target(plan_device, device)
    # a Study's weights are adopted first (run_train makes them HEAD's), so the sweep takes them
    model_id, base_spec, base = (adopting.id, adopting.spec, None) if adopting is not None else \
        sweep_base(run, data, grid, target.device, seed)
    kept = run.models()
    reused = model_id in kept
    meta = run.model_meta(model_id) if reused else {}
    splits = extract_options.splits
    if reused:  # what its record says, not what the sweep's defaults would be
        base_spec = recorded_model(meta, run.model_path(model_id))
        base = Recipe.from_dict(meta["recipe"]) if meta.get("recipe") else base
        ids = run.rank_ids(selection, data.fingerprint, base=model_id)
        remade = run.ranks_to_make(selection, splits, data.fingerprint, base=model_id)
    else:  # the sweep trains a base model, then extracts every method that reads it
        free = selection.only(selection.model_free)
        ids = run.rank_ids(free, data.fingerprint) if data.fingerprint else {}
        made = run.ranks_to_make(free, splits, data.fingerprint)
        remade = [m for m in selection.names if m in made or m in selection.explained]
    if base is None:
        base = effective_recipe(base_spec, target.device, data, grid, stage=BASE_MODEL)
    cells_spec = cell_model(run, data, target.device, grid.model, meta, model_id)
    cells = effective_recipe(cells_spec, target.device, data, grid)
    plan, configuration, known = _plan(run, data, grid, selection, cells_spec, cells, target, model_id, ids, reused)
    warnings = learning_warnings(run, data, cells_spec.name, cells, meta if reused else {}, kept)
    preview = Preview(grid=grid, data=data, base_model=base_spec.name, base_recipe=base, base_meta=meta,
                      cells_model=cells_spec.name, cells_recipe=cells, remade=remade, plan=plan, target=target,
                      workers=workers, left_out=note, base_id=model_id if data.fingerprint else None,
                      kept_models=tuple(m for m in kept if m != model_id),
                      trained=trained_at(run, model_id) if reused else "", rank_ids=ids,
                      configuration=configuration, configuration_known=known, warnings=warnings,
                      cell_threads=cell_threads, run_dir=str(run.root),
                      adopting=None if adopting is None or reused else {"file": adopting.file,
                                                                        "file_sha256": adopting.file_sha256},
                      seeds=seeds.lines(seeds.recorded_spread(run, cells_spec.name, data.fingerprint),
                                        "auto" if seeds_auto else grid.seeds, detect, max_seeds))
    costing = Costing(data, target)
    preview.stages["base model"] = Cost(0.0, "reused") if reused else costing.adoption(base_spec, base) \
        if adopting is not None else costing.training(base_spec, base)
    preview.stages["ranks"] = costing.extraction(base_spec, selection.only(remade), extract_options)
    local = target.peak is None
    rates = ", ".join(f"{format_duration(v)} per {k}" for k, v in sorted(plan.seconds.items()))
    preview.stages["cells"] = costing.cells(len(plan.todo), plan.eta(plan.todo) if local else None, rates,
                                            cells_spec, cells)
    return preview


def _plan(run, data, grid, selection, spec, recipe, target, model_id, ids, reused) -> tuple:
    """(the Plan of the grid's cells against results.sqlite, with the cell rates measured there where the plan is
    costed on this machine's device; the id of the configuration its cells belong to, or None where its ranks'
    ids are not known yet; whether the run directory records that configuration)."""
    plan = Plan(cells=[(cell, None) for cell in grid.cells(selection.names)])  # a new base model: none is done
    if not run.results_path.exists():
        return plan, None, False
    trainer = CellTrainer(run, data, spec, recipe, grid.fill, target.device, base=model_id, ranks=ids,
                          provenance={m: selection.ranks_identity(m) for m in selection.names}) if reused else None
    with open_results(run, readonly=True) as db:
        if reused:
            plan = make_plan(trainer, grid, db, selection.names)
        else:
            plan.seconds = measured_rates(run, db, spec.name, data, recipe)
    if target.peak is not None:  # this machine's rates say nothing of another device
        plan.seconds = {}
    if not reused:
        return plan, None, False
    cid = trainer.configuration_id(selection.names)
    return plan, cid, run.configuration_path(cid).is_file()


#: with no record of what this model needed on this data, a cell of fewer optimizer steps than this is warned of:
#: 2 epochs of 2,000 images at batch 128 (30 steps) left fastnet at chance, while `roarfast run`'s cells take ~170
MIN_CELL_STEPS = 100


def steps_per_cell(recipe, train_images: int) -> int:
    """The optimizer steps of a training of `recipe` over `train_images` images."""
    return recipe.epochs * math.ceil(train_images / recipe.batch_size)


def learning_warnings(run, data, model: str, recipe, meta: dict, kept) -> list[str]:
    """What the dry run warns of before training: cells planned for fewer optimizer steps than this model needed
    to leave chance on this data, by the records (the base models kept of this model and data: the first epoch
    whose validation accuracy left chance beyond doubt, roarfast.stats.learning.clearly_above_chance; earlier random
    cells of this model and data
    that stayed at chance with at least as many steps), else by MIN_CELL_STEPS."""
    train = len(data.train_index)
    planned = steps_per_cell(recipe, train)
    chance = 1 / data.num_classes
    needed, evidence = [], []
    metas = [meta] if meta else [run.model_meta(m) for m in kept] if data.fingerprint else []
    for record in metas:
        if record.get("model") != model or record.get("dataset_fingerprint") != data.fingerprint:
            continue
        for entry in record.get("history") or []:
            if entry.get("val_acc") is not None and clearly_above_chance(entry["val_acc"], chance,
                                                                               data.val_images):
                batch = (record.get("recipe") or {}).get("batch_size") or recipe.batch_size
                needed.append((entry["epoch"] * math.ceil(train / batch), entry["epoch"]))
                break
    stuck = _cells_at_chance(run, data, model, chance, train) if data.fingerprint else []
    warnings = []
    if needed:
        steps, epoch = min(needed)
        if planned < steps:
            evidence.append(f"the base model of {model} on this data left chance only after {epoch} epoch(s), "
                            f"{steps} steps")
    worse = [s for s in stuck if s[0] >= planned]
    if worse:
        steps, epochs, acc = max(worse)
        evidence.append(f"earlier random cells of {model} on this data stayed at chance ({acc:.1%}) with {steps} steps "
                        f"({epochs} epochs)")
    if evidence:
        warnings.append(f"the cells would train {planned} optimizer steps each ({recipe.epochs} epochs of {train:,} "
                        f"images at batch {recipe.batch_size}), fewer than this model needed to learn here: "
                        f"{'; '.join(evidence)}; their results would sit at chance and the study could not answer: "
                        f"raise --epochs or the images")
    elif not needed and not stuck and planned < MIN_CELL_STEPS:
        warnings.append(f"the cells would train {planned} optimizer steps each ({recipe.epochs} epochs of {train:,} "
                        f"images at batch {recipe.batch_size}), fewer than {MIN_CELL_STEPS} (no record says what "
                        f"{model} needs on this data): they may not leave chance, and then the study cannot answer; "
                        f"raise --epochs or the images")
    return warnings


def _cells_at_chance(run, data, model: str, chance: float, train: int) -> list:
    """[(steps, epochs, best mean)] of the earlier random cells of `model` on this data (results.sqlite) whose
    best group (fraction, mode) stayed at chance (roarfast.stats.learning's rule), per recipe they trained with."""
    if not run.results_path.exists():
        return []
    with open_results(run, readonly=True) as db:
        rows = db.rows(status="done")
    groups = {}
    for r in rows:
        config = r.get("config") or {}
        if (r["method"] != "random" or r["mode"] not in MODES or r["model"] != model
                or config.get("dataset") != data.fingerprint or not config.get("recipe")):
            continue
        recipe = Recipe.from_dict(config["recipe"])
        groups.setdefault((recipe.epochs, recipe.batch_size), {}).setdefault((r["mode"], r["fraction"]), []).append(
            (r["test_acc"], (r.get("extra") or {}).get("test_images")))
    out = []
    for (epochs, batch), by_slot in groups.items():
        values = max(by_slot.values(), key=lambda v: sum(a for a, _n in v) / len(v))
        if judge([a for a, _n in values], values[0][1], chance).state == AT_CHANCE:
            steps = epochs * math.ceil(train / batch)
            out.append((steps, epochs, sum(a for a, _n in values) / len(values)))
    return out


def _normalization(meta: dict) -> str:
    """", normalized with mean (..) and std (..)": what the model's inputs are normalized with, where recorded."""
    norm = meta.get("normalization") or ({"mean": meta["mean"], "std": meta["std"]} if "mean" in meta else None)
    if not norm:
        return ""
    values = " and ".join(f"{k} ({', '.join(f'{v:.3g}' for v in norm[k])})" for k in ("mean", "std"))
    return f", inputs normalized with {values}" + (f" ({norm['source']})" if norm.get("source") else "")


def _recipe_text(model: str, recipe) -> str:
    return f"{model}, {recipe.epochs} epochs, batch {recipe.batch_size}, lr {recipe.lr:g}"


def _short(identity: str | None) -> str:
    return identity[:SHOWN_CHARS] if identity else "?"


def _took(stages: dict, name: str = "base model") -> str:
    seconds = stages[name].seconds if name in stages else None
    return f", ~{format_duration(seconds)}" if seconds else ""
