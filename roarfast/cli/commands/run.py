"""`roarfast run`: the main job on the embedded dataset, from the base model to the verdicts."""

import click

from roarfast.cli.commands import command
from roarfast.cli.errors import friendly_errors
from roarfast.cli.options import METHOD_FORMS, field_option, margin_option, name_option, options_of
from roarfast.common.run_options import RunOptions
from roarfast.data.options import DataOptions
from roarfast.planning.grid_options import GridOptions


@command("run")
@options_of(RunOptions, "run")
@field_option(DataOptions, "options", help="embedded dataset option, repeatable: num_train, num_test, seed, copies")
@field_option(GridOptions, "fractions", help="fractions of the grid (default: the one covering the object, 0.25, 0.5)")
@click.option("--method", "methods", default=None, help=METHOD_FORMS + " (default: the quick preset's)")
@click.option("--seeds", type=int, default=None, help="retrainings per cell (default: the quick preset's 3)")
@click.option("--epochs", type=int, default=None, help="training epochs of each cell (default: the quick preset's)")
@margin_option
@name_option
@friendly_errors
def run_command(run, options, fractions, methods, seeds, epochs, margin, name):
    """The main job on the embedded dataset: the quick sweep (train, extract, retrain ROAR and KAR over seeds
    with mask-only controls), then the report; prints the verdicts and the dataset's own checks."""
    # late: loads torch, and --help imports this module
    from roarfast.orchestration.demo import run_demo

    run_demo(run.run_dir, **run.stage_arguments(), fractions=fractions, methods=methods, seeds=seeds, epochs=epochs,
             dataset_options=options, name=name, margin=margin)
