"""Results database: every measurement of a run directory in `<run_dir>/results.sqlite` (DESIGN.md
section 7), one row each, in the table `measurements`.

A measurement is identified by explicit columns (MeasurementKey): its kind, dataset, model, method, mode,
fill, fraction, seed and the hash of the rest of its configuration. Three kinds:
- retrain: a retraining cell or its mask-only control (roarfast.cells); model = the retrained network,
  fill = NULL for a control (it sees no pixel values), epochs and val_acc of the training.
- no-retrain: the base model on modified test images (roarfast.noretrain, MoRF / LeRF / ROAD); seed,
  epochs and val_acc NULL (nothing is trained or drawn); extra: mean_probability.
- fill-leakage: a per-pixel detector finding the removed pixels after a fill (roarfast.fill_leakage);
  model = "detector", mode = "detect", test_acc = its pixel accuracy; extra: base_rate.

A row goes running -> done (or failed); a finished measurement is written in one transaction, and a
rerun skips those that are done. SQLite in WAL mode with a busy timeout lets several processes (sweep
workers) write the same file at once.

Claims: before training a cell, a process claims it (`claim`): the row becomes `running` with the
claimant's identity (host, pid, process start time) and a heartbeat it refreshes while it trains. A
cell claimed by a live process is left alone; a claim whose process is gone (same host: no such
process; another host: no heartbeat for HEARTBEAT_STALE_S) is taken over. So `kill -9` loses at most
the cell in flight, and two sweeps on one run directory split the grid.

Schema versions: 1 (cells), 2 (+ owner, heartbeat: claims), 3 (the table `measurements`: kind, fill and
NULL seeds and epochs where they do not apply, instead of no-retrain rows posing as seed-0 cells and the
fill in `extra`), 4 (+ threads: the CPU threads a measurement ran with; CPU accuracies depend on it). An
older file is migrated in place when opened, its rows kept; a run directory's leakage.json (fill leakage
before v3) moves into the database when it is opened with open_results.

Read-only (`readonly=True`: the report, `load`): the file is copied into memory without writing a byte
beside it (no WAL switch, no -wal/-shm files), and an older schema is migrated in that copy only, so a
read-only run directory can be reported on. Every SQLite failure (a damaged file, a full disk, a
read-only directory) is a UserError naming the file.
"""

import functools
import json
import math
import os
import platform
import socket
import sqlite3
import time
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from urllib.parse import quote

from roarfast.errors import UserError
from roarfast.fills import DEFAULT_FILL, FILLS
from roarfast.fingerprint import config_hash
from roarfast.modes import DETECT, NO_RETRAIN_METRICS, NO_RETRAIN_MODES, RETRAIN_MODES, is_control

RETRAIN, NO_RETRAIN, FILL_LEAKAGE = "retrain", "no-retrain", "fill-leakage"
#: the kinds of measurement, each with the modes it takes
KIND_MODES = {RETRAIN: RETRAIN_MODES, NO_RETRAIN: NO_RETRAIN_MODES, FILL_LEAKAGE: (DETECT,)}
KINDS = tuple(KIND_MODES)
#: the model column of a fill-leakage measurement: the network trained there is the hole detector
DETECTOR = "detector"
STATUSES = ("running", "done", "failed")
FRACTION_DECIMALS = 9  # fractions computed as i/10 and typed as 0.7 must name the same measurement
BUSY_TIMEOUT_S = 60.0  # a writer waits this long for another process's transaction before failing
SCHEMA_VERSION = 4
#: a claimant refreshes its heartbeat this often while it trains a cell
HEARTBEAT_S = 15.0
#: a claim from another host whose heartbeat is older than this is taken over (its process cannot be
#: looked up from here); generous against clock skew and long pauses
HEARTBEAT_STALE_S = 180.0
RETRY_S = 0.02  # poll interval while another process holds the lock the busy handler does not cover

KEY_COLUMNS = ("kind", "dataset", "model", "method", "mode", "fill", "fraction", "seed", "config_hash")
METRIC_COLUMNS = ("test_acc", "val_acc", "epochs", "seconds")
#: the order of rows(): within a kind as schema v2 ordered its cells (the report's sums depend on it)
_ORDER = "kind, dataset, model, method, mode, fraction, seed, config_hash"
#: a key column is matched with IS, so that NULL (no fill, no seed) matches NULL
_WHERE_KEY = " AND ".join(f"{c} IS ?" for c in KEY_COLUMNS)

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
    threads INTEGER
);
CREATE UNIQUE INDEX IF NOT EXISTS measurement_key ON measurements
    (kind, dataset, model, method, mode, IFNULL(fill, ''), fraction, IFNULL(seed, -1), config_hash);
"""


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _nonempty_str(name: str, value) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError(f"{name} must be a non-empty str, got {value!r}")
    return value


@dataclass(frozen=True)
class MeasurementKey:
    """What identifies one measurement in results.sqlite: its `kind` (retrain, no-retrain, fill-leakage),
    `method`'s ranks, `mode` and `fraction`, the `fill` of the removed pixels (None where no pixel value
    is seen: a mask-only control), the `seed` (None where nothing is drawn), on `dataset` with `model`,
    and the rest of its configuration hashed as `config_hash`. `MeasurementKey.of` hashes a config."""

    kind: str
    dataset: str
    model: str
    method: str
    mode: str
    fill: str | None
    fraction: float
    seed: int | None
    config_hash: str

    def __post_init__(self):
        if self.kind not in KIND_MODES:
            raise ValueError(f"kind must be one of {KINDS}, got {self.kind!r}")
        for name in ("dataset", "model", "method", "config_hash"):
            _nonempty_str(name, getattr(self, name))
        if self.mode not in KIND_MODES[self.kind]:
            raise ValueError(f"mode of a {self.kind} measurement must be one of {KIND_MODES[self.kind]}, "
                             f"got {self.mode!r}")
        without_fill = self.kind == RETRAIN and is_control(self.mode)
        if (self.fill is None) != without_fill or (self.fill is not None and self.fill not in FILLS):
            raise ValueError(f"fill must be {'None for a mask-only control' if without_fill else f'one of {FILLS}'}, "
                             f"got {self.fill!r}")
        if isinstance(self.fraction, bool) or not isinstance(self.fraction, (int, float)):
            raise ValueError(f"fraction must be a number in [0, 1], got {self.fraction!r}")
        if not (math.isfinite(self.fraction) and 0.0 <= self.fraction <= 1.0):
            raise ValueError(f"fraction must be in [0, 1], got {self.fraction!r}")
        if self.seed is None:
            if self.kind == RETRAIN:  # fill leakage imported from leakage.json never recorded its seed
                raise ValueError("seed must be a non-negative int for a retraining, got None")
        elif self.kind == NO_RETRAIN:
            raise ValueError(f"a no-retrain measurement draws nothing: seed must be None, got {self.seed!r}")
        elif isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise ValueError(f"seed must be a non-negative int, got {self.seed!r}")
        object.__setattr__(self, "fraction", round(float(self.fraction), FRACTION_DECIMALS))

    @classmethod
    def of(cls, *, config: dict, **fields) -> "MeasurementKey":
        """The key with `config` (recipe, fill, ranks' params, ...) folded into its hash."""
        return cls(**fields, config_hash=config_hash(config))


def runtime_versions() -> dict:
    """Versions of what produced a result: python, roarfast, torch, numpy."""
    import numpy
    import torch

    from roarfast.version import __version__

    return {
        "python": platform.python_version(),
        "roarfast": __version__,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "numpy": numpy.__version__,
    }


def _database_error(path: Path, err: sqlite3.DatabaseError) -> UserError:
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


def _sqlite_errors(method):
    """The method with SQLite's failures turned into _database_error's one line."""

    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        except sqlite3.DatabaseError as err:
            if isinstance(err, (sqlite3.IntegrityError, sqlite3.ProgrammingError)):
                raise  # roarfast's own mistake, not the file's
            raise _database_error(self.path, err) from None

    return wrapper


@contextmanager
def _transaction(conn):
    """BEGIN IMMEDIATE ... COMMIT on `conn`, rolled back on an exception."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def _migrate(conn, path: Path) -> None:
    """Brings the database on `conn` to SCHEMA_VERSION in one transaction, its rows kept."""
    with _transaction(conn):
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version not in range(SCHEMA_VERSION + 1):
            raise UserError(f"{path} has schema version {version}, this roarfast reads up to {SCHEMA_VERSION}: "
                            f"a newer roarfast wrote it")
        if version == 1:  # a results file from before claims: same rows, two more columns
            conn.execute("ALTER TABLE cells ADD COLUMN owner TEXT")
            conn.execute("ALTER TABLE cells ADD COLUMN heartbeat REAL")
        if version == 3:  # before thread counts: they were never recorded (NULL)
            conn.execute("ALTER TABLE measurements ADD COLUMN threads INTEGER")
        for statement in _SCHEMA.split(";")[:-1]:  # executescript would commit the open transaction
            conn.execute(statement)
        if version in (1, 2):
            _migrate_cells(conn)
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")


def _snapshot(path: Path) -> sqlite3.Connection:
    """An in-memory copy of the database at `path`, read without writing beside it. Where a writer's -wal
    file exists (rows may be there and not yet in the file) through SQLite's read-only mode, which uses
    the writer's -wal and -shm; else as an immutable file, which creates neither (a read-only directory
    could not hold them). The copy is taken in one backup, so the reader sees one consistent state."""
    if not path.is_file():
        raise UserError(f"{path} does not exist")
    wal = path.with_name(path.name + "-wal").exists()
    source = sqlite3.connect(f"file:{quote(str(path.resolve()))}?mode=ro{'' if wal else '&immutable=1'}", uri=True,
                             timeout=BUSY_TIMEOUT_S)
    try:
        memory = sqlite3.connect(":memory:", isolation_level=None)
        source.backup(memory)
    finally:
        source.close()
    return memory


class ResultsDB:
    """The results of one run directory; open one per process (connections do not cross processes).
    `readonly=True` reads an in-memory copy (_snapshot): nothing is written next to the file, and writing
    methods refuse."""

    @_sqlite_errors
    def __init__(self, path, *, readonly: bool = False):
        self.path = Path(path)
        self.readonly = readonly
        if readonly:
            self._conn = _snapshot(self.path)
            self._conn.row_factory = sqlite3.Row
            _migrate(self._conn, self.path)  # the copy only: the file keeps its version
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # isolation_level=None: transactions are explicit (BEGIN IMMEDIATE takes the write lock up front,
        # so two writers never deadlock upgrading a read lock).
        self._conn = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
        self._conn.row_factory = sqlite3.Row
        self._conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
        mode = self._enable_wal()
        if mode.lower() != "wal":
            raise UserError(f"{self.path}: SQLite could not enable WAL mode (got {mode!r}); is it on a network "
                            f"filesystem? Choose a --run-dir on a local disk")
        # FULL: a finished measurement survives a power loss, at one fsync per row.
        self._conn.execute("PRAGMA synchronous = FULL")
        _migrate(self._conn, self.path)

    def _enable_wal(self) -> str:
        """Switches a new database to WAL (persistent) and returns the journal mode now in force."""
        deadline = time.monotonic() + BUSY_TIMEOUT_S
        while True:
            try:
                return self._conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            except sqlite3.OperationalError as e:
                # The switch fails at once, without the busy handler, while another process creates the file.
                if "locked" not in str(e) or time.monotonic() > deadline:
                    raise
                time.sleep(RETRY_S)

    def _transaction(self):
        """BEGIN IMMEDIATE ... COMMIT on this database (refused on a read-only copy)."""
        if self.readonly:
            raise UserError(f"{self.path} was opened read-only (roarfast.results.ResultsDB(readonly=True))")
        return _transaction(self._conn)

    @_sqlite_errors
    def get(self, key: MeasurementKey) -> dict | None:
        """The measurement's row as `rows()` gives it, or None when it was never started."""
        row = self._conn.execute(f"SELECT * FROM measurements WHERE {_WHERE_KEY}", _key(_check_key(key))).fetchone()
        return None if row is None else _decode(row)

    def status(self, key: MeasurementKey) -> str | None:
        """"running", "done", "failed", or None when the measurement was never started."""
        row = self.get(key)
        return None if row is None else row["status"]

    def is_done(self, key: MeasurementKey) -> bool:
        return self.status(key) == "done"

    def mark_running(self, key: MeasurementKey) -> None:
        """Marks a measurement started (a rerun after a crash re-marks it); a done one stays done."""
        self._upsert(_check_key(key), {"status": "running", "finished": None, "error": None}, keep_done=True)

    def mark_failed(self, key: MeasurementKey, error: str) -> None:
        """Marks a measurement failed with `error` (one line: the exception); a done one stays done."""
        self._upsert(_check_key(key), {"status": "failed", "finished": _now(), "error": str(error)}, keep_done=True)

    @_sqlite_errors
    def claim(self, key: MeasurementKey, owner: dict | None = None) -> bool:
        """Claims `key` for `owner` (default: this process) in one transaction: True when the caller may
        train it now (it was new, failed, already ours, or held by a claimant that is gone); False when it
        is done or a live process holds it."""
        key = _check_key(key)
        owner = owner or this_process()
        with self._transaction():
            row = self._conn.execute(f"SELECT status, owner, heartbeat FROM measurements WHERE {_WHERE_KEY}",
                                     _key(key)).fetchone()
            if row is not None:
                if row["status"] == "done":
                    return False
                if row["status"] == "running":
                    holder = json.loads(row["owner"]) if row["owner"] else None
                    if holder != owner and owner_alive(holder, row["heartbeat"]):
                        return False
            self._write(key, {"status": "running", "owner": json.dumps(owner, sort_keys=True),
                              "heartbeat": time.time(), "finished": None, "error": None}, keep_done=False)
        return True

    @_sqlite_errors
    def heartbeat(self, keys, owner: dict | None = None) -> None:
        """Refreshes the heartbeat of `owner`'s running claims among `keys`."""
        owner_json = json.dumps(owner or this_process(), sort_keys=True)
        with self._transaction():
            for key in keys:
                self._conn.execute(f"UPDATE measurements SET heartbeat = ? WHERE {_WHERE_KEY} AND status = 'running' "
                                   f"AND owner = ?", [time.time(), *_key(_check_key(key)), owner_json])

    @_sqlite_errors
    def release(self, key: MeasurementKey, owner: dict | None = None) -> None:
        """Gives up `owner`'s running claim on `key` (an interrupted run): the row goes away, as if never
        started, unless someone else holds or finished it."""
        owner_json = json.dumps(owner or this_process(), sort_keys=True)
        with self._transaction():
            self._conn.execute(f"DELETE FROM measurements WHERE {_WHERE_KEY} AND status = 'running' AND owner = ?",
                               [*_key(_check_key(key)), owner_json])

    @_sqlite_errors
    def record(self, key: MeasurementKey, metrics: dict) -> None:
        """Writes a finished measurement in one transaction, replacing any earlier row of the same key.

        Args:
            metrics: test_acc (float in [0, 1]), val_acc (the same, or None without a validation split),
                epochs (int, or None when nothing was trained by epochs), seconds (float), optionally
                versions (dict; default `runtime_versions()`) and threads (the CPU threads it ran with,
                torch.get_num_threads(); None: not known); any other JSON-able keys go to `extra`.
        """
        key = _check_key(key)
        if not isinstance(metrics, dict):
            raise ValueError(f"metrics must be a dict, got {type(metrics).__name__}")
        missing = [name for name in METRIC_COLUMNS if name not in metrics]
        if missing:
            raise ValueError(f"metrics lack {missing}; expected keys {list(METRIC_COLUMNS)} (+ versions, extras)")
        values = {}
        for name in ("test_acc", "val_acc"):
            value = metrics[name]
            if name == "val_acc" and value is None:
                values[name] = None
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
                raise ValueError(f"metrics[{name!r}] must be an accuracy in [0, 1], got {value!r}")
            values[name] = float(value)
        epochs = metrics["epochs"]
        if epochs is not None and (isinstance(epochs, bool) or not isinstance(epochs, int) or epochs < 0):
            raise ValueError(f"metrics['epochs'] must be a non-negative int or None, got {epochs!r}")
        seconds = metrics["seconds"]
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not seconds >= 0:
            raise ValueError(f"metrics['seconds'] must be a non-negative number, got {seconds!r}")
        threads = metrics.get("threads")
        if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or threads < 1):
            raise ValueError(f"metrics['threads'] must be a positive int or None, got {threads!r}")
        versions = metrics.get("versions")
        versions = runtime_versions() if versions is None else versions
        extra = {k: v for k, v in metrics.items() if k not in (*METRIC_COLUMNS, "versions", "threads")}
        values.update(status="done", epochs=epochs, seconds=float(seconds), threads=threads,
                      versions=json.dumps(versions, sort_keys=True),
                      extra=json.dumps(extra, sort_keys=True) if extra else None, error=None, finished=_now(),
                      owner=None, heartbeat=None)
        self._upsert(key, values, keep_done=False)

    @_sqlite_errors
    def import_fill_leakage(self, rows: list, dataset: str, source: str) -> None:
        """Moves the rows of a fill-leakage file written before schema v3 (method, fill, fraction, accuracy,
        base_rate; `source` names it) in as done fill-leakage measurements: their seed and seconds were
        never recorded (NULL)."""
        with self._transaction():
            self._insert_fill_leakage(rows, dataset, source)

    def _insert_fill_leakage(self, rows: list, dataset: str, source: str) -> None:
        """import_fill_leakage's rows, inside an open transaction."""
        for row in rows:
            key = MeasurementKey.of(kind=FILL_LEAKAGE, dataset=dataset, model=DETECTOR, method=row["method"],
                                    mode=DETECT, fill=row["fill"], fraction=row["fraction"], seed=None,
                                    config={"imported_from": source})
            self._write(key, {"status": "done", "test_acc": float(row["accuracy"]),
                              "extra": json.dumps({"base_rate": row["base_rate"]}), "finished": _now()},
                        keep_done=False)

    @_sqlite_errors
    def _upsert(self, key: MeasurementKey, values: dict, keep_done: bool) -> None:
        with self._transaction():
            self._write(key, values, keep_done)

    def _write(self, key: MeasurementKey, values: dict, keep_done: bool) -> None:
        """Inside a transaction: inserts the row of `key` with `values`, or updates those columns of its row
        (not of a done row when keep_done)."""
        exists = self._conn.execute(f"SELECT 1 FROM measurements WHERE {_WHERE_KEY}", _key(key)).fetchone()
        if exists is None:
            columns = [*KEY_COLUMNS, *values, "created"]
            self._conn.execute(f"INSERT INTO measurements ({', '.join(columns)}) "
                               f"VALUES ({', '.join('?' for _ in columns)})", [*_key(key), *values.values(), _now()])
        else:
            self._conn.execute(f"UPDATE measurements SET {', '.join(f'{c} = ?' for c in values)} WHERE {_WHERE_KEY}"
                               + (" AND status != 'done'" if keep_done else ""), [*values.values(), *_key(key)])

    @_sqlite_errors
    def rows(self, **filters) -> list[dict]:
        """Rows as dicts (versions/extra decoded), ordered by key; filters on key columns or status, each a
        value or a list/tuple of accepted values (None matches NULL):
        `rows(kind="retrain", method=["sg", "random"], status="done")`."""
        clauses, params = [], []
        for name, wanted in filters.items():
            if name not in (*KEY_COLUMNS, "status"):
                raise ValueError(f"cannot filter on {name!r}; filters: {[*KEY_COLUMNS, 'status']}")
            wanted = list(wanted) if isinstance(wanted, (list, tuple, set)) else [wanted]
            if name == "fraction":
                wanted = [round(float(f), FRACTION_DECIMALS) for f in wanted]
            if not wanted:
                return []
            values = [w for w in wanted if w is not None]
            matches = [f"{name} IN ({', '.join('?' for _ in values)})"] if values else []
            matches += [f"{name} IS NULL"] if len(values) < len(wanted) else []
            clauses.append(f"({' OR '.join(matches)})")
            params.extend(values)
        where = f" WHERE {' AND '.join(clauses)}" if clauses else ""
        return [_decode(row) for row in self._conn.execute(f"SELECT * FROM measurements{where} ORDER BY {_ORDER}",
                                                           params)]

    def close(self) -> None:
        self._conn.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


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


def _check_key(key) -> MeasurementKey:
    if not isinstance(key, MeasurementKey):
        raise ValueError(f"key must be a roarfast.results.MeasurementKey, got {type(key).__name__}")
    return key


def _key(key: MeasurementKey) -> list:
    return [getattr(key, c) for c in KEY_COLUMNS]


def _decode(row: sqlite3.Row) -> dict:
    record = dict(row)
    record["versions"] = json.loads(record["versions"]) if record["versions"] else None
    record["extra"] = json.loads(record["extra"]) if record["extra"] else {}
    record["owner"] = json.loads(record["owner"]) if record.get("owner") else None
    return record


def _start_time(pid: int) -> str | None:
    """The start time of process `pid` in clock ticks since boot (Linux /proc), or None where unknown: with
    the pid it names one process, even after the pid is reused."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]  # field 22 of stat; the name in (...) may hold spaces


def this_process() -> dict:
    """The claimant identity of the calling process."""
    return {"host": socket.gethostname(), "pid": os.getpid(), "start": _start_time(os.getpid())}


def owner_alive(owner: dict | None, heartbeat: float | None) -> bool:
    """Whether the claimant `owner` may still be training: on this host, its process exists (same pid and
    start time); on another host, its heartbeat is fresh."""
    if not owner:
        return False
    if owner.get("host") == socket.gethostname():
        pid = owner.get("pid")
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            pass  # exists, owned by another user
        start = _start_time(pid)
        return start is None or owner.get("start") is None or start == owner["start"]
    return heartbeat is not None and time.time() - heartbeat < HEARTBEAT_STALE_S


def open_results(run, *, readonly: bool = False) -> ResultsDB:
    """The results database of a run directory (a RunDir or its path), with the run directory's
    leakage.json (fill leakage before schema v3) moved into it (into the in-memory copy only, when
    `readonly`: ResultsDB(readonly=True))."""
    from roarfast.rundir import RunDir

    run = run if isinstance(run, RunDir) else RunDir(run)
    db = ResultsDB(run.results_path, readonly=readonly)
    legacy = run.legacy_fill_leakage_path
    if legacy.is_file():
        rows = json.loads(legacy.read_text())
        dataset = (run.dataset_record() or {}).get("name", "unknown")
        if readonly:  # into the copy in memory; the file and leakage.json stay as they are
            with _transaction(db._conn):
                db._insert_fill_leakage(rows, dataset, legacy.name)
        else:
            db.import_fill_leakage(rows, dataset, legacy.name)
            legacy.unlink(missing_ok=True)  # another process may have moved it in at the same time
    return db


def load(run_dir, *, status: str | None = "done", kind: str | None = None):
    """Every measurement of `run_dir`'s results.sqlite for a notebook: a pandas DataFrame (one row per
    measurement: retraining cells and controls per seed, no-retrain evaluations, fill leakage; `kind`
    tells them apart, extras such as mean_probability and base_rate as columns, versions as a dict column),
    or a list of dicts when pandas is not installed. `status=None` includes running and failed ones;
    `kind` keeps one kind."""
    from roarfast.rundir import RunDir

    run = RunDir(run_dir)
    if not run.results_path.exists():
        raise FileNotFoundError(f"{run.results_path} does not exist: nothing has been measured in {run_dir}")
    filters = {name: value for name, value in (("status", status), ("kind", kind)) if value is not None}
    with open_results(run, readonly=True) as db:
        rows = db.rows(**filters)
    records = [{**{k: v for k, v in row.items() if k not in ("extra", "owner")}, **row["extra"]} for row in rows]
    try:
        import pandas
    except ImportError:
        return records
    return pandas.DataFrame.from_records(records, columns=list(records[0]) if records else [*KEY_COLUMNS, "status"])
