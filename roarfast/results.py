"""Results database: one row per retraining cell in `<run_dir>/results.sqlite` (DESIGN.md section 7).

A cell is (dataset, model, method, mode, fraction, seed, config_hash). Its row goes
running -> done (or failed); a finished cell is written in one transaction, and a rerun skips cells
that are done. SQLite in WAL mode with a busy timeout lets several processes (sweep workers) write
the same file at once.

Claims: before training a cell, a process claims it (`claim`): the row becomes `running` with the
claimant's identity (host, pid, process start time) and a heartbeat it refreshes while it trains. A
cell claimed by a live process is left alone; a claim whose process is gone (same host: no such
process; another host: no heartbeat for HEARTBEAT_STALE_S) is taken over. So `kill -9` loses at most
the cell in flight, and two sweeps on one run directory split the grid.
"""

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

from roarfast.fingerprint import config_hash

#: roar removes the top fraction, kar keeps it; "<mode>-mask" is that cell's mask-only control: a model
#: trained and tested on the removal pattern alone, no pixel values (how much the pattern leaks the class);
#: morf / lerf / road-morf / road-lerf: the no-retrain evaluations of roarfast.evaluate (base model only)
MODES = ("roar", "kar", "roar-mask", "kar-mask", "morf", "lerf", "road-morf", "road-lerf")
STATUSES = ("running", "done", "failed")
FRACTION_DECIMALS = 9  # fractions computed as i/10 and typed as 0.7 must name the same cell
BUSY_TIMEOUT_S = 60.0  # a writer waits this long for another process's transaction before failing
SCHEMA_VERSION = 2  # 2: owner and heartbeat columns (claims)
#: a claimant refreshes its heartbeat this often while it trains a cell
HEARTBEAT_S = 15.0
#: a claim from another host whose heartbeat is older than this is taken over (its process cannot be
#: looked up from here); generous against clock skew and long pauses
HEARTBEAT_STALE_S = 180.0
RETRY_S = 0.02  # poll interval while another process holds the lock the busy handler does not cover

KEY_COLUMNS = ("dataset", "model", "method", "mode", "fraction", "seed", "config_hash")
METRIC_COLUMNS = ("test_acc", "val_acc", "epochs", "seconds")
_ORDER = "dataset, model, method, mode, fraction, seed, config_hash"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS cells (
    dataset TEXT NOT NULL,
    model TEXT NOT NULL,
    method TEXT NOT NULL,
    mode TEXT NOT NULL,
    fraction REAL NOT NULL,
    seed INTEGER NOT NULL,
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
    PRIMARY KEY (dataset, model, method, mode, fraction, seed, config_hash)
)
"""


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _nonempty_str(name: str, value) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError(f"{name} must be a non-empty str, got {value!r}")
    return value


@dataclass(frozen=True)
class Cell:
    """One retraining: `method`'s ranks, `mode` ("roar" removes / "kar" keeps; "-mask": the mask-only
    control of that cell) the top `fraction` of units, training seed `seed`, under the training
    configuration hashed as `config_hash`."""

    dataset: str
    model: str
    method: str
    mode: str
    fraction: float
    seed: int
    config_hash: str

    def __post_init__(self):
        for name in ("dataset", "model", "method", "config_hash"):
            _nonempty_str(name, getattr(self, name))
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {self.mode!r}")
        if isinstance(self.fraction, bool) or not isinstance(self.fraction, (int, float)):
            raise ValueError(f"fraction must be a number in [0, 1], got {self.fraction!r}")
        if not (math.isfinite(self.fraction) and 0.0 <= self.fraction <= 1.0):
            raise ValueError(f"fraction must be in [0, 1], got {self.fraction!r}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise ValueError(f"seed must be a non-negative int, got {self.seed!r}")
        object.__setattr__(self, "fraction", round(float(self.fraction), FRACTION_DECIMALS))

    @property
    def key(self) -> str:
        """A short readable name for logs and task names."""
        return (
            f"{self.dataset}/{self.model}/{self.method}/{self.mode}/"
            f"{self.fraction:g}/seed{self.seed}/{self.config_hash[:12]}"
        )


def cell_key(*, dataset: str, model: str, method: str, mode: str, fraction: float, seed: int, config: dict) -> Cell:
    """The Cell of one retraining, with `config` (recipe, fill, ranks' params, ...) folded into its hash."""
    return Cell(dataset, model, method, mode, fraction, seed, config_hash(config))


def runtime_versions() -> dict:
    """Versions of what produced a result: python, roarfast, torch, numpy."""
    import numpy
    import torch

    from roarfast import __version__

    return {
        "python": platform.python_version(),
        "roarfast": __version__,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "numpy": numpy.__version__,
    }


class ResultsDB:
    """The results of one run directory; open one per process (connections do not cross processes)."""

    def __init__(self, path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # isolation_level=None: transactions are explicit (BEGIN IMMEDIATE takes the write lock up front,
        # so two writers never deadlock upgrading a read lock).
        self._conn = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
        self._conn.row_factory = sqlite3.Row
        self._conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
        mode = self._enable_wal()
        if mode.lower() != "wal":
            raise OSError(
                f"{self.path}: SQLite could not enable WAL mode (got {mode!r}); is it on a network filesystem?"
            )
        # FULL: a finished cell survives a power loss, at one fsync per cell.
        self._conn.execute("PRAGMA synchronous = FULL")
        with self._transaction():
            version = self._conn.execute("PRAGMA user_version").fetchone()[0]
            if version not in (0, 1, SCHEMA_VERSION):
                raise OSError(f"{self.path} has schema version {version}, this roarfast uses {SCHEMA_VERSION}")
            self._conn.execute(_SCHEMA)
            if version == 1:  # a results file from before claims: same rows, two more columns
                self._conn.execute("ALTER TABLE cells ADD COLUMN owner TEXT")
                self._conn.execute("ALTER TABLE cells ADD COLUMN heartbeat REAL")
            self._conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

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

    @contextmanager
    def _transaction(self):
        """BEGIN IMMEDIATE ... COMMIT, rolled back on an exception."""
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise
        self._conn.execute("COMMIT")

    cell_key = staticmethod(cell_key)

    def get(self, cell: Cell) -> dict | None:
        """The cell's row as `rows()` gives it, or None when the cell was never started."""
        where = " AND ".join(f"{c} = ?" for c in KEY_COLUMNS)
        row = self._conn.execute(f"SELECT * FROM cells WHERE {where}", _key(_check_cell(cell))).fetchone()
        return None if row is None else _decode(row)

    def status(self, cell: Cell) -> str | None:
        """"running", "done", "failed", or None when the cell was never started."""
        row = self.get(cell)
        return None if row is None else row["status"]

    def is_done(self, cell: Cell) -> bool:
        return self.status(cell) == "done"

    def mark_running(self, cell: Cell) -> None:
        """Marks a cell started (a rerun after a crash re-marks it); a done cell stays done."""
        self._upsert(_check_cell(cell), {"status": "running", "finished": None, "error": None}, keep_done=True)

    def mark_failed(self, cell: Cell, error: str) -> None:
        """Marks a cell failed with `error` (one line: the exception); a done cell stays done."""
        self._upsert(
            _check_cell(cell), {"status": "failed", "finished": _now(), "error": str(error)}, keep_done=True
        )

    def claim(self, cell: Cell, owner: dict | None = None) -> bool:
        """Claims `cell` for `owner` (default: this process) in one transaction: True when the caller may
        train it now (it was new, failed, already ours, or held by a claimant that is gone); False when it
        is done or a live process holds it."""
        cell = _check_cell(cell)
        owner = owner or this_process()
        where = " AND ".join(f"{c} = ?" for c in KEY_COLUMNS)
        with self._transaction():
            row = self._conn.execute(f"SELECT status, owner, heartbeat FROM cells WHERE {where}", _key(cell)).fetchone()
            if row is not None:
                if row["status"] == "done":
                    return False
                if row["status"] == "running":
                    holder = json.loads(row["owner"]) if row["owner"] else None
                    if holder != owner and owner_alive(holder, row["heartbeat"]):
                        return False
            values = {"status": "running", "owner": json.dumps(owner, sort_keys=True), "heartbeat": time.time(),
                      "finished": None, "error": None}
            self._conn.execute(_upsert_sql(values, keep_done=False), [*_key(cell), *values.values(), _now()])
        return True

    def heartbeat(self, cells, owner: dict | None = None) -> None:
        """Refreshes the heartbeat of `owner`'s running claims among `cells`."""
        owner_json = json.dumps(owner or this_process(), sort_keys=True)
        where = " AND ".join(f"{c} = ?" for c in KEY_COLUMNS)
        with self._transaction():
            for cell in cells:
                self._conn.execute(f"UPDATE cells SET heartbeat = ? WHERE {where} AND status = 'running' AND owner = ?",
                                   [time.time(), *_key(_check_cell(cell)), owner_json])

    def release(self, cell: Cell, owner: dict | None = None) -> None:
        """Gives up `owner`'s running claim on `cell` (an interrupted run): the row goes away, as if never
        started, unless someone else holds or finished it."""
        owner_json = json.dumps(owner or this_process(), sort_keys=True)
        where = " AND ".join(f"{c} = ?" for c in KEY_COLUMNS)
        with self._transaction():
            self._conn.execute(f"DELETE FROM cells WHERE {where} AND status = 'running' AND owner = ?",
                               [*_key(_check_cell(cell)), owner_json])

    def record(self, cell: Cell, metrics: dict) -> None:
        """Writes a finished cell in one transaction, replacing any earlier row of the same cell.

        Args:
            metrics: test_acc, val_acc (floats in [0, 1]; val_acc None for an evaluation without
                training), epochs (int), seconds (float), optionally
                versions (dict; default `runtime_versions()`); any other JSON-able keys go to `extra`.
        """
        cell = _check_cell(cell)
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
        if isinstance(epochs, bool) or not isinstance(epochs, int) or epochs < 0:
            raise ValueError(f"metrics['epochs'] must be a non-negative int, got {epochs!r}")
        seconds = metrics["seconds"]
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not seconds >= 0:
            raise ValueError(f"metrics['seconds'] must be a non-negative number, got {seconds!r}")
        versions = metrics.get("versions")
        versions = runtime_versions() if versions is None else versions
        extra = {k: v for k, v in metrics.items() if k not in METRIC_COLUMNS and k != "versions"}
        values.update(
            status="done",
            epochs=epochs,
            seconds=float(seconds),
            versions=json.dumps(versions, sort_keys=True),
            extra=json.dumps(extra, sort_keys=True) if extra else None,
            error=None,
            finished=_now(),
            owner=None,
            heartbeat=None,
        )
        self._upsert(cell, values, keep_done=False)

    def _upsert(self, cell: Cell, values: dict, keep_done: bool) -> None:
        with self._transaction():
            self._conn.execute(_upsert_sql(values, keep_done), [*_key(cell), *values.values(), _now()])

    def rows(self, **filters) -> list[dict]:
        """Rows as dicts (versions/extra decoded), ordered by cell; filters on cell columns or status,
        each a value or a list/tuple of accepted values: `rows(method=["sg", "random"], status="done")`."""
        clauses, params = [], []
        for name, wanted in filters.items():
            if name not in (*KEY_COLUMNS, "status"):
                raise ValueError(f"cannot filter on {name!r}; filters: {[*KEY_COLUMNS, 'status']}")
            wanted = list(wanted) if isinstance(wanted, (list, tuple, set)) else [wanted]
            if name == "fraction":
                wanted = [round(float(f), FRACTION_DECIMALS) for f in wanted]
            if not wanted:
                return []
            clauses.append(f"{name} IN ({', '.join('?' for _ in wanted)})")
            params.extend(wanted)
        where = f" WHERE {' AND '.join(clauses)}" if clauses else ""
        query = f"SELECT * FROM cells{where} ORDER BY {_ORDER}"
        return [_decode(row) for row in self._conn.execute(query, params)]

    def table(self, **filters) -> str:
        """The rows as an aligned text table (one line per cell), for printing."""
        header = ("dataset", "model", "method", "mode", "fraction", "seed", "status")
        header += ("test_acc", "val_acc", "epochs", "seconds")
        lines = [header]
        for row in self.rows(**filters):
            lines.append(
                (
                    row["dataset"],
                    row["model"],
                    row["method"],
                    row["mode"],
                    f"{row['fraction']:g}",
                    str(row["seed"]),
                    row["status"],
                    "" if row["test_acc"] is None else f"{row['test_acc']:.4f}",
                    "" if row["val_acc"] is None else f"{row['val_acc']:.4f}",
                    "" if row["epochs"] is None else str(row["epochs"]),
                    "" if row["seconds"] is None else f"{row['seconds']:.1f}",
                )
            )
        widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
        return "\n".join("  ".join(v.ljust(w) for v, w in zip(line, widths)).rstrip() for line in lines)

    def close(self) -> None:
        self._conn.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _check_cell(cell) -> Cell:
    if not isinstance(cell, Cell):
        raise ValueError(f"cell must be a roarfast.results.Cell, got {type(cell).__name__}")
    return cell


def _upsert_sql(values: dict, keep_done: bool) -> str:
    """INSERT of a cell's row with `values`, or UPDATE of those columns when it exists (not of a done row
    when keep_done); parameters: the key columns, the values, the creation time."""
    columns = [*KEY_COLUMNS, *values, "created"]
    return (f"INSERT INTO cells ({', '.join(columns)}) VALUES ({', '.join('?' for _ in columns)}) "
            f"ON CONFLICT ({', '.join(KEY_COLUMNS)}) DO UPDATE SET "
            + ", ".join(f"{c} = excluded.{c}" for c in values)
            + (" WHERE cells.status != 'done'" if keep_done else ""))


def _key(cell: Cell) -> list:
    return [getattr(cell, c) for c in KEY_COLUMNS]


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


def load(run_dir, *, status: str | None = "done"):
    """The cells of `run_dir`'s results.sqlite for a notebook: a pandas DataFrame (one row per cell and
    seed; `fill` and any other extras as columns, versions as a dict column), or a list of dicts when
    pandas is not installed. `status=None` includes running and failed cells."""
    path = Path(run_dir) / "results.sqlite"
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist: no cell has run in {run_dir}")
    with ResultsDB(path) as db:
        rows = db.rows(**({} if status is None else {"status": status}))
    records = [{**{k: v for k, v in row.items() if k not in ("extra", "owner")}, **row["extra"]} for row in rows]
    try:
        import pandas
    except ImportError:
        return records
    return pandas.DataFrame.from_records(records, columns=list(records[0]) if records else [*KEY_COLUMNS, "status"])
