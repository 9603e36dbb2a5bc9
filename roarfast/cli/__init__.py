"""The `roarfast` command line: the group and its own options (--config FILE, --version). The commands are one
module each in roarfast.cli.commands, which registers them (COMMANDS); the group is assembled from that registry,
so this module names none. Each command receives the library's option objects (roarfast.cli.options: run, data,
grid, executor, cell layout), which check their values: a failed check is one line, a usage error.

A `--config FILE` (YAML) supplies defaults that flags override (roarfast.cli.config): top-level keys apply to every
command, a section named after a command to that command only.
"""

import shlex
import sys

from roarfast.cli.start import computes
from roarfast.common.memory import own_process, preload_allocator

if computes(sys.argv[1:]):
    # the command starts again, once, with a well-kept allocator, before click, the commands and torch load (each
    # would load twice otherwise); one that computes nothing (--help, ls) is spared the second start
    preload_allocator()

import click  # noqa: E402  (after the allocator's start: loaded once)

from roarfast.cli.commands import COMMANDS  # noqa: E402
from roarfast.cli.config import load_config  # noqa: E402
from roarfast.cli.errors import OneLineGroup  # noqa: E402
from roarfast.records.head import set_command  # noqa: E402


@click.group(cls=OneLineGroup, commands=[entry.value for entry in COMMANDS],
             context_settings={"help_option_names": ["-h", "--help"], "show_default": True})
@click.option("--config", type=click.Path(exists=True, dir_okay=False), callback=load_config, is_eager=True,
              expose_value=False, help="YAML file of defaults: top-level keys for every command, or a section per command")
@click.version_option(package_name="roarfast")
@click.pass_context
def main(ctx):
    """roarfast: the ROAR interpretability benchmark (RemOve And Retrain), end to end, fast.

    A session on the embedded dataset: `roarfast train`, then `roarfast extract --method sg-sq`,
    then `roarfast retrain --fraction 0.7`; or everything at once with `roarfast run`.
    """
    # what HEAD and the configurations record: the command line, where this process is roarfast's own
    set_command(shlex.join(["roarfast", *sys.argv[1:]]) if own_process() else f"roarfast {ctx.invoked_subcommand}")
