"""The retraining step of ROAR: a cell is (method, mode, fraction, seed) under one
configuration, a classifier trained from scratch on masked train images and tested on masked test images;
its control (`control=True`) is the same cell trained and tested on the removal pattern alone (mode
"<mode>-mask").

`CellOptions` says which cells and how they train (retrain's options and the sweep's grid are both
CellOptions, checked here once). `CellTrainer` holds what every cell of a run directory shares (the
dataset, the recipe, the rank records) so that a sweep loads them once; `roarfast retrain`, the sweep and
the Ray workers all train cells through it, so a cell's configuration and its training are written once.
"""

import time
from dataclasses import dataclass
from typing import ClassVar

from roarfast.records.checkpoint import recorded_model
from roarfast.errors import UserError
from roarfast.fills import DEFAULT_FILL, FILLS, resolve_fill
from roarfast.rundir.configurations import about_of, request, settings_of
from roarfast.records.configuration import ConfigurationRecord
from roarfast.records.rows import CellRecord
from roarfast.records.head import command
from roarfast.methods.registry import resolve_methods
from roarfast.modes import KAR, ROAR, check_modes, control_mode
from roarfast.common.options import MAX_SEEDS, check_choice, check_fractions, check_positive
from roarfast.recipe import AMP_CHOICES, CELLS, check_overrides, default_model
from roarfast.stages.step_times import remember_training


@dataclass(frozen=True)
class Cell:
    """One retraining: `method`'s ranks, `mode` roar/kar at `fraction`, training seed `seed`; `control`: the
    mask-only control of that cell."""

    method: str
    mode: str
    fraction: float
    seed: int
    control: bool = False

    @property
    def measured_mode(self) -> str:
        """The mode of its measurement in results.sqlite: roar, kar, roar-mask or kar-mask."""
        return control_mode(self.mode) if self.control else self.mode

    def describe(self) -> str:
        return f"{self.method} {self.measured_mode} {self.fraction:g} seed {self.seed}"


def cell_methods(text) -> list[str]:
    """The methods of comma-separated `text` (as --method; or a list, as parse_methods takes), parsed and
    checked; random is always among a run's cells (the reference every verdict compares with), first when it
    was not asked for."""
    return list(cell_estimators(text))


def cell_estimators(text) -> dict:
    """{name: Estimator record} of cell_methods(text), each name looked up once: what a stage makes its
    roarfast.methods.selection.Selection of."""
    try:
        records = resolve_methods(text)
    except ValueError as err:
        raise UserError(str(err)) from None
    return records if "random" in records else {**resolve_methods("random"), **records}


@dataclass(frozen=True)
class CellOptions:
    """Which cells and how they train: `methods` (comma-separated, as --method, or a list of what
    roarfast.methods.parse_methods takes; None: the caller's default) x `modes` x `fractions` x `seeds`
    seeds; `model` (what roarfast.models.resolve_model takes; None: the base model's), `epochs` (None: the
    recipe's), `fill`, `amp` and `recipe` (Recipe fields overriding the rest) of every cell. Each value is
    checked here, once. roarfast.recipe.effective_recipe reads them for the cells (`stage`)."""

    stage: ClassVar[str] = CELLS
    methods: object = None
    modes: tuple = (ROAR,)
    fractions: tuple = (0.7,)
    seeds: int = 1
    model: object = None
    epochs: int | None = None
    fill: str = DEFAULT_FILL
    amp: str = "auto"
    recipe: dict | None = None

    def __post_init__(self):
        object.__setattr__(self, "recipe", check_overrides(self.recipe))
        object.__setattr__(self, "modes", check_modes(self.modes))
        object.__setattr__(self, "fractions", check_fractions(self.fractions))
        check_positive("--seeds", self.seeds, most=MAX_SEEDS)
        check_positive("--epochs", self.epochs, optional=True)
        check_choice("--fill", self.fill, FILLS.names)
        check_choice("--amp", self.amp, AMP_CHOICES)

    def expand(self, methods: list, first_seed: int = 0, control: bool = False,
               control_seeds: int | None = None) -> list[Cell]:
        """Every cell of `methods` in run order: by method, mode, fraction, seed `first_seed`..; a cell's
        control right after it when `control` (for the first `control_seeds` seeds only, when given)."""
        out = []
        for method in methods:
            for mode in self.modes:
                for fraction in self.fractions:
                    for seed in range(first_seed, first_seed + self.seeds):
                        out.append(Cell(method, mode, fraction, seed))
                        if control and (control_seeds is None or seed < first_seed + control_seeds):
                            out.append(Cell(method, mode, fraction, seed, control=True))
        return out


def cell_model(run, ds, device, model=None, meta: dict | None = None, base: str | None = None):
    """The ModelSpec of the retraining cells in RunDir `run`: the base model's architecture (refused when its
    factory's source changed since it was trained) unless `model` names another (what resolve_model takes).
    `base`: the base model's id (default: HEAD's); `meta`: its meta (default: read; a dry run passes {} for a
    base model that the sweep would train)."""
    # late: loads torch, and --help imports this module
    from roarfast.models.probe import checked_model

    base = base or run.head().base
    meta = run.model_meta(base) if meta is None else meta
    if model is None and meta.get("model"):
        return recorded_model(meta, run.model_path(base))
    return checked_model(model or default_model(ds, device), ds)


class CellTrainer:
    """Trains the cells of one configuration of a run directory on one device.

    Args:
        run: the RunDir (rank stores, base models).
        ds: the dataset (roarfast.data.load_dataset), the one the ranks were computed on.
        model, recipe: what every cell trains (cell_model's ModelSpec, its effective_recipe for the cells).
        fill: name of the replacement of removed pixels (FILLS); part of each cell's configuration. fill_object:
            its Fill (roarfast.fills), what the loaders apply.
        grouping: how train_group trains cells together (roarfast.train.Grouping; None: the device's default).
            How, not what: it is no part of a cell's configuration.
        base: the id of the base model the cells' ranks come from (default: HEAD's); ranks: {method: the id of the
            ranks its cells use} (default: HEAD's); provenance: {method: its ranks' params} where they are not
            stored yet (a dry run's plan). All three are part of each cell's configuration.
    """

    def __init__(self, run, ds, model, recipe, fill: str, device, progress: bool = False, grouping=None,
                 base: str | None = None, ranks: dict | None = None, provenance: dict | None = None):
        # late: loads torch, and --help imports this module
        from roarfast.train import default_grouping

        head = run.head()
        self.grouping = grouping or default_grouping(device)
        self.base = base or head.base
        self.rank_ids = dict(head.ranks if ranks is None else ranks)
        self.provenance = dict(provenance or {})
        self.run = run
        self.ds = ds
        self.model = model
        self.model_name = model.name
        self.recipe = recipe
        self.fill = fill
        self.fill_object = resolve_fill(fill)
        self.fill_object.check_dataset(ds.mean, ds.std)
        self.device = device
        self.progress = progress
        self.store = run.ranks_for(self.rank_ids)
        self._records = {}  # method -> (train RankRecord, test RankRecord): stamps compared, verified chunks noted
        self._loaded = {}  # {method: (train ranks, test ranks)}, the last method's alone: what a cell reads

    def _rank_records(self, method: str):
        if method not in self._records:
            self._records[method] = tuple(self.run.read_ranks(method, split, self.ds.fingerprint,
                                                              rank_id=self.rank_ids.get(method), base=self.base)
                                          for split in ("train", "test"))
        return self._records[method]

    def _ranks(self, method: str):
        """(train ranks, test ranks): a streamed dataset's records, whose rows its batches read (and verify)
        as they need them, nothing of them held between batches; else the whole tensors, each chunk verified
        once (check_ranks may have), of one method at a time (cells run by method: the next method's replace
        them, so a process that trains many cells holds one method's ranks, not every method's)."""
        if method not in self._loaded:
            records = self._rank_records(method)
            self._loaded = {method: records if self.ds.streamed else tuple(r.tensor() for r in records)}
        return self._loaded[method]

    def check_ranks(self, methods) -> None:
        """Refuses, before any cell is trained, ranks made from another dataset or base model
        (RunDir.read_ranks), damaged ranks (every chunk verified; a streamed dataset's as a cell first reads
        them) and ranks the fill cannot use (Fill.check_ranks: road imputes whole pixels, so it needs pixel
        ranks, not --granularity value). The records are kept, so a cell does not read or verify them again."""
        for method in methods:
            train, test = self._rank_records(method)
            if not self.ds.streamed:  # read whole by every cell anyway: checked before the first one
                train.verify()
                test.verify()
            self.fill_object.check_ranks(train.shape, f"{method}'s")

    def ranks_params(self, method: str):
        """The parameters the method's ranks were made with (or will be: `provenance`), or None when unknown."""
        if method in self.provenance:
            return self.provenance[method]
        rid = self.rank_ids.get(method)
        manifest = self.run.rank_record(method, rid) if rid else None  # verified: the ranks of its id
        return None if manifest is None else manifest.get("params")

    def key(self, cell: Cell, ranks_params=None):
        """The results.sqlite key of `cell` (ranks_params: its ranks' parameters, read when None)."""
        # late: loads torch, and --help imports this module
        from roarfast.measurements.row import RETRAIN, MeasurementKey

        return MeasurementKey.of(kind=RETRAIN, dataset=self.ds.name, model=self.model_name, method=cell.method,
                                 mode=cell.measured_mode, fill=None if cell.control else self.fill,
                                 fraction=cell.fraction, seed=cell.seed,
                                 config=self._record(cell.method, cell.control, ranks_params))

    def _record(self, method: str, control: bool, ranks_params=None) -> CellRecord:
        """The record of `method`'s cells (a mask-only control's when `control`): its results row's `config`."""
        params = ranks_params if ranks_params is not None else self.ranks_params(method)
        # the control sees no pixel values, so the fill is not part of its configuration; the base model and the
        # ranks' id are: a cell of another base model or other ranks is another cell; a plug-in's source too
        return CellRecord(self.recipe.to_dict(), self.ds.fingerprint, params, self.base, self.rank_ids.get(method),
                          None if control else self.fill, self.model.source_sha256)

    def settings(self, method: str) -> dict:
        """The settings the cells of `method` share with every cell of their configuration
        (roarfast.rundir.configurations.settings_of of a fill cell's row: the fill, recipe, data, base model)."""
        return settings_of({"dataset": self.ds.name, "model": self.model_name,
                            "config": self._record(method, False).to_record()})

    def configuration_id(self, methods) -> str:
        """The id of the configuration of these cells for `methods` (their shared settings, each rank id)."""
        return ConfigurationRecord(self.settings(methods[0]), {m: self.rank_ids[m] for m in methods}).id

    def request(self, methods, grid: dict, asked: str, name: str | None = None) -> dict:
        """Records that the cells of `methods` and `grid` (roarfast.rundir.configurations.grid_of) were requested
        (by the command the user ran, else `asked`; `name`: what the user calls their configuration): their
        configuration's record, then HEAD (this base model, these ranks, this configuration). Returns the record."""
        settings = self.settings(methods[0])
        ranks = {m: self.rank_ids[m] for m in methods}
        head = self.run.head()
        dataset = {} if head.dataset and head.dataset["fingerprint"] == self.ds.fingerprint else {
            "dataset": self.run.remember_dataset(self.ds)}
        record = request(self.run, settings, ranks, {m: self.ranks_params(m) for m in methods}, grid, command(asked),
                         about_of(self.run.model_meta(self.base), dataset.get("dataset", head.dataset)), name)
        self.run.update_head(asked, base=self.base, ranks={**head.ranks, **ranks}, configuration=record["id"],
                             **dataset)
        return record

    def _masking(self, cell: Cell):
        # late: loads torch, and --help imports this module
        from roarfast.train import Masking

        train_ranks, test_ranks = self._ranks(cell.method)
        return Masking(train_ranks=train_ranks, test_ranks=test_ranks, fraction=cell.fraction,
                       keep=(cell.mode == KAR), fill=self.fill_object, mask_only=cell.control)

    def _metrics(self, result, seconds: float) -> dict:
        # late: loads torch, and --help imports this module
        import torch

        from roarfast.chance import chance_rate

        return {"test_acc": result.test_acc, "val_acc": result.val_acc, "epochs": result.epochs, "seconds": seconds,
                "test_images": len(self.ds.test), "test_chance": chance_rate(self.ds.test.labels),
                "threads": torch.get_num_threads()}

    def train(self, cell: Cell) -> dict:
        """Trains `cell` from scratch; returns its metrics (test_acc, val_acc, epochs, seconds, test_images,
        test_chance: what the report's leakage test needs, so it never has to open the dataset; threads: the
        CPU threads it trained with, on which CPU accuracies depend)."""
        # late: loads torch, and --help imports this module
        from roarfast.train import train_classifier
        from roarfast.train.parallel import distributed

        masking = self._masking(cell)
        started = time.perf_counter()
        result = train_classifier(self.ds, self.model, self.recipe, self.device, seed=cell.seed,
                                  progress=self.progress, masking=masking)
        seconds = time.perf_counter() - started
        if distributed()[1] == 1:  # what a later dry run estimates from (a data-parallel cell's is several devices')
            remember_training(self.device, self.model, self.ds, self.recipe, seconds)
        return self._metrics(result, seconds)

    def train_cells(self, cells: list) -> list:
        """Per cell of `cells` its metrics or the exception that failed it: one cell trained alone (train,
        whose exception propagates), several together (train_group). What every executor calls."""
        return [self.train(cells[0])] if len(cells) == 1 else self.train_group(cells)

    def train_group(self, cells: list) -> list:
        """Trains `cells` together (self.grouping.how); returns per cell its metrics (as train's, with
        `group_size` and `group`: how many cells trained together and how) or the exception that failed it
        (a UserError or an interruption ends them all). A grouped cell's `seconds` is its share of the group's
        wall time (the time from the first set-up to the last test, divided by the cells that finished), so
        that a run's seconds still add up to the time it took."""
        # late: loads torch, and --help imports this module
        from roarfast.train import Run, train_group

        outcomes, runs = {}, {}
        for i, cell in enumerate(cells):
            try:
                runs[i] = Run(seed=cell.seed, masking=self._masking(cell))
            except (KeyboardInterrupt, UserError):
                raise
            except Exception as err:  # noqa: BLE001  (this cell's error: the others train)
                outcomes[i] = err
        order = list(runs)
        results = train_group(self.ds, self.model, self.recipe, self.device, [runs[i] for i in order],
                              self.grouping, progress=self.progress) if order else []
        for i, result in zip(order, results):
            outcomes[i] = result if isinstance(result, Exception) else {
                **self._metrics(result, result.seconds), "group_size": len(cells), "group": result.trained_as}
        return [outcomes[i] for i in range(len(cells))]
