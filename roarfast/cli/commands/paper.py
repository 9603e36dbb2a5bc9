"""`roarfast paper`: a folder to write a paper from (figures for a column and the page, tables, methods, BibTeX)."""

from pathlib import Path

import click

from roarfast.cli.commands import command
from roarfast.cli.errors import friendly_errors
from roarfast.cli.options import trust_option


@command()
@click.argument("run_dir", type=click.Path(file_okay=False, path_type=Path), metavar="RUN_DIR")
@click.option("--config", "configs", multiple=True, metavar="NAME|LABEL|ID",
              help="repeatable: the configurations the paper is about (`roarfast ls` lists them)  [default: every one "
                   "with finished cells]")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="the paper folder  [default: RUN_DIR/paper]")
@click.option("--figure-format", "figure_formats", default="pdf,png", metavar="pdf,png,svg",
              help="the figures' formats, comma-separated (figures.tex includes the PDF, else the PNG)")
@click.option("--dpi", type=int, default=None, help="a PNG figure's resolution  [default: 300, print quality]")
@trust_option
@friendly_errors
def paper(run_dir, configs, out_dir, figure_formats, dpi):
    """A folder to write a paper from: figures sized for a column (3.3 in) and the page (7 in), tables.tex and
    tables.md (labelled by what they hold, with the study's status and warnings as notes), methods.tex and methods.md,
    references.bib, and preview.tex, a two-column article that inputs them all (`pdflatex preview`)."""
    # late: loads torch, and --help imports this module
    from roarfast.report.paper import write_paper

    written = write_paper(run_dir, out_dir, configs, figure_formats=figure_formats, dpi=dpi)
    for line in written.summary.get("notes", []):
        click.echo(f"note: {line}")
    click.echo(f"paper folder: {written.out_dir} ({len(written.files)} files; preview.tex shows them as printed)")
