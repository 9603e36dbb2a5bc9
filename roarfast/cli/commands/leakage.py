"""`roarfast leakage`: how visible each fill's holes are to a per-pixel detector."""

import click

from roarfast.cli.commands import command
from roarfast.cli.errors import built, friendly_errors
from roarfast.cli.options import field_option, options_of, trust_option
from roarfast.common.options import parse_list
from roarfast.common.run_options import RunOptions
from roarfast.data.options import DataOptions
from roarfast.fills import DEFAULT_FILL, FILLS, ROAD_FILL
from roarfast.planning.grid_options import GridOptions


@command()
@options_of(RunOptions, "run")
@options_of(DataOptions, "data")
@click.option("--fill", "fills", default=f"{DEFAULT_FILL},{ROAD_FILL}",
              help=f"fills to compare, comma-separated: {', '.join(FILLS.names)}")
@field_option(GridOptions, "fractions", default=["0.3,0.5,0.7"],
              help="fraction(s) of pixels removed; repeat or comma-separate")
@click.option("--method", default="random", help="whose stored ranks give the removal patterns")
@click.option("--max-images", type=int, default=5000, help="train and test images used, each")
@trust_option
@friendly_errors
def leakage(run, data, fills, fractions, method, max_images):
    """Fill leakage: a per-pixel detector's accuracy at finding removed pixels after each fill, vs the base rate."""
    # late: loads torch, and --help imports this module
    from roarfast.cli.tables import fill_leakage_table
    from roarfast.stages.fill_leakage import FillLeakageOptions, run_fill_leakage

    options = built(FillLeakageOptions, fills=parse_list(fills), fractions=tuple(fractions), method=method,
                    max_images=max_images)
    rows = run_fill_leakage(run.run_dir, options, **data.stage_arguments(), device=run.device, seed=run.seed)
    click.echo(fill_leakage_table(rows))
