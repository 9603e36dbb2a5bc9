"""The commands of `roarfast`, one module each, named after its command: a click command made with `@command`,
which registers it in COMMANDS (a roarfast.common.resolver.Resolver), whose first lookup imports every module
here; roarfast.cli assembles the group from it. A new command is one module here and its test.

A command is thin: it receives its options as the library's option objects (roarfast.cli.options), calls the
library and prints. Heavy imports (torch, the extension, DALI) happen inside its body, so that every --help
answers at once.
"""

import click

from roarfast.cli.errors import OneLineCommand
from roarfast.common.resolver import Entry, Resolver

COMMANDS = Resolver("command", "roarfast COMMAND", package=__name__)


def command(name: str | None = None, **attrs):
    """Decorator: the function as a roarfast command (its name: `name`, else the function's), registered in
    COMMANDS; `attrs` as click.command takes them. (Whether a command starts again for an allocator is decided
    before the commands load: roarfast.cli.start.)"""

    def decorate(func):
        made = click.command(name, cls=OneLineCommand, **attrs)(func)
        summary = " ".join((made.help or "").split("\n\n", 1)[0].split())  # its docstring's first paragraph
        COMMANDS.register(Entry(made.name, summary, value=made, module=func.__module__))
        return made

    return decorate
