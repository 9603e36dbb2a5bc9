"""`roarfast prune`: configurations removed, with what no other configuration uses."""

import click

from roarfast.cli.commands import command
from roarfast.cli.errors import friendly_errors
from roarfast.cli.options import field_option
from roarfast.common.run_options import RunOptions


@command()
@click.argument("names", nargs=-1, metavar="NAME|LABEL|ID...")
@field_option(RunOptions, "run_dir", help="the run directory to prune")
@click.option("--dry-run", is_flag=True, help="say what would be removed, and remove nothing")
@friendly_errors
def prune(names, run_dir, dry_run):
    """Remove the configurations named (names, labels or ids: `roarfast ls` lists them): their records, and their cells,
    rank stores and base models that no other configuration nor the latest request uses. Run it with --dry-run
    first."""
    # late: loads torch, and --help imports this module
    from roarfast.rundir.inventory import prune as prune_run

    for line in prune_run(run_dir, names, dry_run=dry_run):
        click.echo(line)
