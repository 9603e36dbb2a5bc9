"""Measurements of image-file trees kept between commands: a streamed split's digest, channel sums and
undecodable files cost one full read and decode of the split, which `train`, `extract` and `retrain`
would otherwise each repeat.

A record is keyed by the split folder's real path, every file's name, size and modification time, and
the decoding options, so a changed, added or removed file makes a new key (and a new measurement).
Records live under $ROARFAST_CACHE_DIR, else $XDG_CACHE_HOME/roarfast, else ~/.cache/roarfast. Each is
sealed with its digest (roarfast.fingerprint.seal): a damaged, unreadable or unsealed one is measured
again (a note says so), never used.
"""

import logging
import os
from pathlib import Path

from roarfast.atomic import write_record
from roarfast.errors import UserError
from roarfast.fingerprint import config_hash, read_record

log = logging.getLogger(__name__)

#: bump when what a record holds, or how it is measured, changes (2: sealed with its digest; records of
#: format 1 are keyed apart, so never read)
FORMAT = 2


def cache_root() -> Path:
    if os.environ.get("ROARFAST_CACHE_DIR"):
        return Path(os.environ["ROARFAST_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "roarfast"


def listing_key(kind: str, folder: Path, files: list[str], options: dict) -> str:
    """Hex key of a measurement of `files` (relative to folder) made with `options`."""
    listing = []
    for name in files:
        stat = (folder / name).stat()
        listing.append([name, stat.st_size, stat.st_mtime_ns])
    return config_hash({"format": FORMAT, "kind": kind, "folder": str(Path(folder).resolve()), "files": listing,
                        "options": options})


def _path(kind: str, key: str) -> Path:
    return cache_root() / kind / f"{key}.json"


def read(kind: str, key: str) -> dict | None:
    """The verified record stored under key, or None (absent, unreadable, damaged or without its digest: it
    is measured again)."""
    path = _path(kind, key)
    try:
        record = read_record(path, "measuring it again")  # FORMAT 2 keys sealed records only
    except OSError:
        return None
    except UserError as err:
        log.warning("note: %s", err)
        return None
    return record


def write(kind: str, key: str, record: dict) -> None:
    """Stores record under key, sealed; a cache that cannot be written (a link at its place included) only
    costs a later re-measurement."""
    path = _path(kind, key)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_record(path, record)
    except (OSError, UserError):
        pass
