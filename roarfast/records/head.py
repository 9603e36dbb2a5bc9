"""HEAD.json: the record of a run directory's latest request, which the commands after it take as theirs (the
dataset, the base model, each method's ranks, the configuration the report answers for). It names artifacts by
their ids (roarfast.records.ids); it never holds one, so replacing it loses nothing. Sealed with its digest; a
record kind a run directory keeps one of (`Head`), written and read back through the one put and get."""

from contextvars import ContextVar
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timezone

from roarfast.common.atomic import refuse_link
from roarfast.errors import UserError
from roarfast.records.ids import check_id
from roarfast.records.kind import Record
from roarfast.records.paths import check_record_name

#: the format of HEAD.json, of the configuration records and of the run directory they belong to (1: the run
#: directory of checkpoints/base, attributions/<method>/<split> and dataset.json, before artifacts had ids)
FORMAT = 2
#: the repair of a damaged HEAD.json
REPAIR = ("restore it, or remove it and name the dataset again (--dataset, --data-dir, --data-option; `roarfast "
          "train` records the latest request anew; every artifact stays where it is)")
#: what the latest request was, as its record says it ("roarfast sweep --method ig", "Study.run()")
_COMMAND = ContextVar("roarfast_command", default=None)


@dataclass(frozen=True)
class Head(Record):
    """The latest request: `dataset` (its record: RunDir.remember_dataset), `base` (the base model's id),
    `ranks` ({method: rank id}: the latest extraction of each method for that base model), `configuration` (the
    id of the configuration of its cells, None when it trained none), `command` and `time` (ISO, UTC)."""

    dataset: dict | None = None
    base: str | None = None
    ranks: dict = field(default_factory=dict)
    configuration: str | None = None
    command: str | None = None
    time: str | None = None

    kind = "head"
    what = "HEAD"
    format = FORMAT
    repair = REPAIR

    def to_dict(self) -> dict:
        return asdict(self)

    def to_record(self) -> dict:
        return self.to_dict()

    @classmethod
    def from_record(cls, stored: dict) -> "Head":
        return cls(**{k: stored.get(k) for k in cls.__dataclass_fields__ if k in stored})

    @classmethod
    def place(cls, record_id=None, where=None) -> tuple:
        return ("HEAD.json",)

    @classmethod
    def read(cls, path, repair: str, run_dir) -> dict | None:
        """The sealed record at `path`, every id it names of an id's form and every method one name; a link there is
        refused at once (every command reads it and most write it)."""
        if path.is_symlink():
            refuse_link(path)
        stored = super().read(path, repair, run_dir)
        if stored is None:
            return None
        head = cls.from_record(stored)
        # a path is made from each id HEAD names: one edited to "../x" must never reach one
        for what, value in (("base model", head.base), ("configuration", head.configuration)):
            if value is not None:
                check_id(value, what, path)
        data = head.dataset
        if data is not None and not (isinstance(data, dict) and isinstance(data.get("name"), str)
                                     and isinstance(data.get("options"), dict) and isinstance(data.get("fingerprint"), str)
                                     and isinstance(data.get("data_dir"), (str, type(None)))):
            raise UserError(f"{path}: its dataset is not a dataset's record (name, data_dir, options, fingerprint); "
                            f"{repair}")
        if not isinstance(head.ranks, dict):
            raise UserError(f"{path}: its ranks are not {{method: id}}; {repair}")
        for method, rid in head.ranks.items():
            check_record_name(method, "method", path, repair)
            check_id(rid, f"ranks of {method}", path)
        return stored


def now() -> str:
    """The time now, UTC, to the microsecond: configurations are ordered by it, and two made within one second
    (quick cells) must still come in the order they were requested."""
    return datetime.now(timezone.utc).isoformat(timespec="microseconds")


def set_command(text: str) -> None:
    """Says what the user ran ("roarfast sweep --method ig"): recorded in HEAD and in the configurations."""
    _COMMAND.set(text)


def command(fallback: str) -> str:
    """What the user ran, as set_command said, else `fallback` (the Python call that asked)."""
    return _COMMAND.get() or fallback


def updated(head: Head, asked: str, **changes) -> Head:
    """`head` with `changes`, stamped now with the command that asked (`asked`, where the user's is unknown)."""
    return replace(head, **changes, time=now(), command=command(asked))
