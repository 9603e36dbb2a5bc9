"""The one line every `roarfast` command shows instead of a traceback: an option value that does not parse or check
is one line naming the option and the text, with a usage error's exit code (`OneLineGroup`, `OptionError`,
`built`); an error the user can fix (bad input, a missing or stale extension build, a full disk or a read-only
directory) is one line with exit code 1 (`friendly_errors`)."""

import functools

import click

from roarfast._extension import ExtensionError
from roarfast.errors import UserError, is_write_refused, write_error


class OptionError(click.ClickException):
    """A bad option value, shown as one line ("Error: ..."), with a usage error's exit code but without click's
    usage banner."""

    exit_code = 2


class _OneLineUsage:
    """A click command whose usage errors (an option's value that does not parse, an unknown option) are
    OptionError's one line, without the usage and the hint click prints above them."""

    def make_context(self, *args, **kwargs):
        try:
            return super().make_context(*args, **kwargs)
        except click.exceptions.NoArgsIsHelpError:
            raise  # the help itself, not an error
        except click.UsageError as err:
            raise OptionError(err.format_message()) from None


class OneLineCommand(_OneLineUsage, click.Command):
    """A `roarfast` command (OneLineGroup.command_class)."""


class OneLineGroup(_OneLineUsage, click.Group):
    """The `roarfast` group: its own options and its commands' (command_class) fail in one line."""

    command_class = OneLineCommand


def built(factory, *args, **values):
    """factory(*args, **values): an options object, whose checks' UserError is a usage error (exit code 2, one
    line)."""
    try:
        return factory(*args, **values)
    except UserError as err:
        raise OptionError(str(err)) from None


def friendly_errors(func):
    """Turns errors the user can fix (bad input, a missing or stale extension build, a full disk or a
    read-only directory) into one-line messages instead of tracebacks."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        try:
            return func(*args, **kwargs)
        except (UserError, ExtensionError) as err:
            raise click.ClickException(str(err)) from None
        except OSError as err:
            if not is_write_refused(err):
                raise
            raise click.ClickException(str(write_error(err, err.filename or "a file", "what was written before is "
                                                                                       "intact"))) from None

    return wrapper
