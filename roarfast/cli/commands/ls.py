"""`roarfast ls`: what a run directory keeps, configuration by configuration."""

import click

from roarfast.cli.commands import command
from roarfast.cli.errors import friendly_errors
from roarfast.cli.options import field_option
from roarfast.common.run_options import RunOptions


@command()
@field_option(RunOptions, "run_dir", help="the run directory to list")
@click.option("--long", "long_", is_flag=True,
              help="also a table of what differs between the configurations: a column per setting, every value whole")
@friendly_errors
def ls(run_dir, long_):
    """What the run directory keeps: each configuration (its name or label, id, cells done / in its grid, the bytes
    of its base model and ranks, when it was requested, by which command; * the latest request's), and the base
    models and rank stores no configuration uses."""
    # late: loads torch, and --help imports this module
    from roarfast.cli.tables import differs_table
    from roarfast.rundir.inventory import listing, ls_lines

    found = listing(run_dir)
    for line in ls_lines(run_dir, found):
        click.echo(line)
    if long_:
        click.echo(differs_table(found["configurations"]))
