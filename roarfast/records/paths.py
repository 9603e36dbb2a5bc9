"""The one path builder of a run directory (DESIGN "Containment"): every place below a root is made here from
names, each checked to be one name (not empty, no separator, not `.` or `..`, no control character), so no id,
method or file name a record gives can make a path outside the root; and a place a record is read from, written
to or removed at is refused where a symbolic link on its way below the root leads outside it (`contained`).

A name a record supplies (a method, a file name) is checked where the record is read (`check_record_name`, as
roarfast.records.ids.check_id checks an id), so that its one line names the record, not the place it would have
made; the path builder checks it again wherever a place is made of it.
"""

import os
from pathlib import Path

from roarfast.common.atomic import refuse_link
from roarfast.errors import UserError

#: characters no name of a place may hold: the separators, and NUL with the other control characters
_FORBIDDEN = {"/", "\\", *map(chr, range(32)), chr(127)}
#: what a name is, as the refusals say it
_RULE = "a name is not empty, holds no separator nor control character, and is not '.' or '..'"


def is_name(name) -> bool:
    """Whether `name` is one name of a place: a string, not empty, not `.` or `..`, no separator, no control
    character."""
    return isinstance(name, str) and name not in ("", ".", "..") and not _FORBIDDEN.intersection(name)


def check_name(name, root) -> str:
    """`name` when it is one name of a place below `root`; a UserError naming `root` and the name otherwise."""
    if not is_name(name):
        raise UserError(f"{root}: {str(name)[:60]!r} cannot name a place in it ({_RULE}): the record that gave it "
                        f"was edited or damaged; restore it, or remove it")
    return name


def check_record_name(name, what: str, where, repair: str = "restore it, or remove it") -> str:
    """`name`, which the record `where` gives as its `what` (a method, a file name), when it is one name of a place;
    a UserError naming the record and its `repair` otherwise (a record edited: no path is ever made from it)."""
    if not is_name(name):
        raise UserError(f"{where}: its {what} {str(name)[:60]!r} cannot name a place ({_RULE}): the record was "
                        f"edited or damaged; {repair}")
    return name


def place(root, *names) -> Path:
    """The place `root`/`names[0]`/`names[1]`/..., each name checked (check_name)."""
    path = Path(root)
    for name in names:
        path = path / check_name(name, root)
    return path


def contained(root, path) -> Path:
    """`path` when it lies below `root` as written and no symbolic link on its way below `root` leads outside
    `root` (atomic.refuse_link's one line names the first that does); a UserError otherwise."""
    root, path = Path(root), Path(path)
    try:
        parts = Path(os.path.normpath(path.absolute())).relative_to(os.path.normpath(root.absolute())).parts
    except ValueError:  # below `root` only with a `..` that leads out of it, or elsewhere
        raise UserError(f"{path} is not in {root}: a record's place is below its run directory") from None
    inside = os.path.realpath(root)
    step = root
    for name in parts:
        step = step / name
        if step.is_symlink() and os.path.commonpath([inside, os.path.realpath(step)]) != inside:
            refuse_link(step)
    return path
