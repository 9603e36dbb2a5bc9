"""Errors about the user's input or environment (a bad option value, a missing data directory, a store that
does not match, a full disk): the CLI prints them as one line instead of a traceback."""

import errno


class UserError(ValueError):
    """Something the user can fix; the message says what was expected and what came."""


#: what to do when a write is refused, by errno: the disk or quota is full, or the place is not writable
_WRITE_REMEDIES = {errno.ENOSPC: "free space there and rerun", errno.EDQUOT: "free space there and rerun",
                   errno.EROFS: "choose a writable --run-dir", errno.EACCES: "choose a writable --run-dir",
                   errno.EPERM: "choose a writable --run-dir"}


def write_error(err: OSError, path, kept: str = "") -> UserError:
    """One line for a failed write of `path`: what the system said, what was `kept` intact, what to do."""
    remedy = _WRITE_REMEDIES.get(err.errno, "check the disk and rerun")
    return UserError(f"cannot write {path}: {err.strerror or err}; {kept + '; ' if kept else ''}{remedy}")


def is_write_refused(err: OSError) -> bool:
    """Whether `err` is the environment refusing a write (full disk or quota, read-only, no permission)."""
    return err.errno in _WRITE_REMEDIES
