"""`roarfast retrain`: the cells (method x mode x fraction x seed) asked for, each a classifier retrained
from scratch on masked train images and evaluated on masked test images (roarfast.stages.cells), run here through
the local executor: claimed, then one row each in results.sqlite; finished cells are skipped on a rerun.
"""

from dataclasses import dataclass

from roarfast.stages.cells import CellOptions, CellTrainer, cell_estimators, cell_model
from roarfast.common.device import resolve_device
from roarfast.errors import UserError
from roarfast.common.options import check_positive
from roarfast.execution.executors import check_workers, execute, thread_note
from roarfast.execution.registry import make_executor
from roarfast.stages.extract import ExtractOptions, run_extract
from roarfast.rundir.configurations import grid_of
from roarfast.methods.declaration import ESTIMATORS
from roarfast.methods.selection import Selection
from roarfast.recipe import effective_recipe
from roarfast.rundir.results import open_results
from roarfast.rundir.writing import open_for_writing
from roarfast.train import default_grouping


@dataclass(frozen=True)
class RetrainOptions(CellOptions):
    """CellOptions (methods default: every method with complete ranks, plus random) and `mask_only`: also
    the mask-only control of every cell (mode "<mode>-mask")."""

    mask_only: bool = False


def run_retrain(run_dir, options: RetrainOptions, *, dataset=None, data_dir=None, dataset_options=None, device="auto",
                seed=0, progress=True, dataset_obj=None, group_size: int | None = None, workers_per_cell: int = 1,
                name: str | None = None, threads_per_cell: int | None = None) -> list:
    """Runs every cell not yet in results.sqlite, seeds from `seed`, `group_size` cells trained together
    (None: the device's default, roarfast.train.default_grouping) or each over `workers_per_cell` processes
    (data-parallel), each with `threads_per_cell` CPU threads (None: the local executor's default; a line says
    when done cells of the request trained with other counts); returns all rows of the requested cells, in run
    order. The cells are those of HEAD's base
    model and of the ranks HEAD names for each method (methods default: every method HEAD has ranks of, plus
    random); the request is recorded (its configuration, called `name` when given; HEAD) before any cell trains. Model-free ranks
    (random, sobel, oracle) are extracted here when missing; other methods need `roarfast extract` first."""
    run = open_for_writing(run_dir)
    device = resolve_device(device)
    grouping = default_grouping(device, group_size)
    check_workers(workers_per_cell, group_size, device)
    check_positive("--threads-per-cell", threads_per_cell, optional=True)
    ds = dataset_obj if dataset_obj is not None else run.open_dataset(dataset, data_dir, dataset_options)
    run.check_writable()  # before a cell is trained: its row must be written
    model = cell_model(run, ds, device, options.model)
    recipe = effective_recipe(model, device, ds, options)
    head = run.head()
    stored = [] if options.methods else list(head.ranks)
    for method in stored:  # names read from HEAD: code only where the user named it again
        ESTIMATORS.query(method, recorded_in=run.head_path)
    # each name resolved once, into its record: the ranks a cell reads were made with their own values, which
    # their stores record
    records = cell_estimators(options.methods or stored or "random")
    methods = list(records)
    missing = _missing(run, methods)
    cheap = [m for m in missing if not records[m].uses_model]
    if cheap:  # model-free ranks take seconds: make them here rather than send the user back to extract
        defaults = ExtractOptions()
        selection = Selection.of({m: records[m] for m in cheap}, defaults, seed)
        run_extract(run.root, defaults, dataset_obj=ds, device=device, seed=seed, progress=progress,
                    selection=selection)
        missing = [m for m in missing if m not in cheap]
    if missing:
        raise UserError(f"no complete ranks in {run.root} for {', '.join(missing)} from its base model: run "
                        f"`roarfast extract --method {','.join(missing)} --run-dir {run.root}` first")
    trainer = CellTrainer(run, ds, model, recipe, options.fill, device, progress=progress, grouping=grouping)
    trainer.check_ranks(methods)
    cells = [(cell, trainer.key(cell)) for cell in options.expand(methods, seed, control=options.mask_only)]
    seeds = range(seed, seed + options.seeds)
    trainer.request(methods, grid_of(methods, options.modes, options.fractions, seeds,
                                     seeds if options.mask_only else (), options.fill),
                    "roarfast.orchestration.retrain.run_retrain()", name)
    executor = make_executor(None)
    threads = executor.cell_threads(device, threads_per_cell, workers_per_cell=workers_per_cell)
    with open_results(run) as db:
        note = thread_note([db.get(key) for _, key in cells], threads)
        if note:
            print(f"retrain: {note}")
        execute(trainer, cells, db, executor=executor, echo=lambda line: None, group_size=grouping.size,
                workers_per_cell=workers_per_cell, threads=threads)
        return [db.get(key) for _, key in cells]


def _missing(run, methods) -> list:
    """The `methods` without complete ranks among those HEAD names (for its base model)."""
    head = run.head()
    store = run.ranks_for({m: head.ranks[m] for m in methods if m in head.ranks})
    return [m for m in methods if m not in head.ranks or any(
        (store.manifest(m, split) or {}).get("complete") is not True for split in ("train", "test"))]
