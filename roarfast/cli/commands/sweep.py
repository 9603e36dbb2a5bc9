"""`roarfast sweep`: the whole grid (base model, ranks, every cell results.sqlite lacks), or its plan."""

from dataclasses import replace

import click

from roarfast.cli.commands import command, read_only
from roarfast.cli.errors import built, friendly_errors
from roarfast.cli.options import (chunk_images_option, compute_batch_option, executor_options, margin_option,
                                  method_arg_option, name_option, options_of, seeds_plan_options, trust_option)
from roarfast.common.options import AUTO_SEEDS, CELLS, CHUNKS
from roarfast.common.run_options import CellLayout, RunOptions
from roarfast.data.options import DataOptions
from roarfast.methods.parameters import PARAMETERS
from roarfast.planning.costs import STATED
from roarfast.planning.grid_options import GridOptions


@command(kept=lambda params: read_only(params, params["dry_run"]))
@options_of(RunOptions, "run")
@options_of(DataOptions, "data")
@options_of(GridOptions, "grid")
@seeds_plan_options
@margin_option
@click.option("--cam-layer", "gradcam_layer", default=None, help=PARAMETERS["gradcam_layer"].help)
@method_arg_option
@executor_options(CELLS, CHUNKS)
@chunk_images_option
@compute_batch_option
@click.option("--dry-run", is_flag=True, help="print the plan (what is reused by id, what is made, cells done and to "
              "do; per stage images, bytes on disk, peak memory, device-hours, ETA) and stop")
@click.option("--plan-device", type=click.Choice(list(STATED)), default=None,
              help="--dry-run: cost the stages on this device from its stated peak and the steps' FLOPs, where it is "
                   "not the one here  [default: this machine's device, from steps measured on it]")
@click.option("--plan-workers", type=click.IntRange(min=1), default=1,
              help="--dry-run: the stages' time shared by N workers (the base model data-parallel, extraction by "
                   "chunks, one cell per worker)")
@options_of(CellLayout, "layout")
@name_option
@trust_option
@friendly_errors
def sweep(run, data, grid, detect, max_seeds, margin, gradcam_layer, method_arg, executor, chunk_images, compute_batch, dry_run, plan_device, plan_workers,
          layout, name):
    """The whole grid: base model, ranks, then every cell (method x mode x fraction x seed, each with its
    mask-only control) that results.sqlite lacks. Safe to kill and rerun; several sweeps may share a run
    directory (cells are claimed before they are trained)."""
    # late: loads torch, and --help imports this module
    from roarfast.orchestration.seeds_auto import run_seeds_auto
    from roarfast.orchestration.sweep import run_sweep
    from roarfast.stages.extract import ExtractOptions

    if not dry_run and (plan_device is not None or plan_workers != 1):
        raise click.UsageError("--plan-device and --plan-workers cost a dry run: add --dry-run")
    auto = grid.seeds == AUTO_SEEDS
    if max_seeds is not None and not auto:
        raise click.UsageError("--max-seeds caps --seeds auto: add --seeds auto")
    swept = dict(executor=executor.make(), dry_run=dry_run, **data.stage_arguments(), **run.stage_arguments(),
                 extract_options=built(ExtractOptions, gradcam_layer=gradcam_layer, method_args=method_arg,
                                       chunk_images=chunk_images, compute_batch=compute_batch),
                 echo=click.echo, group_size=layout.group_size, workers_per_cell=layout.workers_per_cell,
                 plan_device=plan_device, plan_workers=plan_workers, name=name,
                 threads_per_cell=layout.threads_per_cell)
    cells = built(replace(grid, seeds=None).grid if auto else grid.grid, run.seed)
    detect, margin = (None if v is None else v / 100 for v in (detect, margin))
    if auto:
        run_seeds_auto(run.run_dir, cells, detect=detect, max_seeds=max_seeds, margin=margin, **swept)
    else:
        run_sweep(run.run_dir, cells, seeds_plan={"detect": detect},
                  reading=None if margin is None else {"margin": margin}, **swept)
