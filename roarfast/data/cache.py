"""Measurements of image-file trees kept between commands: a split's shared image size, a streamed split's
digest, channel sums and undecodable files (one full read and decode of the split, which `train`, `extract`
and `retrain` would otherwise each repeat), and the decoded canvases of an in-memory split
(roarfast.data.canvas_cache).

A record is keyed by the split folder's real path, every file's name, size, modification and change times
(a Listing), and the decoding options, so a changed, added or removed file makes a new key (and a new
measurement); the change time catches a file rewritten with its size and modification time put back (cp -p,
rsync -t, tar), which a user cannot set. Records live under $ROARFAST_CACHE_DIR, else
$XDG_CACHE_HOME/roarfast, else ~/.cache/roarfast. Each is sealed with its digest
(roarfast.common.fingerprint.seal): a damaged, unreadable or unsealed one is measured again (a note says so), never
used.
"""

import hashlib
import logging
import os
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from roarfast.common.atomic import write_record
from roarfast.errors import UserError
from roarfast.common.fingerprint import config_hash, read_record

log = logging.getLogger(__name__)

#: bump when what a record holds, or how it is measured or keyed, changes (2: sealed with its digest; 3: keyed by
#: the files' change times too); records of earlier formats are keyed apart, so never read
FORMAT = 3


def cache_root() -> Path:
    if os.environ.get("ROARFAST_CACHE_DIR"):
        return Path(os.environ["ROARFAST_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "roarfast"


def file_stamp(stat: os.stat_result) -> tuple[int, int, int]:
    """What a file's key holds of its stat: (size, modification time, change time), in ns."""
    return stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns


@dataclass(frozen=True)
class Listing:
    """Files of one folder (names relative to it, in row order) with their file_stamp, taken once when the
    folder is listed, so that every key of the split hashes the same listing without a second stat of each
    file."""

    folder: Path
    files: list
    stamps: list

    @classmethod
    def of(cls, folder: Path, files: list[str]) -> "Listing":
        """The listing of `files` (relative to folder), each stat'ed now."""
        return cls(Path(folder), list(files), [file_stamp((Path(folder) / name).stat()) for name in files])

    def rows(self, rows) -> "Listing":
        """The listing of the files at `rows` (in that order)."""
        return Listing(self.folder, [self.files[i] for i in rows], [self.stamps[i] for i in rows])

    @cached_property
    def digest(self) -> str:
        """sha256 hex of the files' names and stamps, `name NUL stamp LF` each (a name never holds a NUL, and a
        stamp's digits end at the LF: one text, one listing), computed once however many keys hash it."""
        lines = "".join(f"{name}\0{size} {mtime} {ctime}\n" for name, (size, mtime, ctime) in zip(self.files,
                                                                                                  self.stamps))
        return hashlib.sha256(lines.encode("utf-8", "surrogateescape")).hexdigest()

    def key(self, kind: str, options: dict) -> str:
        """Hex key of a measurement of these files made with `options`."""
        return config_hash({"format": FORMAT, "kind": kind, "folder": str(self.folder.resolve()),
                            "files": self.digest, "options": options})


def path(kind: str, key: str, suffix: str = ".json") -> Path:
    """Where the record (or, with another suffix, a file beside it) of `key` lives."""
    return cache_root() / kind / f"{key}{suffix}"


def read(kind: str, key: str) -> dict | None:
    """The verified record stored under key, or None (absent, unreadable, damaged or without its digest: it
    is measured again)."""
    try:
        record = read_record(path(kind, key), "measuring it again")  # FORMAT 2 on keys sealed records only
    except OSError:
        return None
    except UserError as err:
        log.warning("note: %s", err)
        return None
    return record


def write(kind: str, key: str, record: dict) -> None:
    """Stores record under key, sealed; a cache that cannot be written (a link at its place included) only
    costs a later re-measurement."""
    try:
        store(kind, key, record)
    except (OSError, UserError):
        pass


def store(kind: str, key: str, record: dict) -> None:
    """Stores record under key, sealed (roarfast.common.atomic.write_record); raises what the write raises."""
    where = path(kind, key)
    where.parent.mkdir(parents=True, exist_ok=True)
    write_record(where, record)
