"""The one path builder of a run directory (DESIGN "Containment"): every place below a root is made here from
names, each checked to be one name (not empty, no separator, not `.` or `..`, no control character), so no id,
method or file name a record gives can make a path outside the root; and a place a record is read from or
written to is refused where a symbolic link on its way below the root leads outside it (`contained`).
"""

import os
from pathlib import Path

from roarfast.common.atomic import refuse_link
from roarfast.errors import UserError

#: characters no name of a place may hold: the separators, and NUL with the other control characters
_FORBIDDEN = {"/", "\\", *map(chr, range(32)), chr(127)}


def check_name(name, root) -> str:
    """`name` when it is one name of a place below `root`; a UserError naming `root` and the name otherwise."""
    if not isinstance(name, str) or name in ("", ".", "..") or _FORBIDDEN.intersection(name):
        raise UserError(f"{root}: {str(name)[:60]!r} cannot name a place in it (a name is not empty, holds no "
                        f"separator nor control character, and is not '.' or '..'): the record that gave it was "
                        f"edited or damaged; restore it, or remove it")
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
