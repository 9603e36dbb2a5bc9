"""`roarfast compare`: configurations side by side, of one run directory or of several."""

import json
from pathlib import Path

import click

from roarfast.cli.commands import command
from roarfast.cli.errors import friendly_errors


@command()
@click.argument("run_dirs", nargs=-1, required=True, type=click.Path(file_okay=False, path_type=Path),
                metavar="RUN_DIR...")
@click.option("--config", "configs", multiple=True, metavar="LABEL|ID",
              help="repeatable: with one RUN_DIR, the configurations to compare, the first the baseline (default: "
                   "every one); with several, one per RUN_DIR in their order (default: each one's latest request's)")
@click.option("--json", "as_json", is_flag=True, help="print the comparison as JSON")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="also write compare.md, compare.csv and compare.json into this directory")
@friendly_errors
def compare(run_dirs, configs, as_json, out_dir):
    """Configurations side by side: two or more of one run directory, or those of several. Per mode, fill and
    fraction each side's accuracy and verdict, each side's AUC, status and base model, what differs between them
    and each side's change from the first (cells both hold: shared, not tested; the same seeds: paired t-test;
    other seeds: Welch; a 95% interval, Holm-corrected p)."""
    # late: loads numpy and scipy (the statistics), and --help imports this module
    from roarfast.cli.tables import text_table
    from roarfast.report.compare import compare as compare_runs

    comparison = compare_runs(run_dirs, configs)
    written = comparison.write(out_dir) if out_dir is not None else []
    if as_json:
        click.echo(json.dumps(comparison.to_dict(), indent=1, sort_keys=True))
        return
    for line in comparison.legend() + [f"note: {n}" for n in comparison.notes]:
        click.echo(line)
    for table in comparison.tables():
        click.echo(f"\n{table.title}\n{text_table(table.header, table.rows)}")
    for path in written:
        click.echo(f"written: {path}")
