"""`roarfast evaluate`: the no-retrain evaluations of the base model on the rank store (MoRF, LeRF, ROAD)."""

import click

from roarfast.cli.commands import command
from roarfast.cli.errors import built, friendly_errors
from roarfast.cli.options import NAMED_AGAIN, field_option, model_option, options_of, trust_option
from roarfast.common.options import parse_list
from roarfast.common.run_options import RunOptions
from roarfast.data.options import DataOptions
from roarfast.modes import NO_RETRAIN_METRICS
from roarfast.planning.grid_options import GridOptions


@command()
@options_of(RunOptions, "run")
@options_of(DataOptions, "data")
@click.option("--metric", "metrics", default=",".join(NO_RETRAIN_METRICS),
              help=f"{', '.join(NO_RETRAIN_METRICS)} (road = MoRF and LeRF with the imputation fill), comma-separated")
@field_option(GridOptions, "fractions", default=["0.1,0.3,0.5,0.7,0.9"],
              help="fraction(s) of pixels replaced; repeat or comma-separate")
@click.option("--method", "methods", default=None, help="methods to evaluate (default: every method with test ranks)")
@click.option("--batch-size", type=int, default=None, help="images per batch (default: by device)")
@model_option(NAMED_AGAIN)
@trust_option
@friendly_errors
def evaluate(run, data, metrics, fractions, methods, batch_size, model):
    """No-retrain evaluations of the base model on the rank store: MoRF, LeRF, ROAD (results.sqlite)."""
    # late: loads torch, and --help imports this module
    from roarfast.cli.tables import no_retrain_table
    from roarfast.rundir.directory import RunDir
    from roarfast.stages.noretrain import NoRetrainOptions, run_noretrain

    RunDir(run.run_dir).check_named_model(model)
    options = built(NoRetrainOptions, metrics=parse_list(metrics), fractions=tuple(fractions), methods=methods,
                    batch_size=batch_size)
    rows = run_noretrain(run.run_dir, options, **data.stage_arguments(), **run.stage_arguments())
    click.echo(no_retrain_table(rows))
