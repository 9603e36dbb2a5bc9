"""`roarfast extract`: attribution maps ranked into the rank store, here or chunk by chunk on an executor."""

import click

from roarfast.cli.commands import command, read_only
from roarfast.cli.errors import friendly_errors
from roarfast.cli.options import (METHOD_FORMS, NAMED_AGAIN, chunk_images_option, compute_batch_option, executor_options, field_option,
                                  method_arg_option, model_option, options_of, parameter_options, trust_option)
from roarfast.common.options import CHUNKS, parse_list
from roarfast.common.run_options import RunOptions
from roarfast.data.options import DataOptions
from roarfast.planning.grid_options import GridOptions


@command(kept=read_only)
@options_of(RunOptions, "run")
@options_of(DataOptions, "data")
@click.option("--method", "methods", default="sg-sq", help=METHOD_FORMS)
@click.option("--split", "splits", default="train,test", help="splits to attribute, comma-separated")
@click.option("--batch-size", type=int, default=None,
              help="images a pass reads, rounded to whole compute batches (default: one compute batch)")
@parameter_options
@method_arg_option
@field_option(GridOptions, "amp", help="autocast for the model's passes (auto: bf16 on GPU, off on CPU)")
@click.option("--keep-maps/--no-keep-maps", default=False, help="also store fp16 maps (for pictures)")
@click.option("--force", is_flag=True, help="recompute a complete store")
@click.option("--compile/--no-compile", "compile_model", default=False,
              help="torch.compile the model for its passes (pays a compile first; worth it on large runs)")
@executor_options(CHUNKS)
@chunk_images_option
@compute_batch_option
@model_option(NAMED_AGAIN)
@trust_option
@friendly_errors
def extract(run, data, methods, splits, batch_size, method_arg, amp, keep_maps, force, compile_model, executor,
            chunk_images, compute_batch, model, **parameters):
    """Attribution maps for every train and test image -> per-pixel ranks in the rank store. A store made with
    other values (a parameter, an argument, the estimator's code, the base model) is made again. Resumable chunk
    by chunk; on a Ray cluster (--executor ray) each chunk left is a task, written here as it comes back."""
    # late: loads torch, and --help imports this module
    from roarfast.rundir.directory import RunDir
    from roarfast.stages.extract import ExtractOptions, run_extract, summary_line

    RunDir(run.run_dir).check_named_model(model)
    options = ExtractOptions(methods=methods, splits=parse_list(splits), batch_size=batch_size, amp=amp,
                             keep_maps=keep_maps, force=force, compile=compile_model, method_args=method_arg,
                             chunk_images=chunk_images, compute_batch=compute_batch, **parameters)
    summary = run_extract(run.run_dir, options, **data.stage_arguments(), **run.stage_arguments(),
                          executor=executor.make())
    click.echo(summary_line(summary, RunDir(run.run_dir).ranks_root))
