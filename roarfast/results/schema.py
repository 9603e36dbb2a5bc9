"""The layout of results.sqlite (the table `measurements`, schema version SCHEMA_VERSION) and the migration of
files written by earlier versions.

Schema versions: 1 (cells), 2 (+ owner, heartbeat: claims), 3 (the table `measurements`: kind, fill and
NULL seeds and epochs where they do not apply, instead of no-retrain rows posing as seed-0 cells and the
fill in `extra`), 4 (+ threads: the CPU threads a measurement ran with; CPU accuracies depend on it), 5 (+
config: the configuration whose hash is config_hash, as canonical JSON; NULL for rows written before). An
older file is migrated in one transaction, its rows kept and their config hashes unchanged, so finished
measurements stay finished.
"""

import json
from contextlib import contextmanager
from pathlib import Path

from roarfast.errors import UserError
from roarfast.fills import DEFAULT_FILL
from roarfast.modes import NO_RETRAIN_METRICS, NO_RETRAIN_MODES, is_control
from roarfast.results.measurement import NO_RETRAIN, RETRAIN

SCHEMA_VERSION = 5

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
    config TEXT
);
CREATE UNIQUE INDEX IF NOT EXISTS measurement_key ON measurements
    (kind, dataset, model, method, mode, IFNULL(fill, ''), fraction, IFNULL(seed, -1), config_hash);
"""


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


def migrate(conn, path: Path) -> None:
    """Brings the database on `conn` (the file `path`, named in errors) to SCHEMA_VERSION in one transaction,
    its rows kept."""
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
        for statement in _SCHEMA.split(";")[:-1]:  # executescript would commit the open transaction
            conn.execute(statement)
        if version in (1, 2):
            _migrate_cells(conn)
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")


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
