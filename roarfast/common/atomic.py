"""Files and directories replaced atomically and durably, never through a link: a reader sees the old or
the new file, never a mix, a kill or power loss after the call returns keeps the new one, and a symbolic
link planted where roarfast writes is refused (one line naming it), its target left alone. Every file
roarfast writes in a run directory goes through here: records and checkpoints by `replace_file` /
`write_json` / `write_record` (a rename, so a hard link at the place is replaced, the file behind its other
names unchanged), files written in place (claim locks, rank arrays) opened by `open_nofollow`, which also
refuses a file with other hard links (a write in place would change it under those names too), the report
swapped in whole by `replace_dir`; SQLite's files, which SQLite opens itself, are looked at by
`refuse_link(path, in_place=True)`."""

import errno
import fcntl
import json
import os
import shutil
import stat
import tempfile
from pathlib import Path

from roarfast.errors import UserError
from roarfast.common.fingerprint import seal

#: free space every writing stage needs beyond its own estimate: results rows, the SQLite WAL, manifests
WRITE_MARGIN_BYTES = 16 << 20


def refuse_link(path, *, in_place: bool = False) -> None:
    """A UserError naming `path` when it is a symbolic link (roarfast writes no file through one), or, with
    `in_place` (a file written where it is, not replaced by a rename), a file with other hard links."""
    try:
        status = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISLNK(status.st_mode):
        raise UserError(f"refusing to write {path}: it is a symbolic link (to {os.readlink(path)}), and roarfast "
                        f"writes nothing through a link; remove it and rerun")
    if in_place:
        _refuse_shared(path, status)


def _refuse_shared(path, status: os.stat_result) -> None:
    """A UserError naming `path` when its file (`status`) has other names: written in place, it would change
    under them too."""
    if stat.S_ISREG(status.st_mode) and status.st_nlink > 1:
        copy = f"{path}.copy"
        raise UserError(f"refusing to write {path}: it has {status.st_nlink} hard links, and a write in place "
                        f"would change the file behind its other names too; give it a copy of its own (cp {path} "
                        f"{copy} && mv {copy} {path}) and rerun")


def open_nofollow(path, flags: int, mode: int = 0o644) -> int:
    """os.open(path, flags) for a file written in place (claim locks, rank arrays): a symbolic link at `path`
    is refused (refuse_link's one line) instead of opening its target, and so, when `flags` open it for
    writing, is a file with other hard links, seen on the opened descriptor itself (no check-then-open race;
    O_TRUNC waits for that check)."""
    writes = flags & (os.O_WRONLY | os.O_RDWR)
    try:
        fd = os.open(path, (flags & ~os.O_TRUNC if writes else flags) | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    except OSError as err:
        if err.errno == errno.ELOOP:
            refuse_link(path)
        raise
    if writes:
        try:
            _refuse_shared(path, os.fstat(fd))
            if flags & os.O_TRUNC:
                os.ftruncate(fd, 0)
        except BaseException:
            os.close(fd)
            raise
    return fd


def _fsync_dir(directory) -> None:
    """Makes the entries of `directory` (a rename into it) durable."""
    dir_fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def replace_file(path, write) -> None:
    """Calls write(tmp_path) on a temporary file beside `path` (created new, so no link can be there), syncs
    it, renames it over `path` and syncs the directory entry (the rename is durable only once that is). A
    symbolic link at `path` is refused (refuse_link)."""
    path = Path(path)
    refuse_link(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        write(Path(tmp))
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)


def replace_bytes(path, data: bytes) -> None:
    """Replaces `path` by `data` (replace_file), written through the temporary file's own descriptor."""
    def write(tmp: Path) -> None:
        fd = open_nofollow(tmp, os.O_WRONLY | os.O_TRUNC)
        with os.fdopen(fd, "wb") as f:
            f.write(data)

    replace_file(path, write)


def write_json(path, data, indent: int = 1) -> None:
    """Replaces `path` by `data` as JSON (sorted keys; non-JSON values as their str)."""
    replace_bytes(path, json.dumps(data, indent=indent, sort_keys=True, default=str).encode())


def write_record(path, record: dict, indent: int = 1) -> None:
    """Replaces `path` by `record` sealed with its digest (fingerprint.seal), which every reader checks
    (fingerprint.read_record)."""
    write_json(path, seal(record), indent=indent)


def replace_dir(path, build):
    """Builds a new directory with `build(tmp)` and swaps it in whole at `path`; returns what build returns.

    `build` receives a fresh temporary directory beside `path` (`.<name>.build-*`, same filesystem) and
    writes everything there (paths it returns point into it, not into `path`). Then every file in it is
    synced, the previous `path` (if any) is renamed aside to `.<name>.previous`, the new one renamed to
    `path`, and the previous removed. `path` is replaced whole: whatever it held before is gone. A symbolic
    link at `path`, or a file, is refused (one line naming it). One call at a time per `path`: an
    exclusive lock on `.<name>.lock` beside it, released when the call ends or the process dies.

    What a failure or a kill leaves:
    - in `build` (an exception, a full disk): `path` as it was; the temporary directory is removed (a kill
      leaves it, and the next call on `path` removes it);
    - after `path` was renamed aside, before the new one is in (a kill, or the rename failing): no `path`,
      the previous whole at `.<name>.previous`; a failed rename puts it back at once, a kill is undone by
      the next call, which renames it back before building;
    - after the new one is in: the new `path` whole; the previous, if not yet removed, at
      `.<name>.previous`, removed by the next call.
    So at every point `path` is the previous whole, the new whole, or (only after a kill between the two
    renames, until the next call) absent with the previous whole beside it.
    """
    path = Path(path)
    parent = path.parent
    parent.mkdir(parents=True, exist_ok=True)
    refuse_link(path)
    if path.exists() and not path.is_dir():
        raise UserError(f"refusing to replace {path}: it is a file, not a directory; move it aside and rerun")
    aside = parent / f".{path.name}.previous"
    lock = open_nofollow(parent / f".{path.name}.lock", os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        _recover(path, aside)
        tmp = Path(tempfile.mkdtemp(dir=parent, prefix=f".{path.name}.build-"))
        try:
            result = build(tmp)
            _fsync_tree(tmp)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        if path.exists():
            os.rename(path, aside)
        try:
            os.rename(tmp, path)
        except BaseException:
            if aside.exists():
                os.rename(aside, path)
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        _fsync_dir(parent)
        shutil.rmtree(aside, ignore_errors=True)
        return result
    finally:
        os.close(lock)


def _recover(path: Path, aside: Path) -> None:
    """Undoes what a killed replace_dir on `path` left (its lock is held): the previous directory renamed
    back when `path` is missing, else removed; stale build directories removed."""
    if os.path.islink(aside):  # never roarfast's: a link is removed, its target left alone
        os.unlink(aside)
    elif aside.exists():
        if os.path.lexists(path):
            shutil.rmtree(aside, ignore_errors=True)
        else:
            os.rename(aside, path)
    prefix = f".{path.name}.build-"
    for stale in path.parent.iterdir():
        if stale.name.startswith(prefix) and stale.is_dir() and not stale.is_symlink():
            shutil.rmtree(stale, ignore_errors=True)


def _fsync_tree(root: Path) -> None:
    """Syncs every file and directory under `root` (root included), so the swapped-in tree is durable."""
    for directory, _, files in os.walk(root):
        for name in files:
            if os.path.islink(os.path.join(directory, name)):
                continue  # a link build made: its target is not part of the tree
            fd = os.open(os.path.join(directory, name), os.O_RDONLY | os.O_NOFOLLOW)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        _fsync_dir(directory)


def check_writable(directory, need_bytes: int, flag: str) -> None:
    """Creates `directory` if needed and writes a probe file in it: a UserError naming `flag` (the option
    that chooses the directory) when it cannot be written, or when its filesystem has less than
    need_bytes + WRITE_MARGIN_BYTES free. A real write, not os.access: as root or on a read-only mount,
    permission bits alone do not tell."""
    directory = Path(directory)
    try:
        directory.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=directory, prefix=".write-check-")
        os.close(fd)
        os.unlink(probe)
    except OSError as err:
        raise UserError(f"cannot write {directory} ({err.strerror}: {err.filename}); choose another {flag}") from None
    free = shutil.disk_usage(directory).free
    if free < need_bytes + WRITE_MARGIN_BYTES:
        raise UserError(f"{directory} has {free / 2**20:.0f} MiB free, but this writes about "
                        f"{(need_bytes + WRITE_MARGIN_BYTES) / 2**20:.0f} MiB there; free space or choose another "
                        f"{flag}")
