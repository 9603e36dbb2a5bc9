"""`roarfast sweep`: the whole benchmark grid (README, "The whole benchmark") — methods x modes x fractions x
seeds, each cell beside its mask-only control — resumable, shareable and local or on Ray.

It trains the base model when the run directory has none, extracts the ranks the store lacks (or holds with
another provenance), plans the grid against results.sqlite (roarfast.grid) and runs the cells left through an
executor (roarfast.executors); it returns once every cell of its grid is done.
"""

import time
from contextlib import ExitStack

from roarfast.executors import EXECUTORS, Progress, RayOptions, check_workers, execute, import_ray
from roarfast.grid import Grid, describe_plan, make_plan
from roarfast.options import check_choice


def run_sweep(run_dir, grid: Grid, *, executor: str = "local", ray: RayOptions | None = None, dry_run: bool = False,
              dataset=None, data_dir=None, dataset_options=None, device="auto", seed: int = 0, progress: bool = True,
              extract_options=None, dataset_obj=None, echo=print, group_size: int | None = None,
              workers_per_cell: int = 1, cell_processes: int = 1) -> dict:
    """Runs `grid` in run_dir: base model, ranks, then every cell not yet done, `group_size` cells trained
    together (None: the device's default, roarfast.train.default_grouping) or each over `workers_per_cell`
    processes (data-parallel) or (CPU) side by side in `cell_processes` single-thread processes (executors.
    execute); `dry_run`: prints what it would do
    (roarfast.preview) and does none of it. Returns {"plan": Plan, "rows": [row of each cell of the grid]} (rows
    empty on a dry run)."""
    from roarfast.cells import CellTrainer, cell_estimators, cell_recipe
    from roarfast.device import resolve_device
    from roarfast.extract import ExtractOptions
    from roarfast.memory import keep_freed_memory
    from roarfast.methods.selection import Selection
    from roarfast.results import RETRAIN, open_results
    from roarfast.rundir import RunDir
    from roarfast.train import default_grouping

    keep_freed_memory()
    check_choice("--executor", executor, EXECUTORS)
    if executor == "ray":
        import_ray()  # fail before any work when Ray is missing
    run = RunDir(run_dir)
    device = resolve_device(device)
    grouping = default_grouping(device, group_size)
    check_workers(workers_per_cell, group_size, device, (ray or RayOptions()) if executor == "ray" else None)
    options = extract_options or ExtractOptions()
    if dry_run:
        from roarfast.preview import preview_sweep

        preview = preview_sweep(run, grid, dataset=dataset, data_dir=data_dir, dataset_options=dataset_options,
                                dataset_obj=dataset_obj, device=device, seed=seed, extract_options=options)
        for line in preview.lines():
            echo(line)
        return {"plan": preview.plan, "rows": []}
    selection = Selection.of(cell_estimators(grid.methods), options, seed)
    ds = dataset_obj if dataset_obj is not None else run.open_dataset(dataset, data_dir, dataset_options)
    grid, selection, note = grid.for_data(selection, ds.name, ds.train.masks is not None)
    if note:
        echo(f"[sweep] {note}")
    run.check_writable()  # before anything is trained; the stages check their own estimates
    _ensure_base_model(run, ds, grid, selection, options.amp, device, seed, progress, echo)
    _ensure_ranks(run, ds, selection, options, device, seed, progress, echo)
    model, recipe = cell_recipe(run, ds, device, grid)
    trainer = CellTrainer(run, ds, model, recipe, grid.fill, device, progress=False, grouping=grouping)
    trainer.check_ranks(selection.names)
    with open_results(run) as db:
        plan = make_plan(trainer, grid, db, selection.names)
        for line in describe_plan(plan, grid):
            echo(f"[sweep] {line}")
        bar = Progress(len(plan.todo), progress, echo, eta=plan.finished)
        execute(trainer, plan.todo, db, executor=executor, ray=ray, progress=bar, echo=echo, group_size=grouping.size,
                workers_per_cell=workers_per_cell, cell_processes=cell_processes)
        rows = [db.get(key) for _, key in plan.cells]
        # every retraining of the run directory, this grid's and earlier ones' (other fills, fractions)
        retrained = db.rows(kind=RETRAIN, status="done")
    run.record_stage_time("retrain", sum(r["seconds"] for r in retrained))
    return {"plan": plan, "rows": rows}


def _ensure_base_model(run, ds, grid, selection, amp, device, seed, progress, echo) -> dict:
    """The base model of the run directory when it was trained on this dataset (and its model's source is
    unchanged), else a newly trained grid.model (default: the dataset's), once a fresh copy of it showed
    that it fits the methods of `selection` the store lacks (methods.requirements.check_methods, their
    parameters under --amp `amp`): a refusal comes before anything is written. Trained under the run
    directory's claim, so of several sweeps started together one trains it and the others wait and reuse it."""
    from roarfast.checkpoint import recorded_model
    from roarfast.basemodel import run_train

    def trained(meta) -> bool:
        return bool(meta) and meta.get("dataset_fingerprint") == ds.fingerprint

    if not trained(run.base_meta()):
        options = _base_options(run, ds, grid, selection, amp, device)
        with run.claim("base", waiting=lambda holder: echo(f"[sweep] base model: waiting for {holder}, which "
                                                           f"trains it")):
            if not trained(run.base_meta()):  # else another sweep trained it while this one waited
                # ds.data_dir is recorded with the dataset: later commands on the run directory need no flags
                summary = run_train(run.root, options, dataset_obj=ds, seed=seed, device=device, progress=progress)
                echo(f"[sweep] base model: val {summary['val_acc']:.1%}, test {summary['test_acc']:.1%} "
                     f"({summary['seconds']:.0f} s)")
                run.record_stage_time("train", summary["seconds"])
                return run.base_meta()
    meta = run.base_meta()
    recorded_model(meta, run.base_checkpoint)  # a changed model source is refused, both hashes named
    echo(f"[sweep] base model: reusing {meta['model']} (test {meta['test_acc']:.1%})")
    run.record_stage_time("train", meta.get("seconds", 0.0))
    return meta


def _base_options(run, ds, grid, selection, amp, device):
    """The TrainOptions of grid.model (default: the dataset's), once a fresh copy of it showed that it fits the
    methods of `selection` the store lacks."""
    import torch

    from roarfast.basemodel import TrainOptions
    from roarfast.methods.requirements import check_methods
    from roarfast.probe import checked_model
    from roarfast.recipe import default_model

    spec = checked_model(grid.model or default_model(ds, device), ds)
    with torch.random.fork_rng(devices=[]):  # the check leaves the run's random numbers as they were
        fresh = spec.build(ds.num_classes, ds.image_size, ds.channels).to(device)
    missing = selection.only(run.rank_store.missing(selection.names))
    check_methods(fresh, ds, missing, missing.method_params(ds, device, amp), device)
    return TrainOptions(model=spec, amp=grid.amp, recipe=grid.recipe)


def _ensure_ranks(run, ds, selection, options, device, seed, progress, echo) -> None:
    """Extracts the methods of `selection` whose ranks the store lacks, or holds with another provenance than
    this sweep makes (a parameter, an argument, the estimator's code, the seed, the base model:
    RunDir.ranks_to_make; a complete store of the same provenance is left as it is), with `options`, each under
    the run directory's claim on its ranks, so that several sweeps extract each method once."""
    from dataclasses import replace

    from roarfast.extract import run_extract

    todo = run.ranks_to_make(selection, options.splits)
    if not todo:
        return
    with ExitStack() as claims:
        # every process claims in one (sorted) order, so two sweeps never hold what the other waits for
        for method in sorted(todo):
            claims.enter_context(run.claim(f"ranks-{method}", waiting=lambda holder, m=method: echo(
                f"[sweep] ranks of {m}: waiting for {holder}, which extracts them")))
        missing = run.ranks_to_make(selection, options.splits)  # extracted by another sweep while this one waited
        if not missing:
            return
        started = time.perf_counter()
        # the missing methods alone, with the --method-arg values they take
        alone = replace(options, methods=",".join(missing), method_args=dict(selection.only(missing).args))
        run_extract(run.root, alone, dataset_obj=ds, device=device, seed=seed, progress=progress)
    # methods extracted together share their passes (one set of noisy samples, one loader pass): one time
    seconds = time.perf_counter() - started
    echo(f"[sweep] extract: {', '.join(missing)} in {seconds:.0f} s")
    run.record_stage_time("extract", {", ".join(missing): seconds})
