"""`roarfast list`: every name the commands take, read from the registries (roarfast.cli.listing)."""

import json

import click

from roarfast.cli.commands import command
from roarfast.cli.errors import friendly_errors
from roarfast.cli.listing import KINDS, listing, listing_lines


@command("list")  # nothing here loads torch (roarfast.cli.start: not started again for an allocator)
@click.argument("kinds", nargs=-1, type=click.Choice(KINDS), metavar=f"[{'|'.join(KINDS)}]...")
@click.option("--json", "as_json", is_flag=True, help="print the listing as JSON")
@click.option("--captum/--no-captum", default=True,
              help="list the installed Captum's attribution classes among the estimators (read from its source)")
@friendly_errors
def list_names(kinds, as_json, captum):
    """Every name the commands take: estimators (--method; the installed Captum's classes as captum:<Class>),
    models (--model), datasets (--dataset), fills (--fill), no-retrain metrics (evaluate --metric), each with
    a one-line description and its parameters."""

    listed = listing(kinds or KINDS, captum=captum)
    if as_json:
        click.echo(json.dumps(listed, indent=1))
        return
    for line in listing_lines(listed):
        click.echo(line)
