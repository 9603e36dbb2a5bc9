"""The one `put` and the one verifying `get` of a run directory's records (RunDir.records): each kind's stored
record (roarfast.records.kinds: a base model's meta.json, a rank store's manifest, a configuration's record)
written atomically, and read back only when it is the one its name gives: the id of an id's form, its file's
(or folder's) name, and the digest of what the record says; a UserError in one line naming the file otherwise.
"""

from pathlib import Path

from roarfast.common.atomic import refuse_link, write_record
from roarfast.common.fingerprint import read_record
from roarfast.errors import UserError
from roarfast.records.checkpoint import META, read_meta, save_checkpoint
from roarfast.records.head import FORMAT
from roarfast.records.ids import check_id, is_id
from roarfast.records.kinds import KINDS, ConfigurationRecord, ModelRecord, RankStoreRecord
from roarfast.records.ranks import MANIFEST, read_manifest

#: the repair of a damaged configuration record
CONFIGURATION_REPAIR = "restore it, or remove it: its cells stay in results.sqlite and the next request records it again"


class Records:
    """The stored records of RunDir `run`: the one `put`, the one verifying `get`."""

    def __init__(self, run):
        self.run = run

    def path(self, kind: str, record_id: str, method: str | None = None, split: str = "train") -> Path:
        """Where the record of `kind` with id `record_id` is stored (a rank store's: `method`'s, of `split`)."""
        if kind == ModelRecord.kind:
            return self.run.model_path(record_id) / META
        if kind == RankStoreRecord.kind:
            return self.run.rank_path(method, record_id) / split / MANIFEST
        if kind == ConfigurationRecord.kind:
            return self.run.configuration_path(record_id)
        raise ValueError(f"no record kind {kind!r}: one of {', '.join(KINDS)}")

    def put(self, record, stored: dict, model=None) -> str:
        """Writes `stored`, the record of the artifact `record` (a record type of KINDS) says, in its place,
        atomically (a base model's with its weights, `model`); returns the id. `stored` must say what `record`
        holds: what is written is what a `get` reads back."""
        kind = type(record)
        if kind.from_record(stored) != record or stored.get("id", record.id) != record.id:
            raise ValueError(f"the {kind.what} record to write does not say what made {record.id}")
        if kind is ModelRecord:
            save_checkpoint(self.run.model_dir(record.id), model, stored)
        elif kind is ConfigurationRecord:
            self.run.configurations_root.mkdir(parents=True, exist_ok=True)
            write_record(self.run.configuration_path(record.id), {**stored, "format": FORMAT})
        else:  # a rank store's manifest is written chunk by chunk by the store's one writer (roarfast.store)
            raise ValueError(f"{kind.what} are written by their store's writer")
        return record.id

    def get(self, kind: str, record_id: str, method: str | None = None, split: str = "train",
            path: Path | None = None, repair: str | None = None) -> dict | None:
        """The stored record of `kind` with id `record_id` (a rank store's: `method`'s manifest of `split`; `path`:
        where it was found, else its place), verified: the id of an id's form, its file's name (its folder's for a
        base model or a rank store), and the digest of what the record says; None when there is none. A UserError
        naming the file, and `repair`, when the record is damaged or not the one its name gives."""
        record_type = KINDS[kind]
        if path is None:  # made only from an id of an id's form (roarfast.records.ids.check_id: never "../x")
            path = self.path(kind, record_id, method, split)
        named = path.stem if kind == ConfigurationRecord.kind else (
            path.parent.parent if kind == RankStoreRecord.kind else path.parent).name
        stored = self._read(kind, path, repair)
        if stored is None:
            return None
        try:
            found = record_type.from_record(stored)
        except (KeyError, TypeError, AttributeError):  # a record without the fields that make its id
            found = None
        # its name, where it is one of the id's form (format 1's checkpoints/base is not), the id it says it has
        # (a configuration's), and the digest of what made it: all the one id asked for
        said = {named} if is_id(named) else set()
        said |= {stored["id"]} if kind == ConfigurationRecord.kind else set()
        if found is None or found.id != record_id or said - {record_id}:
            raise UserError(self._mismatch(kind, path, record_id, found, repair))
        return stored

    def _read(self, kind: str, path: Path, repair: str | None) -> dict | None:
        """The sealed record at `path` as its kind reads it (its digest checked), or None when there is none."""
        if kind == ModelRecord.kind:
            return read_meta(path.parent, repair or self.run.train_again) or None
        if kind == RankStoreRecord.kind:
            return read_manifest(path.parent, self.run.root)
        if path.is_symlink():
            raise UserError(f"{path} is a symbolic link; a configuration record is a file of its own: remove it")
        refuse_link(path.parent)  # a link there would make its records another directory's
        record = read_record(path, repair or CONFIGURATION_REPAIR)
        if record is None:
            return None
        if not (isinstance(record, dict) and isinstance(record.get("settings"), dict)
                and isinstance(record.get("ranks"), dict) and isinstance(record.get("grids"), list)):
            raise UserError(f"{path} is not a configuration record; {repair or CONFIGURATION_REPAIR}")
        record.pop("format", None)
        # every id it holds is of an id's form before anything is made of it (a path, a prune)
        check_id(record.get("id"), "configuration", path)
        for method, rid in record["ranks"].items():
            check_id(rid, f"ranks of {method}", path)
        base = (record["settings"].get("config") or {}).get("base")
        if base is not None:
            check_id(base, "base model", path)
        return record

    def _mismatch(self, kind: str, path: Path, record_id: str, found, repair: str | None) -> str:
        """The one line of a record that is not the one its name gives."""
        gives = found.id if found is not None else "none"
        if kind == ModelRecord.kind:
            return (f"{path} does not describe the base model {record_id} (its record gives the id {gives}): the "
                    f"directory was renamed or the record edited; {repair or self.run.train_again}")
        if kind == RankStoreRecord.kind:
            return (f"{path.parent} does not hold the ranks {record_id} its place names (its manifest gives {gives}): "
                    f"moved or edited; {repair or 'extract them again (roarfast extract --force)'}")
        return f"{path} does not describe the configuration its name gives; {repair or CONFIGURATION_REPAIR}"
