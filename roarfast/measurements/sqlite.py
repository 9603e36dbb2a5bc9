"""Opening results.sqlite so that nothing is written beside it that should not be and nothing damaged is read:
links refused, SQLite's integrity check, a reader's copy in memory, and every SQLite failure as one line naming
the file (roarfast.measurements.db's operations take the connection from here).

Read-only (`snapshot`: the report, `load`): the file is copied into memory without writing a byte beside it (no
WAL switch, no -wal/-shm files where no writer made them; a copy taken while a writer changed the file is taken
again). Opening a file runs SQLite's integrity check (`integrity_check` up to INTEGRITY_CHECK_MAX_BYTES,
`quick_check` above), which finds a table and its key index that disagree. A results.sqlite (or its -wal, -shm or
-journal) that is a symbolic link, or a file with other hard links, is refused: SQLite would write through it (a
reader, which writes only the -shm, is refused a symbolic link at results.sqlite, not a hard one).
"""

import functools
import os
import sqlite3
from pathlib import Path
from urllib.parse import quote

from roarfast.common.atomic import refuse_link
from roarfast.errors import UserError

BUSY_TIMEOUT_S = 60.0  # a writer waits this long for another process's transaction before failing
#: up to this size an opened file gets SQLite's full integrity check (table against index: a few ms for
#: thousands of rows, benchmarks/RESULTS.md "Verified reads"), above it the quick check (pages and rows only)
INTEGRITY_CHECK_MAX_BYTES = 64 << 20
#: the files SQLite writes beside a database
_SIDE_FILES = ("-wal", "-shm", "-journal")
#: times a read-only copy is taken before giving up on a file that a writer changes while each is taken
SNAPSHOT_TRIES = 5


def database_error(path: Path, err: sqlite3.DatabaseError) -> UserError:
    """One line for an SQLite failure: the file, what went wrong and what to do."""
    text = str(err)
    if "full" in text:
        remedy = "free space on its filesystem and rerun (the rows written before are kept)"
    elif "readonly" in text or "unable to open" in text:
        remedy = "its directory is not writable: choose a writable --run-dir"
    elif "malformed" in text or "not a database" in text:
        remedy = "restore it from a copy, or move it aside to measure again from scratch"
    else:
        remedy = "rerun; if it persists, check the file and its filesystem"
    return UserError(f"{path}: {text}; {remedy}")


def sqlite_errors(method):
    """The method with SQLite's failures turned into database_error's one line."""

    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        except sqlite3.DatabaseError as err:
            if isinstance(err, (sqlite3.IntegrityError, sqlite3.ProgrammingError)):
                raise  # roarfast's own mistake, not the file's
            raise database_error(self.path, err) from None

    return wrapper


def damaged(path: Path, what: str) -> UserError:
    """One line for a results file whose content failed a check: what failed and the repair."""
    return UserError(f"{path}: {what}; restore it from a copy, or move it aside to measure again from scratch")


def check_integrity(conn: sqlite3.Connection, path: Path) -> None:
    """SQLite's integrity check of the database on `conn` (the file `path`): the full one where it is small
    enough to be cheap, else the quick one; a UserError naming the first problem found."""
    size = conn.execute("PRAGMA page_count").fetchone()[0] * conn.execute("PRAGMA page_size").fetchone()[0]
    check = "integrity_check" if size <= INTEGRITY_CHECK_MAX_BYTES else "quick_check"
    problem = conn.execute(f"PRAGMA {check}(1)").fetchone()[0]
    if problem != "ok":
        raise damaged(path, f"SQLite's {check} failed ({' '.join(problem.split())})")  # one line


def _refuse_links(path: Path, *, readonly: bool) -> None:
    """Refuses what SQLite would write through (atomic.refuse_link's lines): a symbolic link at `path` or
    beside it (its -wal, -shm, -journal), or a file there with other hard links. A reader only reads `path`
    itself, so a hard link there is no matter to it, but a symbolic one is refused too: SQLite would create
    the -wal and -shm beside the link's target, outside the run directory."""
    if readonly and path.is_symlink():
        raise UserError(f"refusing to read {path}: it is a symbolic link (to {os.readlink(path)}), and SQLite "
                        f"would create its -wal and -shm beside the target, outside the run directory; put the file "
                        f"itself there and rerun")
    refuse_link(path, in_place=not readonly)
    for suffix in _SIDE_FILES:
        refuse_link(path.with_name(path.name + suffix), in_place=True)


def _lstat(path: Path) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except FileNotFoundError:
        return None


def connect(path: Path, query: str, *, readonly: bool, **kwargs) -> sqlite3.Connection:
    """sqlite3.connect to the database file `path` (`query`: the URI's parameters), its links refused
    (_refuse_links) before SQLite opens it and again right after, before SQLite writes a byte (opening, it
    reads only the header): SQLite opens the file itself and follows links (Python's sqlite3 cannot ask it for
    O_NOFOLLOW), so `path` is also refused when another file took its place in between. No descriptor of
    roarfast's own checks it: closing one would drop the POSIX locks SQLite holds on the file for this
    process's other connections."""
    _refuse_links(path, readonly=readonly)
    before = _lstat(path)
    conn = sqlite3.connect(f"file:{quote(str(path.absolute()))}{query}", uri=True, **kwargs)
    try:
        _refuse_links(path, readonly=readonly)
        after = _lstat(path)
        if before is not None and (after is None or (after.st_dev, after.st_ino) != (before.st_dev, before.st_ino)):
            raise UserError(f"{path} was replaced by another file while roarfast opened it; rerun")
    except BaseException:
        conn.close()
        raise
    return conn


def _version(path: Path) -> tuple | None:
    """What changes when `path` is written, replaced or removed, as lstat tells it."""
    status = _lstat(path)
    return None if status is None else (status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns,
                                        status.st_ctime_ns)


def snapshot(path: Path) -> sqlite3.Connection:
    """An in-memory copy of the database at `path`, read without creating a file beside it where no writer
    is. Where a writer's -wal file exists (rows may be there and not yet in the file), through SQLite's
    read-only mode, which uses the writer's -wal and -shm under SQLite's locks; else as an immutable file,
    which creates neither (a read-only directory could not hold them) but takes no lock either, so the copy
    is kept only when no -wal appeared and the file did not change while it was read, and taken again
    otherwise (a sweep's writer opening, checkpointing and closing meanwhile). The copy is taken in one
    backup, so the reader sees one consistent state."""
    if _lstat(path) is None:
        raise UserError(f"{path} does not exist")
    wal = path.with_name(path.name + "-wal")
    for _ in range(SNAPSHOT_TRIES):
        before, locked = _version(path), os.path.lexists(wal)
        source = connect(path, "?mode=ro" if locked else "?mode=ro&immutable=1", readonly=True,
                          timeout=BUSY_TIMEOUT_S)
        memory = sqlite3.connect(":memory:", isolation_level=None)
        try:
            source.backup(memory)
        except sqlite3.DatabaseError:
            memory.close()
            if locked or _version(path) == before:
                raise
            continue  # read while a writer changed it: taken again
        finally:
            source.close()
        if locked or (_version(path) == before and not os.path.lexists(wal)):
            return memory
        memory.close()
    raise UserError(f"{path} changed each of the {SNAPSHOT_TRIES} times it was read (a writer checkpointing "
                    f"it); rerun")
