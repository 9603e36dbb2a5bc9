"""Errors about the user's input (a bad option value, a missing data directory, a store that does not
match): the CLI prints them as one line instead of a traceback."""


class UserError(ValueError):
    """Something the user can fix; the message says what was expected and what came."""
