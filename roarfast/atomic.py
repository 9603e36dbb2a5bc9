"""Files replaced atomically and durably: a reader sees the old or the new file, never a mix, and a
kill or power loss after the call returns keeps the new one. Every file roarfast rewrites in place
(manifests, checkpoints, run-directory and cache records) goes through here."""

import json
import os
import tempfile
from pathlib import Path


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
