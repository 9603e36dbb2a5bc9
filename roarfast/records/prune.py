"""The record kind of a prune's intent: `claims/prune.json`, what a prune removes (roarfast.rundir.pruning), written
before it removes anything and removed once it is done, so that a kill leaves it for the next command to finish;
sealed with its digest. Every id it names is of an id's form, every method and file name one name (checked as
strictly as a configuration record), so nothing it names reaches outside the run directory. A run directory keeps
one at most."""

import os
from dataclasses import asdict, dataclass

from roarfast.errors import UserError
from roarfast.records.claims import CLAIMS
from roarfast.records.head import FORMAT
from roarfast.records.ids import is_id
from roarfast.records.kind import Record
from roarfast.records.paths import is_name


@dataclass(frozen=True)
class PruneIntent(Record):
    """The ids of the `configurations` whose records go, the file names of `damaged` records, the rank stores
    `ranks` ([method, id]) and base `models` (ids) that go, the keys of the results `rows` that go, and whether
    HEAD's configuration is among them (`head`)."""

    configurations: list
    damaged: list
    ranks: list
    models: list
    rows: list
    head: bool

    kind = "prune intent"
    what = "prune intent"
    format = FORMAT
    # what a damaged one's line ends with: a command that meets one removes it (roarfast.rundir.pruning.finish)
    repair = "it is not as a prune wrote it"

    def to_record(self) -> dict:
        return asdict(self)

    @classmethod
    def from_record(cls, stored: dict) -> "PruneIntent":
        return cls(**{name: stored[name] for name in cls.__dataclass_fields__})

    @classmethod
    def place(cls, record_id=None, where=None) -> tuple:
        return CLAIMS, "prune.json"

    @classmethod
    def check(cls, stored: dict, where) -> None:
        """A UserError naming `where` when `stored` is not of an intent's form, as strictly as a configuration record
        is read: every id an id, every method and damaged record's file name one name (a damaged record's a .json),
        the rows a list of dicts, `head` true or false; so that nothing it names can reach outside the run
        directory. Its line says what is wrong, and no repair: the command that meets it says what it does."""
        def refuse(what: str, value, form: str):
            raise UserError(f"{where} is not a prune's intent: its {what} {str(value)[:60]!r} is not {form}")

        fields = [stored.get(name) for name in ("configurations", "damaged", "ranks", "models", "rows")]
        if not all(isinstance(value, list) for value in fields) or not isinstance(stored.get("head"), bool):
            refuse("form", sorted(stored), "configurations, damaged, ranks, models, rows (lists) and head")
        for cid in stored["configurations"]:
            if not is_id(cid):
                refuse("configuration", cid, "an id")
        for name in stored["damaged"]:
            if not (is_name(name) and name.endswith(".json")):
                refuse("damaged record", name, "one file name (.json)")
        for entry in stored["ranks"]:
            if not (isinstance(entry, list) and len(entry) == 2):
                refuse("rank store", entry, "[method, rank id]")
            if not is_name(entry[0]):
                refuse("method", entry[0], "one name (no separator nor control character, not '.' or '..')")
            if not is_id(entry[1]):
                refuse(f"rank store of {entry[0]}", entry[1], "an id")
        for mid in stored["models"]:
            if not is_id(mid):
                refuse("base model", mid, "an id")
        for row in stored["rows"]:
            if not isinstance(row, dict):
                refuse("row", row, "a results row's key")

    @classmethod
    def read(cls, path, repair: str, run_dir) -> dict | None:
        if not os.path.lexists(path):
            return None
        if path.is_symlink():
            raise UserError(f"{path} is a symbolic link, not a prune's intent")
        stored = super().read(path, repair, run_dir)
        cls.check(stored, path)
        return stored
