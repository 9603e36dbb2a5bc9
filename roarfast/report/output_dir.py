"""A directory of output written whole (the report's, the paper folder): built in a temporary directory beside it and
swapped in at once (roarfast.common.atomic.replace_dir), so a kill or a full disk leaves the previous one whole;
marked by a file of its own, so the next one replaces it and no directory roarfast did not write is ever replaced
(but an empty one); a failure said in one line, with what it left.
"""

from pathlib import Path

from roarfast.common.atomic import check_writable, replace_dir
from roarfast.errors import UserError, is_write_refused, write_error


def write_whole(out_dir: Path, build, what: str, marker: str, written_before=lambda names: False) -> list:
    """Replaces out_dir by what `build(tmp)` writes into a fresh directory (its return: the files' names), adding the
    marker file; `what` names the output in messages ("report", "paper folder"); `written_before(names)`: whether a
    directory of those files without the marker is one written before markers existed. Raises UserError, writing
    nothing, when out_dir holds files none of these wrote, or cannot be written."""
    previous = _snapshot(out_dir) if _check_replaceable(out_dir, what, marker, written_before) else None
    check_writable(out_dir.parent, 0, "--out")  # built beside out_dir, then swapped in

    def built(tmp: Path) -> list:
        files = build(tmp)
        (tmp / marker).write_text(f"written by roarfast, which replaces this directory whole: the {what}\n")
        return files

    try:
        return replace_dir(out_dir, built)
    except OSError as err:
        if not is_write_refused(err):
            raise
        raise write_error(err, err.filename or out_dir, _left(out_dir, previous, what)) from None
    except UserError as err:
        raise UserError(f"{err}; {_left(out_dir, previous, what)}") from None


def _check_replaceable(out_dir: Path, what: str, marker: str, written_before) -> bool:
    """Whether out_dir holds a previous one (which the new one replaces). A UserError when it is a directory
    holding anything else."""
    if out_dir.is_symlink() or not out_dir.is_dir():
        return False  # nothing there, or what replace_dir refuses in one line (a link, a file)
    names = {p.name for p in out_dir.iterdir()}
    if not names:
        return False
    if marker in names or written_before(names):
        return True
    others = sorted(names - {marker})
    shown = ", ".join(others[:3]) + (f" and {len(others) - 3} more" if len(others) > 3 else "")
    raise UserError(f"refusing to write the {what} into {out_dir}: it holds files no roarfast {what} wrote ({shown}), "
                    f"and a {what} replaces its directory whole; name a new or empty directory with --out")


def _snapshot(out_dir: Path) -> dict:
    """name -> (size, modification time) of every file in out_dir: what says, after a failure, that the
    previous one is still there as it was."""
    return {p.name: (p.stat().st_size, p.stat().st_mtime_ns) for p in out_dir.iterdir() if p.is_file()}


def _left(out_dir: Path, previous: dict | None, what: str) -> str:
    """What a failed write left, said only as far as it is seen to be true."""
    if previous is None:
        return f"no {what} was written"
    if out_dir.is_dir() and not out_dir.is_symlink() and _snapshot(out_dir) == previous:
        return f"the previous {what} in {out_dir} is intact"
    return f"the previous {what} in {out_dir} was not found as it was; rerun to write a new one"
