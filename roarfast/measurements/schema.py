"""The layout of results.sqlite (the table `measurements`, schema version SCHEMA_VERSION) and the migration of
files written by earlier versions.

Schema versions: 1 (cells), 2 (+ owner, heartbeat: claims), 3 (the table `measurements`: kind, fill and
NULL seeds and epochs where they do not apply, instead of no-retrain rows posing as seed-0 cells and the
fill in `extra`), 4 (+ threads: the CPU threads a measurement ran with; CPU accuracies depend on it), 5 (+
config: the configuration whose hash is config_hash, as canonical JSON; NULL for rows written before), 6 (+
row_sha256: the digest of each row, `row_digest`, written with it and checked whenever it is read). An
older file is migrated in one transaction, its rows kept and their config hashes unchanged, so finished
measurements stay finished; migrating to v6 gives every row the digest of its content as found, which was
never verified before (a note says so: opened read-only, in the in-memory copy, every time).
"""

import hashlib
import json
import logging
from contextlib import contextmanager
from pathlib import Path

from roarfast.errors import UserError
from roarfast.fills import DEFAULT_FILL
from roarfast.modes import NO_RETRAIN_METRICS, NO_RETRAIN_MODES, is_control
from roarfast.measurements.row import NO_RETRAIN, RETRAIN

log = logging.getLogger(__name__)

SCHEMA_VERSION = 6
#: the schema version that introduced row digests
DIGEST_VERSION = 6

_SCHEMA = """
CREATE TABLE IF NOT EXISTS measurements (
    kind TEXT NOT NULL,
    dataset TEXT NOT NULL,
    model TEXT NOT NULL,
    method TEXT NOT NULL,
    mode TEXT NOT NULL,
    fill TEXT,
    fraction REAL NOT NULL,
    seed INTEGER,
    config_hash TEXT NOT NULL,
    status TEXT NOT NULL,
    test_acc REAL,
    val_acc REAL,
    epochs INTEGER,
    seconds REAL,
    versions TEXT,
    extra TEXT,
    error TEXT,
    created TEXT NOT NULL,
    finished TEXT,
    owner TEXT,
    heartbeat REAL,
    threads INTEGER,
    config TEXT,
    row_sha256 TEXT
);
CREATE UNIQUE INDEX IF NOT EXISTS measurement_key ON measurements
    (kind, dataset, model, method, mode, IFNULL(fill, ''), fraction, IFNULL(seed, -1), config_hash);
"""


#: the columns a row's digest covers: all but the digest and the heartbeat, which a claimant refreshes
#: every HEARTBEAT_S with a bare UPDATE (a damaged one only makes a live claim look stale)
DIGESTED_COLUMNS = ("kind", "dataset", "model", "method", "mode", "fill", "fraction", "seed", "config_hash", "status",
                    "test_acc", "val_acc", "epochs", "seconds", "versions", "extra", "error", "created", "finished",
                    "owner", "threads", "config")


def row_digest(row) -> str:
    """sha256 hex of the Python repr of a row's DIGESTED_COLUMNS as SQLite returns them (row: a mapping):
    deterministic for what a column holds (floats as the shortest text that reads back to the same float),
    and any other type a damaged column could hold has a repr of its own."""
    return hashlib.sha256(repr([row[column] for column in DIGESTED_COLUMNS]).encode()).hexdigest()


@contextmanager
def transaction(conn):
    """BEGIN IMMEDIATE ... COMMIT on `conn`, rolled back on an exception."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def migrate(conn, path: Path, readonly: bool = False) -> None:
    """Brings the database on `conn` (the file `path`, named in errors; `readonly`: an in-memory copy of it)
    to SCHEMA_VERSION in one transaction, its rows kept."""
    with transaction(conn):
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version not in range(SCHEMA_VERSION + 1):
            raise UserError(f"{path} has schema version {version}, this roarfast reads up to {SCHEMA_VERSION}: "
                            f"a newer roarfast wrote it")
        if version == 1:  # a results file from before claims: same rows, two more columns
            conn.execute("ALTER TABLE cells ADD COLUMN owner TEXT")
            conn.execute("ALTER TABLE cells ADD COLUMN heartbeat REAL")
        if version == 3:  # before thread counts: they were never recorded (NULL)
            conn.execute("ALTER TABLE measurements ADD COLUMN threads INTEGER")
        if version in (3, 4):  # before configurations were kept: only their hashes are known (NULL)
            conn.execute("ALTER TABLE measurements ADD COLUMN config TEXT")
        if version in (3, 4, 5):
            conn.execute("ALTER TABLE measurements ADD COLUMN row_sha256 TEXT")
        for statement in _SCHEMA.split(";")[:-1]:  # executescript would commit the open transaction
            conn.execute(statement)
        if version in (1, 2):
            _migrate_cells(conn)
        if version < DIGEST_VERSION:
            _digest_rows(conn, path, version, readonly)
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")


def _digest_rows(conn, path: Path, version: int, readonly: bool) -> None:
    """Schema < 6 -> 6 inside the open transaction: every row gets the digest of its content as found, and a
    note says that those rows were never verified (nothing can tell whether they changed before)."""
    rows = conn.execute("SELECT rowid, * FROM measurements").fetchall()
    for row in rows:
        conn.execute("UPDATE measurements SET row_sha256 = ? WHERE rowid = ?", (row_digest(dict(row)), row["rowid"]))
    if not rows:
        return
    if readonly:
        log.warning("note: %s (schema v%d) predates row digests: its %d row(s) are read unverified (a command "
                    "that writes results gives them digests of their content as found)", path, version, len(rows))
    else:
        log.warning("note: %s (schema v%d) predates row digests: its %d row(s) were given digests of their content "
                    "as found, which was never verified", path, version, len(rows))


def _migrate_cells(conn) -> None:
    """Schema 2 -> 3 inside the open transaction: every row of the table `cells` moves to `measurements`
    with its kind, its fill out of `extra` (the fill a no-retrain mode names; the default for a cell that
    never recorded one; none for a control) and NULL where a v2 row held a placeholder (a no-retrain row's
    seed 0 and epochs 0). Keys keep their config hashes, so finished measurements stay finished."""
    for row in conn.execute("SELECT * FROM cells").fetchall():
        row = dict(row)
        extra = json.loads(row["extra"]) if row["extra"] else {}
        if row["mode"] in NO_RETRAIN_MODES:
            kind, seed, epochs = NO_RETRAIN, None, None
            fill = next(f for modes in NO_RETRAIN_METRICS.values() for m, _, f in modes if m == row["mode"])
        else:
            kind, seed, epochs = RETRAIN, row["seed"], row["epochs"]
            fill = None if is_control(row["mode"]) else extra.get("fill", DEFAULT_FILL)
        extra.pop("fill", None)
        values = {**row, "kind": kind, "fill": fill, "seed": seed, "epochs": epochs,
                  "extra": json.dumps(extra, sort_keys=True) if extra else None}
        conn.execute(f"INSERT INTO measurements ({', '.join(values)}) VALUES ({', '.join('?' for _ in values)})",
                     list(values.values()))
    conn.execute("DROP TABLE cells")
