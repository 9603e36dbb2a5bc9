"""`roarfast report`: tables, figures and verdicts of a configuration (or each) from results.sqlite."""

from pathlib import Path

import click

from roarfast.cli.commands import command
from roarfast.cli.errors import friendly_errors
from roarfast.cli.options import field_option, margin_option, trust_option
from roarfast.common.run_options import RunOptions


@command()
@field_option(RunOptions, "run_dir", help="the run directory to report on")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="where to write the report  [default: RUN_DIR/report]")
@click.option("--config", "config", default=None, metavar="NAME|LABEL|ID",
              help="the configuration to report: its id or an id prefix, its --name, or any label it was shown with "
                   "(`roarfast ls` lists them)  [default: the latest request's]")
@click.option("--all", "every", is_flag=True, help="every configuration of the run directory, each apart")
@click.option("--figure-format", "figure_formats", default="png", metavar="png,svg,pdf",
              help="the figures' formats, comma-separated (the page embeds the PNG, else the SVG)")
@click.option("--dpi", type=int, default=None, help="a PNG figure's resolution  [default: the report's, for a screen]")
@margin_option
@trust_option
@friendly_errors
def report(run_dir, out_dir, config, every, figure_formats, dpi, margin):
    """Tables, figures and verdicts (estimators against random, leakage, ranking) from results.sqlite, with
    the tables a paper quotes as tables.tex (booktabs) and tables.md, for the configuration of the latest request (a sweep, `run`, `retrain`, Study.run()) unless --config or --all say
    otherwise; its first lines list the other configurations and the command that reports each."""
    # late: loads torch, and --help imports this module
    from roarfast.report import ALL, write_report

    if config is not None and every:
        raise click.UsageError("--config and --all: give one of them")
    written = write_report(run_dir, out_dir, config=ALL if every else config, figure_formats=figure_formats, dpi=dpi,
                           margin=margin)
    for line in written.verdict_lines():
        click.echo(line)
    click.echo(f"report: {written.index_html}")
