"""The record kind of a configuration of cells: `configurations/<id>.json` (sealed), what a request asked of its
cells (roarfast.rundir.configurations). Its id is the digest of the settings the cells share and of the rank id
of each of its methods; read back only when its file's name, the id it says it has and that digest are one, and
every id it holds is of an id's form and every method one name (a path is made from each)."""

from dataclasses import dataclass

from roarfast.common.atomic import refuse_link
from roarfast.common.fingerprint import read_record
from roarfast.errors import UserError
from roarfast.records.head import FORMAT
from roarfast.records.ids import check_id, digest_id
from roarfast.records.kind import Record
from roarfast.records.paths import check_record_name

#: the lists a configuration's grid holds (roarfast.rundir.configurations.grid_of), besides its fill
_GRID_LISTS = ("methods", "modes", "fractions", "seeds", "control_seeds")
#: the repair of a damaged configuration record
CONFIGURATION_REPAIR = "restore it, or remove it: its cells stay in results.sqlite and the next request records it again"


@dataclass(frozen=True)
class ConfigurationRecord(Record):
    """The configuration of the cells sharing `settings` whose methods use the ranks `ranks` ({method: rank id})."""

    settings: dict
    ranks: dict

    kind = "configuration"
    what = "configuration"
    format = FORMAT
    repair = CONFIGURATION_REPAIR
    #: the folder of the configuration records, each `<id>.json`
    folder = "configurations"

    @property
    def id(self) -> str:
        return digest_id({"settings": self.settings, "ranks": self.ranks})

    def to_record(self) -> dict:
        """What a configuration's record says of what made it (its grids, names and times besides)."""
        return {"id": self.id, "settings": self.settings, "ranks": dict(sorted(self.ranks.items()))}

    @classmethod
    def from_record(cls, record: dict) -> "ConfigurationRecord":
        return cls(record["settings"], record["ranks"])

    @staticmethod
    def unrecorded_id(settings: dict | None) -> str:
        """The id the report gives the cells of `settings` that no record claims (made before run-directory format
        2): the digest of their settings ("unrecorded" for rows without settings, before results schema v5)."""
        return "unrecorded" if settings is None else digest_id(settings)

    @classmethod
    def place(cls, record_id=None, where=None) -> tuple:
        return cls.folder, f"{check_id(record_id, cls.what, where)}.json"

    @classmethod
    def names_it(cls, path, stored: dict, record_id: str) -> bool:
        # its file's name, and the id it says it has
        return super().names_it(path, stored, record_id) and stored["id"] == record_id

    @classmethod
    def read(cls, path, repair: str, run_dir) -> dict | None:
        """The record at `path`, sealed, of a configuration record's form, every id it holds of an id's form."""
        if path.is_symlink():
            raise UserError(f"{path} is a symbolic link; a configuration record is a file of its own: remove it")
        refuse_link(path.parent)  # a link there would make its records another directory's
        record = read_record(path, repair)
        if record is None:
            return None
        if not (isinstance(record, dict) and isinstance(record.get("settings"), dict)
                and isinstance(record.get("ranks"), dict) and isinstance(record.get("grids"), list)):
            raise UserError(f"{path} is not a configuration record; {repair}")
        record.pop("format", None)
        # every id it holds is of an id's form, every method one name, before anything is made of it (a path, a
        # prune, a listing)
        check_id(record.get("id"), "configuration", path)
        for method, rid in record["ranks"].items():
            check_record_name(method, "method", path, repair)
            check_id(rid, f"ranks of {method}", path)
        for grid in record["grids"]:
            if not (isinstance(grid, dict) and all(isinstance(grid.get(key), list) for key in _GRID_LISTS)):
                raise UserError(f"{path}: a grid of it is not {{{', '.join(_GRID_LISTS)}: lists, fill}}; {repair}")
            for method in grid["methods"]:
                check_record_name(method, "method", path, repair)
        base = (record["settings"].get("config") or {}).get("base")
        if base is not None:
            check_id(base, "base model", path)
        return record
