"""The record kind of a prune's intent: `claims/prune.json`, what a prune removes (roarfast.rundir.pruning), written
before it removes anything and removed once it is done, so that a kill leaves it for the next command to finish;
sealed with its digest. Every id it names is of an id's form and every file name one name of configurations/, so
nothing it names reaches outside the run directory. A run directory keeps one at most."""

import os
from dataclasses import asdict, dataclass
from pathlib import Path

from roarfast.errors import UserError
from roarfast.records.claims import CLAIMS
from roarfast.records.head import FORMAT
from roarfast.records.ids import check_id
from roarfast.records.kind import Record


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
    repair = ("restore it, or remove it (what it named may then be half removed: `roarfast ls` lists what is left, "
              "and `roarfast prune` removes it)")

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
        """A UserError naming `where` when `stored` is not of an intent's form: every id an id, every damaged record
        a file name in configurations/."""
        try:
            for cid in stored["configurations"]:
                check_id(cid, "configuration", where)
            for name in stored["damaged"]:
                if not isinstance(name, str) or Path(name).name != name or not name.endswith(".json"):
                    raise UserError(f"{where}: {str(name)[:40]!r} is not a configuration record's file name; "
                                    f"{cls.repair}")
            for method, rid in stored["ranks"]:
                check_id(rid, f"ranks of {method}", where)
            for mid in stored["models"]:
                check_id(mid, "base model", where)
            cls.from_record(stored)
        except (KeyError, TypeError, ValueError) as err:
            raise UserError(f"{where} is not the intent of a prune ({err}); {cls.repair}") from None

    @classmethod
    def read(cls, path, repair: str, run_dir) -> dict | None:
        if not os.path.lexists(path):
            return None
        if path.is_symlink():
            raise UserError(f"{path} is a symbolic link, not the intent of a prune: remove it")
        stored = super().read(path, repair, run_dir)
        cls.check(stored, path)
        return stored
