"""Files replaced atomically and durably: a reader sees the old or the new file, never a mix, and a
kill or power loss after the call returns keeps the new one. Every file roarfast rewrites in place
(manifests, checkpoints, run-directory and cache records) goes through here."""

import json
import os
import shutil
import tempfile
from pathlib import Path

from roarfast.errors import UserError

#: free space every writing stage needs beyond its own estimate: results rows, the SQLite WAL, manifests
WRITE_MARGIN_BYTES = 16 << 20


def replace_file(path, write) -> None:
    """Calls write(tmp_path) on a temporary file beside `path`, syncs it, renames it over `path` and syncs
    the directory entry (the rename is durable only once that is)."""
    path = Path(path)
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
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def write_json(path, data, indent: int = 1) -> None:
    """Replaces `path` by `data` as JSON (sorted keys; non-JSON values as their str)."""
    text = json.dumps(data, indent=indent, sort_keys=True, default=str)
    replace_file(path, lambda tmp: tmp.write_text(text))


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
