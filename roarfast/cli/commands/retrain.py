"""`roarfast retrain`: cells retrained from scratch on masked data, for each method, mode and fraction."""

import click

from roarfast.cli.commands import command
from roarfast.cli.errors import built, friendly_errors
from roarfast.cli.options import (amp_option, field_option, model_option, name_option, options_of, recipe_option,
                                  trust_option)
from roarfast.common.options import parse_list
from roarfast.common.run_options import CellLayout, RunOptions
from roarfast.data.options import DataOptions
from roarfast.modes import MODES, ROAR
from roarfast.planning.grid_options import GridOptions


@command()
@options_of(RunOptions, "run")
@options_of(DataOptions, "data")
@field_option(GridOptions, "fractions", default=["0.7"],
              help="fraction(s) of pixels removed (ROAR) or kept (KAR); repeat or comma-separate")
@click.option("--method", "methods", default=None, help="methods to retrain on (default: every stored method, plus random)")
@click.option("--mode", "modes", default=ROAR, help=f"{', '.join(MODES)} or {','.join(MODES)}")
@click.option("--seeds", type=int, default=1, help="retrainings per cell (seeds 0..N-1)")
@model_option("model to retrain: {models} (default: the base model's)")
@click.option("--epochs", type=int, default=None, help="training epochs (default: the base model's recipe)")
@recipe_option
@field_option(GridOptions, "fill")
@click.option("--mask-only/--no-mask-only", default=False,
              help="beside every cell, a control trained and tested on its removal pattern alone (mode "
                   "roar-mask / kar-mask): how much the mask's shape tells about the class")
@amp_option
@options_of(CellLayout, "layout")
@name_option
@trust_option
@friendly_errors
def retrain(run, data, fractions, methods, modes, seeds, model, epochs, recipe, fill, mask_only, amp, layout, name):
    """Retrain from scratch on masked data for each method and fraction; evaluate on masked test."""
    # late: loads torch, and --help imports this module
    from roarfast.cli.tables import retrain_table
    from roarfast.orchestration.retrain import RetrainOptions, run_retrain

    options = built(RetrainOptions, fractions=tuple(fractions), methods=methods, modes=parse_list(modes), seeds=seeds,
                    model=model, epochs=epochs, fill=fill, amp=amp, mask_only=mask_only, recipe=recipe)
    rows = run_retrain(run.run_dir, options, **data.stage_arguments(), **run.stage_arguments(),
                       group_size=layout.group_size, workers_per_cell=layout.workers_per_cell, name=name,
                       threads_per_cell=layout.threads_per_cell)
    click.echo(retrain_table(rows))
