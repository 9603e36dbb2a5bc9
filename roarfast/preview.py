"""What a sweep would do, found without doing any of it: `roarfast sweep --dry-run` prints it and a Study
displays it. The data (canvas, image counts, classes), the base model's recipe and whether it is trained or
reused, the ranks extracted or reused (RunDir.ranks_to_make: a store of another provenance is made again),
the cells done and to do (cells whose ranks are made again are never done), and every stage's time: from
the rates measured in the run directory where there are any, else from a short measured step
(roarfast.estimate). Nothing is trained, extracted or written; the run directory is only read.

A run directory that records its dataset (HEAD.json, written with the base model) is previewed from that
record when the same dataset is asked for, and a fresh one from the dataset's outline where its loader gives
one (roarfast.data.outline_dataset: the embedded dataset's options, an image tree's listing), so a dry run
does not load (generate, decode) the data; any other dataset is loaded.
"""

import html
from dataclasses import dataclass, field
from pathlib import Path

from roarfast.basemodel import TrainOptions, base_recipe
from roarfast.cells import CellTrainer, cell_estimators, cell_recipe
from roarfast.checkpoint import recorded_model
from roarfast.data import outline_dataset
from roarfast.data.base import Canvas
from roarfast.estimate import measure_explaining, measure_steps, step_images, training_seconds
from roarfast.grid import Grid, Plan, describe_grid, make_plan, rate_kind, sweep_base
from roarfast.methods.selection import Selection
from roarfast.progress import format_duration
from roarfast.recipe import Recipe
from roarfast.results import open_results


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
                       ground_truth=ds.train.masks is not None)


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
                       ground_truth=record["ground_truth"], recorded=run.dataset_path)


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
                       ground_truth=found["ground_truth"], listed=True)


@dataclass(frozen=True)
class Stage:
    """A stage's estimated seconds (None: unknown) and where the estimate comes from."""

    seconds: float | None
    source: str


@dataclass
class Preview:
    """What a sweep of `grid` would do in a run directory now (preview_sweep)."""

    grid: Grid
    data: DataOutline
    base_model: str
    base_recipe: object
    base_test_acc: float | None  # the reused base model's; None when the sweep trains one
    cells_model: str
    cells_recipe: object
    remade: list  # methods whose ranks the sweep extracts (missing, or of another provenance)
    plan: Plan
    stages: dict = field(default_factory=dict)  # "base model", "ranks", "cells" -> Stage
    left_out: str | None = None  # the preset's methods the data cannot serve, said (Grid.for_data)
    base_id: str = ""  # the base model's id (roarfast.history.ids)
    kept_models: int = 0  # the base models the run directory keeps

    @property
    def base_reused(self) -> bool:
        return self.base_test_acc is not None

    @property
    def eta(self) -> float | None:
        """Seconds of every stage left, or None when one is unknown."""
        seconds = [stage.seconds for stage in self.stages.values()]
        return None if any(s is None for s in seconds) else sum(seconds)

    def rows(self) -> list[tuple[str, str]]:
        """(what, says) in reading order: the lines of the dry run and the rows of the Study's table."""
        kept = [m for m in self.plan.methods if m not in self.remade]
        beside = f" beside the {self.kept_models} kept" if self.kept_models else ""
        base = _recipe_text(self.base_model, self.base_recipe) + (
            f": reused {self.base_id[:8]} (as its record says; trained on this dataset, test {self.base_test_acc:.1%})"
            if self.base_reused else f": to train{beside}{_took(self.stages['base model'])}")
        ranks = (f"to extract: {', '.join(self.remade)}{_took(self.stages['ranks'])}" if self.remade else "to extract: none")
        ranks += f"; stored: {', '.join(kept)}" if kept else ""
        cells = f"{_recipe_text(self.cells_model, self.cells_recipe)}, fill {self.grid.fill}"
        grid, progress = describe_grid(self.plan, self.grid)
        grid += f" ({self.left_out})" if self.left_out else ""
        return [("data", self.data.describe()), ("base model", base), ("ranks", ranks), ("cells", cells),
                ("grid", grid), ("progress", progress), ("ETA", self._eta_text())]

    def lines(self) -> list[str]:
        return [f"{what}: {says}" for what, says in self.rows()]

    def html(self, title: str) -> str:
        cells = "".join(f"<tr><th style='text-align:left'>{html.escape(what)}</th>"
                        f"<td style='text-align:left'>{html.escape(says)}</td></tr>" for what, says in self.rows())
        return f"<div class='roarfast-preview'><b>{html.escape(title)}</b><table>{cells}</table></div>"

    def _eta_text(self) -> str:
        parts = ", ".join(f"{name} {format_duration(stage.seconds)} ({stage.source})"
                          for name, stage in self.stages.items() if stage.seconds)
        return f"{format_duration(self.eta)}" + (f": {parts}" if parts else " (nothing left to do)")


def preview_sweep(run, grid: Grid, extract_options, *, dataset=None, data_dir=None, dataset_options=None,
                  dataset_obj=None, device=None, seed: int = 0, measured: dict | None = None) -> Preview:
    """The Preview of run_sweep(run.root, grid, ...) with the same arguments (`extract_options`: an
    ExtractOptions, the sweep's), on `device` (a torch.device). `measured`: a dict kept between previews,
    which then measure each step once."""
    if dataset_obj is not None:
        data = outline_of(dataset_obj)
    else:
        data = (recorded_outline(run, dataset, data_dir, dataset_options)
                or listed_outline(run, dataset, data_dir, dataset_options)
                or outline_of(run.open_dataset(dataset, data_dir, dataset_options)))
    selection = Selection.of(cell_estimators(grid.methods), extract_options, seed)
    # as the sweep leaves out or refuses them
    grid, selection, note = grid.for_data(selection, data.name, data.ground_truth)
    model_id, base_spec, base = sweep_base(run, data, grid, device, seed)
    kept = run.models()
    reused = model_id in kept
    meta = run.model_meta(model_id) if reused else {}
    splits = extract_options.splits
    if reused:  # what its record says, not what the sweep's defaults would be
        base_spec = recorded_model(meta, run.model_path(model_id))
        base = Recipe.from_dict(meta["recipe"]) if meta.get("recipe") else base
        remade = run.ranks_to_make(selection, splits, data.fingerprint, base=model_id)
    else:  # the sweep trains a base model, then extracts every method that reads it
        free = run.ranks_to_make(selection.only(selection.model_free), splits, data.fingerprint)
        remade = [m for m in selection.names if m in free or m in selection.explained]
    if base is None:
        base = base_recipe(base_spec, data, device, TrainOptions(model=base_spec, amp=grid.amp, recipe=grid.recipe))
    cells_spec, cells = cell_recipe(run, data, device, grid, meta=meta, base=model_id)
    if reused and run.results_path.exists():
        trainer = CellTrainer(run, data, cells_spec, cells, grid.fill, device, base=model_id,
                              ranks=run.rank_ids(selection, data.fingerprint, base=model_id),
                              provenance={m: selection.ranks_identity(m) for m in selection.names})
        with open_results(run, readonly=True) as db:
            plan = make_plan(trainer, grid, db, selection.names)
    else:  # a new base model: none of its cells can be done
        plan = Plan(cells=[(cell, None) for cell in grid.cells(selection.names)])
    preview = Preview(grid=grid, data=data, base_model=base_spec.name, base_recipe=base,
                      base_test_acc=meta["test_acc"] if reused else None, cells_model=cells_spec.name,
                      cells_recipe=cells, remade=remade, plan=plan, left_out=note, base_id=model_id,
                      kept_models=len(kept))
    steps = _Steps(data, device, {} if measured is None else measured)
    preview.stages["base model"] = (Stage(0.0, "reused") if reused else
                                    Stage(steps.training(base_spec, base), "estimated from a measured step"))
    preview.stages["ranks"] = _ranks_stage(steps, base_spec, selection.only(remade), extract_options, data, device)
    preview.stages["cells"] = _cells_stage(steps, plan, cells_spec, cells)
    return preview


class _Steps:
    """The measured steps of one preview (roarfast.estimate), each measured once per `measured` dict."""

    def __init__(self, data, device, measured: dict):
        self.data, self.device, self.measured = data, device, measured

    def _canvas(self) -> tuple:
        return (self.data.train.shape, self.data.num_classes, str(self.device))

    def training(self, spec, recipe) -> float:
        key = ("train", spec.name, spec.source_sha256, step_images(recipe.batch_size, self.data.image_size),
               recipe.amp, recipe.channels_last, *self._canvas())
        if key not in self.measured:
            self.measured[key] = measure_steps(spec, recipe, self.data, self.device)
        return training_seconds(self.measured[key], recipe, self.data)

    def explaining(self, spec, selection, params) -> dict:
        """Seconds per image of each method of `selection` (a Selection; those reading the model)."""
        keys = {m: ("explain", m, spec.name, spec.source_sha256, repr(params), *self._canvas())
                for m in selection.names}
        missing = selection.only([m for m in selection.names if keys[m] not in self.measured])
        for method, seconds in measure_explaining(spec, self.data, missing, params, self.device).items():
            self.measured[keys[method]] = seconds
        return {m: self.measured.get(keys[m], 0.0) for m in selection.names}


def _ranks_stage(steps: _Steps, spec, remade, options, data, device) -> Stage:
    """The extraction of the methods of `remade` (a Selection) at a measured batch's rate."""
    if not remade.names:
        return Stage(0.0, "stored")
    per_image = steps.explaining(spec, remade, remade.method_params(data, device, options.amp))
    images = sum(len(data.train if split == "train" else data.test) for split in options.splits)
    return Stage(sum(per_image.values()) * images, "estimated from a measured batch")


def _cells_stage(steps: _Steps, plan: Plan, spec, recipe) -> Stage:
    """The cells left at the rates measured in this run directory, else at a measured step's."""
    todo = plan.todo
    if not todo:
        return Stage(0.0, "done")
    measured = plan.eta(todo)
    if measured is not None:
        rates = ", ".join(f"{format_duration(v)} per {k}" for k, v in sorted(plan.seconds.items()))
        return Stage(measured, f"measured here: {rates}")
    each = steps.training(spec, recipe)
    seconds = sum(plan.seconds.get(rate_kind(cell), each) for cell, _ in todo)
    return Stage(seconds, f"estimated from a measured step: {format_duration(each)} per cell")


def _recipe_text(model: str, recipe) -> str:
    return f"{model}, {recipe.epochs} epochs, batch {recipe.batch_size}, lr {recipe.lr:g}"


def _took(stage: Stage) -> str:
    return f", ~{format_duration(stage.seconds)}" if stage.seconds else ""
