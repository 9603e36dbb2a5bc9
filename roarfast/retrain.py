"""The retrain stage: for every cell (method x mode x fraction x seed) retrain a classifier from
scratch on masked train images and evaluate it on masked test images; one row per cell in
runs/<name>/results.sqlite. Finished cells are skipped on a rerun.
"""

import statistics
from dataclasses import dataclass
from pathlib import Path

from roarfast.cells import IMAGENET_MEAN, fill_values  # noqa: F401  (part of this module's API)
from roarfast.errors import UserError


@dataclass(frozen=True)
class RetrainOptions:
    fractions: tuple = (0.7,)
    methods: str | None = None
    modes: tuple = ("roar",)
    seeds: int = 1
    model: str | None = None
    epochs: int | None = None
    fill: str = "dataset-mean"
    amp: str = "auto"
    mask_only: bool = False  # also the mask-only control of every cell (mode "<mode>-mask")


def _methods_to_run(store, options):
    """Requested methods, or every complete method of both splits (random is added by the grid)."""
    if options.methods:
        return options.methods
    methods = sorted(set(store.methods("train")) & set(store.methods("test")))
    return ",".join(methods) or "random"


def run_retrain(run_dir, options: RetrainOptions, *, dataset=None, data_dir=None, dataset_options=None, device="auto",
                seed=0, progress=True, dataset_obj=None, echo=None):
    """Runs every cell not yet in results.sqlite (claimed first, as a sweep does); returns all rows of the
    requested cells, in grid order. Model-free ranks (random, sobel, oracle) are extracted here when
    missing; other methods need `roarfast extract` first."""
    from roarfast.cells import CellTrainer, cell_recipe
    from roarfast.device import resolve_device
    from roarfast.extract import ExtractOptions, model_free, run_extract
    from roarfast.memory import keep_freed_memory
    from roarfast.results import ResultsDB
    from roarfast.rundir import open_dataset
    from roarfast.store import RankStore
    from roarfast.sweep import Grid, execute_local, make_plan

    keep_freed_memory()
    run_dir = Path(run_dir)
    device = resolve_device(device)
    ds = dataset_obj if dataset_obj is not None else open_dataset(run_dir, dataset, data_dir, dataset_options)
    model_name, recipe = cell_recipe(run_dir, ds, device, model=options.model, epochs=options.epochs, amp=options.amp)
    store = RankStore(run_dir)
    grid = Grid(methods=_methods_to_run(store, options), modes=tuple(options.modes), fractions=tuple(options.fractions),
                seeds=options.seeds, first_seed=seed, control=options.mask_only, fill=options.fill,
                model=model_name, epochs=recipe.epochs, amp=options.amp)
    methods = grid.method_list()
    missing = [m for m in methods if m not in store.methods("train") or m not in store.methods("test")]
    cheap = [m for m in missing if model_free(m)]
    if cheap:  # model-free ranks take seconds: make them here rather than send the user back to extract
        run_extract(run_dir, ExtractOptions(methods=",".join(cheap)), dataset_obj=ds, device=device, seed=seed,
                    progress=progress)
        missing = [m for m in missing if m not in cheap]
    if missing:
        raise UserError(f"no complete ranks in {run_dir} for {', '.join(missing)}: run "
                        f"`roarfast extract --method {','.join(missing)} --run-dir {run_dir}` first")
    trainer = CellTrainer(run_dir, ds, model_name, recipe, options.fill, device, progress=progress)
    trainer.check_fill(methods)
    with ResultsDB(run_dir / "results.sqlite") as db:
        plan = make_plan(trainer, grid, db)
        execute_local(trainer, plan, db, progress=False, echo=echo or (lambda line: None))
        return [db.get(key) for _, key in plan.cells]


def summarize(rows) -> dict:
    """{(method, mode, fraction): (mean test accuracy, std over seeds, seeds)}."""
    groups = {}
    for row in rows:
        groups.setdefault((row["method"], row["mode"], row["fraction"]), []).append(row["test_acc"])
    return {key: (statistics.fmean(v), statistics.pstdev(v) if len(v) > 1 else 0.0, len(v))
            for key, v in groups.items()}


def format_table(rows) -> str:
    """Test accuracy per method (rows) and mode x fraction (columns), mean +- std over seeds."""
    summary = summarize(rows)
    if not summary:
        return "no cells"
    columns = sorted({(mode, fraction) for _, mode, fraction in summary})
    methods = sorted({m for m, _, _ in summary}, key=lambda m: (m != "random", m))
    header = ["method"] + [f"{mode} {fraction:g}" for mode, fraction in columns]
    lines = [header]
    for method in methods:
        line = [method]
        for mode, fraction in columns:
            cell = summary.get((method, mode, fraction))
            if cell is None:
                line.append("-")
            else:
                mean, std, n = cell
                line.append(f"{mean:.1%}" + (f" ±{std:.1%}" if n > 1 else ""))
        lines.append(line)
    widths = [max(len(row[i]) for row in lines) for i in range(len(header))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths)) for row in lines)
