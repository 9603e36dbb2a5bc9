"""`roarfast sweep`: the whole benchmark grid (README, "The whole benchmark") — methods x modes x fractions x
seeds, each cell beside its mask-only control — resumable, shareable and local or on Ray.

It takes HEAD's base model when it was trained on this data with this seed, or adopted for this data (of the
model the sweep names, if it names one), else the base model of the id its own settings make
(roarfast.planning.grid.sweep_base): reused when the run directory holds it, else trained beside the others; it extracts
the ranks of the ids its settings make that the run directory lacks (a store of the same id is reused; on Ray,
each chunk a task), records its configuration and HEAD, plans the grid against results.sqlite (roarfast.planning.grid: a
cell's key holds its base model and its ranks' id) and runs the cells left through an executor
(the Executor it is given: roarfast.stages.executor); it returns once every cell of its grid is done. Nothing another
request made is replaced. Its estimators are resolved once, into the `Selection` that extract and the plan take.
"""

import time
from contextlib import ExitStack

import torch

from roarfast.stages.basemodel import TrainOptions, head_after, made_text, run_train
from roarfast.stages.cells import CellTrainer, cell_estimators, cell_model
from roarfast.records.checkpoint import recorded_model
from roarfast.common.device import resolve_device
from roarfast.common.options import check_positive
from roarfast.execution.executors import Progress, check_workers, execute, thread_note
from roarfast.stages.extract import ExtractOptions, run_extract
from roarfast.planning.grid import Grid, describe_plan, make_plan, sweep_base
from roarfast.methods.batches import compute_batch
from roarfast.methods.requirements import check_methods
from roarfast.methods.selection import Selection
from roarfast.stages import step_times
from roarfast.planning.estimate import StepTimes, training_seconds
from roarfast.planning.preview import learning_warnings, outline_of, preview_sweep
from roarfast.execution.registry import make_executor
from roarfast.measurements.row import RETRAIN
from roarfast.recipe import effective_recipe
from roarfast.rundir.configurations import grid_cells
from roarfast.rundir.results import open_results
from roarfast.rundir.directory import RunDir
from roarfast.rundir.writing import open_for_writing
from roarfast.stages.step_times import remember_extraction
from roarfast.train import default_grouping


def run_sweep(run_dir, grid: Grid, *, executor=None, selection: Selection | None = None, dry_run: bool = False,
              dataset=None, data_dir=None, dataset_options=None, device="auto", seed: int = 0, progress: bool = True,
              extract_options=None, dataset_obj=None, echo=print, group_size: int | None = None,
              workers_per_cell: int = 1, cell_processes: int = 1, plan_device: str | None = None,
              plan_workers: int = 1, name: str | None = None, threads_per_cell: int | None = None,
              grids: list | None = None, reading: dict | None = None, seeds_plan: dict | None = None) -> dict:
    """Runs `grid` in run_dir: base model, ranks, then every cell not yet done, `group_size` cells trained
    together (None: the device's default, roarfast.train.default_grouping) or each over `workers_per_cell`
    processes (data-parallel) or (CPU) side by side in `cell_processes` processes (executors.execute), each cell
    with `threads_per_cell` CPU threads (None: the executor's default, Executor.cell_threads; a line says when done
    cells of the configuration trained with other counts); `dry_run`: prints what it would do
    (roarfast.planning.preview), the cells' threads among it, its stages costed on `plan_device`
    (roarfast.planning.costs.STATED; None: this device) over `plan_workers` workers, and does none of it; `name`:
    what the user calls the configuration (--name); `grids`: grid records (roarfast.rundir.configurations.grid_of,
    with its design) whose cells alone are run and recorded, the cells of `grid` they name (a stage of
    `--seeds auto`: roarfast.orchestration.seeds_auto); None: all of `grid`; `reading`: how its verdicts are read,
    recorded with each grid for the report ({"margin"}, and --seeds auto's {"design"}); `seeds_plan`: what the dry run says of the
    seeds (preview_sweep's seeds_auto, detect, max_seeds). Returns {"plan": Plan, "rows": [row of each
    cell of the grid], "configuration": its id} (rows empty and configuration None on a dry run).

    `executor`: where the ranks' chunks and the cells are computed (an Executor, or its name:
    roarfast.execution.registry.make_executor; None: here). `selection`: the grid's estimators as the caller
    resolved them (a Study's), else resolved here, once, with extract_options' values."""
    executor = make_executor(executor)
    executor.prepare()  # fail before any work when it cannot run (Ray missing)
    device = resolve_device(device)
    grouping = default_grouping(device, group_size)
    check_workers(workers_per_cell, group_size, device, executor)
    check_positive("--threads-per-cell", threads_per_cell, optional=True)
    threads = executor.cell_threads(device, threads_per_cell, workers_per_cell=workers_per_cell,
                                    cell_processes=cell_processes)
    options = extract_options or ExtractOptions()
    if selection is None:
        selection = Selection.of(cell_estimators(grid.methods), options, seed)
    if dry_run:  # a reader: the run directory as it is, and the selection the run would take
        preview = preview_sweep(RunDir(run_dir), grid, selection, dataset=dataset, data_dir=data_dir,
                                dataset_options=dataset_options, dataset_obj=dataset_obj, device=device, seed=seed,
                                extract_options=options, plan_device=plan_device, workers=plan_workers,
                                cell_threads=threads, **(seeds_plan or {}))
        for line in preview.lines():
            echo(line)
        return {"plan": preview.plan, "rows": [], "configuration": None}
    run = open_for_writing(run_dir)
    ds = dataset_obj if dataset_obj is not None else run.open_dataset(dataset, data_dir, dataset_options)
    grid, selection, note = grid.for_data(selection, ds.name, ds.train.masks is not None)
    if note:
        echo(f"[sweep] {note}")
    run.check_writable()  # before anything is trained; the stages check their own estimates
    base = _ensure_base_model(run, ds, grid, selection, options.amp, device, seed, progress, echo)
    ids = _ensure_ranks(run, ds, selection, options, device, seed, progress, echo, executor)
    model = cell_model(run, ds, device, grid.model, base=base)
    recipe = effective_recipe(model, device, ds, grid)
    # what the dry run warns of, said again before the cells train (a sweep run without a dry run first)
    for warning in learning_warnings(run, outline_of(ds), model.name, recipe, run.model_meta(base), run.models()):
        echo(f"[sweep] warning: {warning}")
    trainer = CellTrainer(run, ds, model, recipe, grid.fill, device, progress=False, grouping=grouping, base=base,
                          ranks=ids)
    trainer.check_ranks(selection.names)
    for asked in grids if grids is not None else [grid.record(selection.names)]:
        asked = asked if reading is None else {**asked, **reading}
        record = trainer.request(selection.names, asked, "roarfast.orchestration.sweep.run_sweep()", name)
    with open_results(run) as db:
        plan = make_plan(trainer, grid, db, selection.names)
        if grids is not None:  # only the cells the stage asks for
            keep = grid_cells(grids)
            plan.cells = [(c, k) for c, k in plan.cells
                          if (c.method, c.measured_mode, round(c.fraction, 9), c.seed, None if c.control else grid.fill)
                          in keep]
        plan.estimated = _estimated_rates(ds, model, recipe, device)
        for line in describe_plan(plan, grid):
            echo(f"[sweep] {line}")
        note = thread_note([db.get(key) for cell, key in plan.cells if cell in plan.done], threads) \
            if plan.todo else None
        if note:
            echo(f"[sweep] {note}")
        bar = Progress(len(plan.todo), progress, echo, eta=plan.finished, start=plan.eta())
        execute(trainer, plan.todo, db, executor=executor, progress=bar, echo=echo, group_size=grouping.size,
                workers_per_cell=workers_per_cell, cell_processes=cell_processes, threads=threads)
        rows = [db.get(key) for _, key in plan.cells]
        # every retraining of the run directory, this grid's and earlier ones' (other fills, fractions)
        retrained = db.rows(kind=RETRAIN, status="done")
    run.record_stage_time("retrain", sum(r["seconds"] for r in retrained))
    return {"plan": plan, "rows": rows, "configuration": record["id"]}


def _estimated_rates(ds, model, recipe, device) -> dict:
    """{"cell" / "control": seconds} a cell should take as a dry run costs it (the step times this machine kept for
    training `model` with `recipe`: a training's, or a dry run's measured step), where the run directory has
    measured none; {} where none were kept (nothing is measured here)."""
    data = outline_of(ds)
    kept = step_times.read(step_times.key("training", device, model, data, step_times.training_settings(recipe)))
    if kept is None:
        return {}
    seconds = training_seconds(StepTimes(kept["train_image"], kept["eval_image"], ""), recipe, data)
    return {"cell": seconds, "control": seconds}


def _ensure_base_model(run, ds, grid, selection, amp, device, seed, progress, echo) -> str:
    """The id of the sweep's base model (grid.sweep_base), made HEAD's: reused when the run directory holds it
    (its model's source unchanged), else trained beside the others once a fresh copy of its model showed that
    it fits the methods of `selection` (methods.requirements.check_methods, their parameters under --amp `amp`):
    a refusal comes before anything is written. Trained under the run directory's claim on it (run_train), so
    of several sweeps started together one trains it and the others wait and reuse it."""
    model_id, spec, _ = sweep_base(run, ds, grid, device, seed)
    if model_id not in run.models():
        options = _base_options(ds, grid, spec, selection, amp, device)
        summary = run_train(run.root, options, dataset_obj=ds, seed=seed, device=device, progress=progress,
                            echo=lambda line: echo(f"[sweep] {line}"))
        if not summary["reused"]:  # else another sweep trained it while this one waited
            echo(f"[sweep] base model: val {summary['val_acc']:.1%}, test {summary['test_acc']:.1%} "
                 f"({summary['seconds']:.0f} s)")
            run.record_stage_time("train", summary["seconds"])
            return summary["id"]
    meta = run.model_meta(model_id)
    recorded_model(meta, run.model_path(model_id))  # a changed model source is refused, both hashes named
    echo(f"[sweep] base model: reusing {meta['model']} {model_id[:8]} ({made_text(run, model_id, meta)}, "
         f"test {meta['test_acc']:.1%})")
    run.update_head("roarfast.orchestration.sweep.run_sweep()", base=model_id,
                    **head_after(run, model_id, ds.fingerprint))
    run.record_stage_time("train", meta.get("seconds", 0.0))
    return model_id


def _base_options(ds, grid, spec, selection, amp, device):
    """The TrainOptions of `spec` (grid.model, default: the dataset's), once a fresh copy of it showed that it fits
    the methods of `selection`."""
    with torch.random.fork_rng(devices=[]):  # the check leaves the run's random numbers as they were
        fresh = spec.build(ds.num_classes, ds.image_size, ds.channels).to(device)
    check_methods(fresh, ds, selection, selection.method_params(ds, device, amp), device)
    return TrainOptions(model=spec, amp=grid.amp, recipe=grid.recipe)


def _ensure_ranks(run, ds, selection, options, device, seed, progress, echo, executor) -> dict:
    """{method: rank id} of the sweep's ranks for HEAD's base model (RunDir.rank_ids), extracting with `options`
    those the run directory lacks, `selection` narrowed to them (a complete store of the same id is reused; its
    chunks computed by `executor`: on Ray, tasks on the cluster), each under the run directory's claim on its
    ranks, so that several sweeps extract each method once."""
    ids = run.rank_ids(selection, ds.fingerprint)
    todo = run.ranks_to_make(selection, options.splits, ds.fingerprint)
    if not todo:
        echo(f"[sweep] ranks: reusing those of {', '.join(selection.names)}")
        return ids
    with ExitStack() as claims:
        # every process claims in one (sorted) order, so two sweeps never hold what the other waits for
        for method in sorted(todo):
            claims.enter_context(run.claim(f"ranks-{method}", waiting=lambda holder, m=method: echo(
                f"[sweep] ranks of {m}: waiting for {holder}, which extracts them")))
        missing = run.ranks_to_make(selection, options.splits, ds.fingerprint)  # extracted by another meanwhile
        if not missing:
            return ids
        started = time.perf_counter()
        # the missing methods alone, with the --method-arg values they take: no name looked up again
        run_extract(run.root, options, dataset_obj=ds, device=device, seed=seed, progress=progress, executor=executor,
                    selection=selection.only(missing))
    # methods extracted together share their passes (one set of noisy samples, one loader pass): one time
    seconds = time.perf_counter() - started
    _remember_extraction(run, ds, selection.only(missing), options, device, seconds)
    kept = [m for m in selection.names if m not in missing]
    echo(f"[sweep] extract: {', '.join(missing)} in {seconds:.0f} s" + (f"; reusing {', '.join(kept)}" if kept else ""))
    run.record_stage_time("extract", {", ".join(missing): seconds})
    return ids


def _remember_extraction(run, ds, selection, options, device, seconds: float) -> None:
    """Keeps the seconds per image of this extraction in the step-time record (roarfast.stages.step_times), which later
    dry runs read."""
    base = run.head().base
    spec = recorded_model(run.model_meta(base), run.model_path(base)) if selection.explained else None
    images = sum(len(ds.split(split)) for split in options.splits)
    batch = compute_batch(selection, device, ds.image_size)
    remember_extraction(device, spec, ds, selection, batch, options.amp, seconds, images)
