"""The operations on one results.sqlite: a measurement's row goes running -> done (or failed); a finished
measurement is written in one transaction, and a rerun skips those that are done. SQLite in WAL mode with a
busy timeout lets several processes (sweep workers) write the same file at once; opening the file (links refused,
its integrity checked, a read-only copy in memory for a reader) is roarfast.measurements.sqlite's.

Claims: before training a cell, a process claims it (`ResultsDB.claim`): the row becomes `running` with
the claimant's identity and a heartbeat it refreshes while it trains (roarfast.records.claims). A cell claimed by
a live process is left alone; a claim whose process is gone (same host: no such process; another host: no
heartbeat for HEARTBEAT_STALE_S) is taken over. So `kill -9` loses at most the cell in flight, and two
sweeps on one run directory split the grid.

Read-only (`readonly=True`: the report, `load`): the file is read through a copy in memory, and an older schema
is migrated in that copy only, so a read-only run directory can be reported on, also while a sweep writes. Every
SQLite failure (a damaged file, a full disk, a read-only directory) is a UserError naming the file.

Integrity: every row carries the digest of its columns (schema.row_digest, written with it in the same
transaction) and every read checks it (rows, get, claim, and a write over an existing row), so a flipped
byte in a metric or a key is refused in one line naming the file and the row, never read as data. A row's
config is a record (roarfast.records.rows), written and read back through the one put and get: what it says
gives the row's config_hash.
"""
import json
import sqlite3
import time
from datetime import datetime, timezone
from pathlib import Path

from roarfast.errors import UserError
from roarfast.measurements.row import (DETECTOR, FILL_LEAKAGE, FRACTION_DECIMALS, KEY_COLUMNS, MeasurementKey,
                                       check_key, key_values, metric_values)
from roarfast.measurements.schema import migrate, row_digest, transaction
from roarfast.measurements.sqlite import BUSY_TIMEOUT_S, check_integrity, connect, damaged, snapshot, sqlite_errors
from roarfast.modes import DETECT
from roarfast.records.access import get, put
from roarfast.records.claims import owner_alive, this_process
from roarfast.records.paths import is_name
from roarfast.records.rows import RowConfig, RowRecord

RETRY_S = 0.02  # poll interval while another process holds the lock the busy handler does not cover

#: the order of rows(): within a kind as schema v2 ordered its cells (the report's sums depend on it)
_ORDER = "kind, dataset, model, method, mode, fraction, seed, config_hash"
#: a key column is matched with IS, so that NULL (no fill, no seed) matches NULL
_WHERE_KEY = " AND ".join(f"{c} IS ?" for c in KEY_COLUMNS)


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


class ResultsDB:
    """The results of one run directory; open one per process (connections do not cross processes).
    `readonly=True` reads an in-memory copy (roarfast.measurements.sqlite.snapshot): nothing is written next to
    the file, and writing methods refuse."""

    @sqlite_errors
    def __init__(self, path, *, readonly: bool = False):
        self.path = Path(path)
        self.readonly = readonly
        if readonly:
            self._conn = snapshot(self.path)
            self._conn.row_factory = sqlite3.Row
            check_integrity(self._conn, self.path)
            migrate(self._conn, self.path, readonly=True)  # the copy only: the file keeps its version
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # isolation_level=None: transactions are explicit (BEGIN IMMEDIATE takes the write lock up front,
        # so two writers never deadlock upgrading a read lock).
        self._conn = connect(self.path, "", readonly=False, timeout=BUSY_TIMEOUT_S, isolation_level=None)
        self._conn.row_factory = sqlite3.Row
        self._conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
        mode = self._enable_wal()
        if mode.lower() != "wal":
            raise UserError(f"{self.path}: SQLite could not enable WAL mode (got {mode!r}); is it on a network "
                            f"filesystem? Choose a --run-dir on a local disk")
        # FULL: a finished measurement survives a power loss, at one fsync per row.
        self._conn.execute("PRAGMA synchronous = FULL")
        check_integrity(self._conn, self.path)
        migrate(self._conn, self.path)

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
        return transaction(self._conn)

    @sqlite_errors
    def get(self, key: MeasurementKey) -> dict | None:
        """The measurement's row as `rows()` gives it, or None when it was never started."""
        row = self._row(check_key(key))
        return None if row is None else self._decode(row)

    def _row(self, key: MeasurementKey) -> dict | None:
        """The verified row of `key` (with its rowid) as a dict, or None."""
        row = self._conn.execute(f"SELECT rowid, * FROM measurements WHERE {_WHERE_KEY}", key_values(key)).fetchone()
        return None if row is None else self._verified(dict(row))

    def _verified(self, row: dict) -> dict:
        """`row`, refused in one line naming the file and the row when it does not match its digest, or when its
        method or fill is not one name (a row re-sealed by hand: its method and fill name figures and ranks)."""
        where = " ".join(f"{c}={str(row[c])[:60]}" for c in ("kind", "method", "mode", "fill", "fraction", "seed"))
        if row["row_sha256"] != row_digest(row):
            raise damaged(self.path, f"the row ({where}) does not match the sha256 written with it (the file "
                                      f"changed on disk)")
        if not is_name(row["method"]) or not (row["fill"] is None or is_name(row["fill"])):
            raise damaged(self.path, f"the row ({where}) names a method or fill that is not one name (edited)")
        return row

    def status(self, key: MeasurementKey) -> str | None:
        """"running", "done", "failed", or None when the measurement was never started."""
        row = self.get(key)
        return None if row is None else row["status"]

    def is_done(self, key: MeasurementKey) -> bool:
        return self.status(key) == "done"

    def mark_running(self, key: MeasurementKey) -> None:
        """Marks a measurement started (a rerun after a crash re-marks it); a done one stays done."""
        self._upsert(check_key(key), {"status": "running", "finished": None, "error": None}, keep_done=True)

    def mark_failed(self, key: MeasurementKey, error: str) -> None:
        """Marks a measurement failed with `error` (one line: the exception); a done one stays done."""
        self._upsert(check_key(key), {"status": "failed", "finished": _now(), "error": str(error)}, keep_done=True)

    @sqlite_errors
    def claim(self, key: MeasurementKey, owner: dict | None = None) -> bool:
        """Claims `key` for `owner` (default: this process) in one transaction: True when the caller may
        train it now (it was new, failed, already ours, or held by a claimant that is gone); False when it
        is done or a live process holds it."""
        key = check_key(key)
        owner = owner or this_process()
        with self._transaction():
            row = self._row(key)
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

    @sqlite_errors
    def heartbeat(self, keys, owner: dict | None = None) -> None:
        """Refreshes the heartbeat of `owner`'s running claims among `keys`."""
        owner_json = json.dumps(owner or this_process(), sort_keys=True)
        with self._transaction():
            for key in keys:
                self._conn.execute(f"UPDATE measurements SET heartbeat = ? WHERE {_WHERE_KEY} AND status = 'running' "
                                   f"AND owner = ?", [time.time(), *key_values(check_key(key)), owner_json])

    @sqlite_errors
    def release(self, key: MeasurementKey, owner: dict | None = None) -> None:
        """Gives up `owner`'s running claim on `key` (an interrupted run): the row goes away, as if never
        started, unless someone else holds or finished it."""
        owner_json = json.dumps(owner or this_process(), sort_keys=True)
        with self._transaction():
            self._conn.execute(f"DELETE FROM measurements WHERE {_WHERE_KEY} AND status = 'running' AND owner = ?",
                               [*key_values(check_key(key)), owner_json])

    @sqlite_errors
    def record(self, key: MeasurementKey, metrics: dict) -> None:
        """Writes a finished measurement in one transaction, replacing any earlier row of the same key.

        Args:
            metrics: test_acc (float in [0, 1]), val_acc (the same, or None without a validation split),
                epochs (int, or None when nothing was trained by epochs), seconds (float), optionally
                versions (dict; default `runtime_versions()`) and threads (the CPU threads it ran with,
                torch.get_num_threads(); None: not known); any other JSON-able keys go to `extra`.
        """
        key = check_key(key)
        values = metric_values(metrics)
        values.update(status="done", versions=json.dumps(values["versions"], sort_keys=True),
                      extra=json.dumps(values["extra"], sort_keys=True) if values["extra"] else None, error=None,
                      finished=_now(), owner=None, heartbeat=None)
        self._upsert(key, values, keep_done=False)

    @sqlite_errors
    def import_fill_leakage(self, rows: list, dataset: str, source: str) -> None:
        """Moves the rows of a fill-leakage file written before schema v3 (method, fill, fraction, accuracy,
        base_rate; `source` names it) in as done fill-leakage measurements: their seed and seconds were
        never recorded (NULL); into the in-memory copy alone when opened read-only (the file stays as it is)."""
        with transaction(self._conn) if self.readonly else self._transaction():
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

    @sqlite_errors
    def _upsert(self, key: MeasurementKey, values: dict, keep_done: bool) -> None:
        with self._transaction():
            self._write(key, values, keep_done)

    def _write(self, key: MeasurementKey, values: dict, keep_done: bool) -> None:
        """Inside a transaction: inserts the row of `key` with `values`, or updates those columns of its row
        (verified first; not a done row when keep_done), then writes the row's digest."""
        existing = self._row(key)
        values = dict(values)
        if key.record is not None:  # a key made by MeasurementKey.of: what made it is written beside its hash
            put(key.record, at=values)
        if existing is None:
            columns = [*KEY_COLUMNS, *values, "created"]
            rowid = self._conn.execute(f"INSERT INTO measurements ({', '.join(columns)}) "
                                       f"VALUES ({', '.join('?' for _ in columns)})",
                                       [*key_values(key), *values.values(), _now()]).lastrowid
        elif keep_done and existing["status"] == "done":
            return
        else:
            rowid = existing["rowid"]
            self._conn.execute(f"UPDATE measurements SET {', '.join(f'{c} = ?' for c in values)} WHERE rowid = ?",
                               [*values.values(), rowid])
        # the digest of the row as SQLite stores it, so every reader computes it from the same values
        row = self._conn.execute("SELECT * FROM measurements WHERE rowid = ?", (rowid,)).fetchone()
        self._conn.execute("UPDATE measurements SET row_sha256 = ? WHERE rowid = ?", (row_digest(dict(row)), rowid))

    @sqlite_errors
    def rekey(self, pairs: list) -> None:
        """Gives each row of an old key its new key (same columns but config_hash, its config written beside it),
        in one transaction: a migration that records in a row's config what made it (its base model, its
        ranks' id) where that is proven. A row whose new key another row holds is left as it is."""
        with self._transaction():
            for old, new in pairs:
                row = self._row(check_key(old))
                if row is None or self._row(check_key(new)) is not None:
                    continue
                columns = {"config_hash": new.config_hash}
                put(new.record, at=columns)
                self._conn.execute("UPDATE measurements SET config_hash = ?, config = ? WHERE rowid = ?",
                                   (columns["config_hash"], columns["config"], row["rowid"]))
                fresh = self._conn.execute("SELECT * FROM measurements WHERE rowid = ?", (row["rowid"],)).fetchone()
                self._conn.execute("UPDATE measurements SET row_sha256 = ? WHERE rowid = ?",
                                   (row_digest(dict(fresh)), row["rowid"]))

    @sqlite_errors
    def delete(self, keys: list) -> int:
        """Removes the rows of `keys` (each verified first) in one transaction; returns how many there were."""
        removed = 0
        with self._transaction():
            for key in keys:
                row = self._row(check_key(key))
                if row is not None:
                    self._conn.execute("DELETE FROM measurements WHERE rowid = ?", (row["rowid"],))
                    removed += 1
        return removed

    @sqlite_errors
    def rows(self, damaged_rows: list | None = None, **filters) -> list[dict]:
        """Rows as dicts (versions, extra and config decoded; config None where a row predates schema v5),
        ordered by key; filters on key columns or status, each a
        value or a list/tuple of accepted values (None matches NULL):
        `rows(kind="retrain", method=["sg", "random"], status="done")`. A damaged row is refused in one line; with
        `damaged_rows` (a list), that line is appended there instead and the other rows are read (`roarfast ls`)."""
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
        found = []
        for row in self._conn.execute(f"SELECT * FROM measurements{where} ORDER BY {_ORDER}", params):
            try:
                found.append(self._decode(self._verified(dict(row))))
            except UserError as err:
                if damaged_rows is None:
                    raise
                damaged_rows.append(str(err))
        return found

    def _decode(self, row: dict) -> dict:
        """A verified row: JSON columns decoded (its config through the one get: what it says gives the row's
        config_hash), its digest and rowid left out."""
        record = {key: value for key, value in row.items() if key not in ("row_sha256", "rowid")}
        record["versions"] = json.loads(record["versions"]) if record["versions"] else None
        record["extra"] = json.loads(record["extra"]) if record["extra"] else {}
        record["owner"] = json.loads(record["owner"]) if record.get("owner") else None
        try:
            record["config"] = get(RowConfig, at=row, record_id=row["config_hash"], repair=RowRecord.repair)
        except UserError as err:
            raise UserError(f"{self.path}: {err}") from None
        return record

    def close(self) -> None:
        self._conn.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
