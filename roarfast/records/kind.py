"""What a record kind is. A record type holds the fields that define its artifact (or, for a record a run directory
keeps one of, what it says) and nothing else, and owns the rest of what is known of its kind:

- its id (`.id`: roarfast.records.ids.digest_id of those fields for an artifact; None for a record a run directory
  keeps one of, such as HEAD), the part of the stored record that says those fields (`.to_record()`) and their
  reading back from a stored record (`from_record`), so what is written and what is read back are one definition;
- its place (`place`: the names below the run directory, from its id; roarfast.records.paths builds the path);
- its write (`write`) and its read (`read`): by default a JSON file sealed with its digest (common.atomic,
  common.fingerprint), its `format` field added and left out again; a kind stored otherwise (a checkpoint's
  meta.json beside its weights, a rank store's manifest, a results row's config) writes and reads its own;
- whether its place names it (`names_it`: a file named by the id, by default) and the one line that says it
  does not (`mismatch`).

Defining a subclass with a `kind` registers it (`KINDS`): a new artifact kind is its record type and its test. It
is written and read back, verified, by roarfast.records.access (the one put and the one get).
"""

from typing import ClassVar

from roarfast.common.atomic import write_record
from roarfast.common.fingerprint import read_record
from roarfast.records.ids import is_id

#: every record kind by its name
KINDS = {}


class Record:
    """A kind of record (see the module's docstring). A subclass sets `kind` and `what`, and implements
    `to_record`, `from_record` and `place`; `id` where a run directory keeps many."""

    #: its name (RunDir.records.get("configuration", ...))
    kind: ClassVar[str] = ""
    #: what a message calls one
    what: ClassVar[str] = ""
    #: the `format` field its file carries (None: none), left out of what a read returns
    format: ClassVar[int | None] = None
    #: the repair a message of a damaged one names where its reader names none; {run_dir}: its run directory
    repair: ClassVar[str] = "restore it, or remove it"

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "kind" in cls.__dict__:
            if cls.kind in KINDS:
                raise ValueError(f"a record kind {cls.kind!r} is already registered ({KINDS[cls.kind].__name__})")
            KINDS[cls.kind] = cls

    @property
    def id(self) -> str | None:
        """Its id; None for a record a run directory keeps one of."""
        return None

    def place_keys(self) -> dict:
        """What `place` takes besides the id, from the record itself (a rank store's method)."""
        return {}

    def to_record(self) -> dict:
        raise NotImplementedError(f"{type(self).__name__} should implement to_record")

    @classmethod
    def from_record(cls, stored: dict) -> "Record":
        raise NotImplementedError(f"{cls.__name__} should implement from_record")

    @classmethod
    def parse(cls, stored) -> "Record | None":
        """`from_record(stored)`, or None where `stored` lacks the fields that make one (damaged)."""
        try:
            return cls.from_record(stored)
        except (KeyError, TypeError, AttributeError, ValueError):
            return None

    @classmethod
    def place(cls, record_id=None, where=None, **keys) -> tuple:
        """The names of its place below the run directory `where` (which a refusal of `record_id` names)."""
        raise NotImplementedError(f"{cls.__name__} should implement place")

    @classmethod
    def names_it(cls, path, stored: dict, record_id: str) -> bool:
        """Whether the place `path` (and what `stored` says of itself) give the id `record_id`: its file's name,
        where that is of an id's form."""
        return not is_id(path.stem) or path.stem == record_id

    @staticmethod
    def older(stored: dict) -> bool:
        """Whether `stored`, which carries no digest, was written before records carried one (read unverified)."""
        return False

    @classmethod
    def write(cls, path, stored: dict, **payload) -> None:
        """Writes `stored` at `path`, sealed, atomically (its folder made)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        write_record(path, stored if cls.format is None else {**stored, "format": cls.format})

    @classmethod
    def read(cls, path, repair: str, run_dir) -> dict | None:
        """The sealed record at `path` (its digest checked, its format left out), or None when there is none; a
        UserError naming it and `repair` when it is damaged."""
        stored = read_record(path, repair, older=cls.older)
        if stored is not None and cls.format is not None:
            stored.pop("format", None)
        return stored

    @classmethod
    def mismatch(cls, path, record_id, gives, repair: str) -> str:
        """The one line of a stored record that is not the one its place gives (`gives`: the id it gives, "none"
        where it gives none)."""
        if record_id is None:
            return f"{path} is not a {cls.what} record; {repair}"
        return f"{path} does not describe the {cls.what} its name gives; {repair}"


def kind_of(kind) -> type:
    """The record type `kind` names (a record type, or its name)."""
    if isinstance(kind, type) and issubclass(kind, Record):
        return kind
    if kind not in KINDS:
        raise ValueError(f"no record kind {kind!r}: one of {', '.join(sorted(KINDS))}")
    return KINDS[kind]
