"""The commands of `roarfast`, one module each, named after its command: a click command made with `@command`,
which registers it in COMMANDS (a roarfast.common.resolver.Resolver), whose first lookup imports every module
here; roarfast.cli assembles the group from it. A new command is one module here and its test.

A command is thin: it receives its options as the library's option objects (roarfast.cli.options), calls the
library and prints. Heavy imports (torch, the extension, DALI) happen inside its body, so that every --help
answers at once; a command whose answer may be kept (a dry run; an extraction with nothing to do) says so
(`kept=`), and an identical call whose records are unchanged prints that answer without running the body
(roarfast.common.kept).
"""

import functools

import click

from roarfast.cli.errors import OneLineCommand
from roarfast.common import kept as answers
from roarfast.common.memory import own_process
from roarfast.common.resolver import Entry, Resolver
from roarfast.data.cache import cache_root

COMMANDS = Resolver("command", "roarfast COMMAND", package=__name__)


def command(name: str | None = None, kept=None, **attrs):
    """Decorator: the function as a roarfast command (its name: `name`, else the function's), registered in
    COMMANDS; `attrs` as click.command takes them. `kept`: where the command's answer may be kept, a function of
    its parameters that returns the folders it names when the call only reads (`read_only`), else None.
    (Whether a command starts again for an allocator is decided before the commands load: roarfast.cli.start.)"""

    def decorate(func):
        made = click.command(name, cls=OneLineCommand, **attrs)(func if kept is None else _keeping(func, kept))
        summary = " ".join((made.help or "").split("\n\n", 1)[0].split())  # its docstring's first paragraph
        COMMANDS.register(Entry(made.name, summary, value=made, module=func.__module__))
        return made

    return decorate


def _keeping(func, folders_of):
    """func, its answer kept and replayed (roarfast.common.kept) on the calls for which folders_of(params) names
    folders: (those it may write in, those it only reads)."""

    @functools.wraps(func)
    def keeping(**params):
        # the `roarfast` command's own process only: one that calls the CLI in itself (a test, a notebook) may have
        # changed code that no file shows
        folders = folders_of(params) if answers.enabled() and own_process() else None
        if folders is None:
            return func(**params)
        store, name = cache_root() / answers.FOLDER, answers.key(func.__name__, params)
        if answers.replay(store, name):
            return None
        with answers.recording(store, name, *folders):
            return func(**params)

    return keeping


def read_only(params: dict, dry_run: bool = True) -> tuple | None:
    """The `kept` of a command on a run directory and its data, when it runs here (a cluster's state is not in
    files) and `dry_run`: ([its run directory], [its image tree, if it names one]), the folders it may write in
    and those it only reads (roarfast.common.kept.recording)."""
    if not dry_run or params.get("executor", "local") != "local":
        return None
    return [params["run_dir"]], [params["data_dir"]] if params.get("data_dir") is not None else []
