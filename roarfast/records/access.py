"""The one `put` and the one verifying `get` of records (roarfast.records.kind), and `Records`, those of one run
directory (RunDir.records), whose places are built by the one path builder (roarfast.records.paths).

`put` writes what a record's stored form says, through its kind, only when it says what made the record: what is
written is what a `get` reads back. `get` reads it back through its kind, only when it is the one its place
gives: the id asked for is the id of what it says, and its place's name (its file's, or its folder's) names that
id; a UserError in one line naming the file otherwise. The run directory's records go through them, and so do
those written elsewhere: a rank store's manifest (roarfast.store's writer and reader) and a results row's config
(roarfast.measurements.db).
"""

from pathlib import Path

from roarfast.errors import UserError
from roarfast.records.kind import kind_of
from roarfast.records.paths import contained, place


def put(record, stored: dict | None = None, *, at, **payload):
    """Writes `stored` (default: `record.to_record()`), what the record `record` says, at its place `at`, through
    its kind (with `payload`: a base model's weights); returns its id. A ValueError when `stored` does not say
    what made `record`, or `at` names another id."""
    kind = type(record)
    stored = record.to_record() if stored is None else stored
    if kind.parse(stored) != record or stored.get("id", record.id) != record.id:
        raise ValueError(f"the {kind.what} record to write does not say what made {record.id}")
    if record.id is not None and not kind.names_it(at, stored, record.id):
        raise ValueError(f"{at} is not the place of the {kind.what} {record.id}")
    kind.write(at, stored, **payload)
    return record.id


def get(kind, *, at, record_id=None, repair: str, run_dir=None) -> dict | None:
    """The stored record of `kind` at its place `at` (None when there is none), verified: its digest and its form
    (it says what makes one), and for the record of an id (`record_id`), that what it says and its place's name
    both give that id. Without `record_id`, a record of an id is taken as it says it is (a listing, which learns
    the id from it). A UserError naming the place and `repair` when it is damaged or not the one asked for.
    `run_dir`: the run directory named by the repair of a kind that words its own (None: none)."""
    kind = kind_of(kind)
    stored = kind.read(at, repair, run_dir)
    if stored is None:
        return None
    found = kind.parse(stored)
    if found is None or record_id is not None and (found.id != record_id or not kind.names_it(at, stored, record_id)):
        raise UserError(kind.mismatch(at, record_id, "none" if found is None else found.id, repair))
    return stored


class Records:
    """The records below `root` (a run directory, or a rank store's root): every place built by the one path
    builder from its kind's names and kept inside `root`; `run_dir`, the run directory their repairs name (None:
    none)."""

    def __init__(self, root, *, run_dir=None):
        self.root = Path(root)
        self.run_dir = run_dir

    def path(self, kind, record_id=None, **keys) -> Path:
        """Where the record of `kind` with id `record_id` is stored (`keys`: what else its place takes: a rank
        store's method and split)."""
        return place(self.root, *kind_of(kind).place(record_id, self.root, **keys))

    def put(self, record, stored: dict | None = None, *, at=None, **payload):
        """`put` at the place of `record` (or `at`, a place of it inside the run directory); returns its id."""
        at = self.path(type(record), record.id, **record.place_keys()) if at is None else at
        return put(record, stored, at=contained(self.root, at), **payload)

    def get(self, kind, record_id=None, *, at=None, repair: str | None = None, **keys) -> dict | None:
        """`get` of the record of `kind` with id `record_id` at its place (or `at`, where it was found inside the
        run directory), `repair` named when it is damaged (default: its kind's)."""
        kind = kind_of(kind)
        at = self.path(kind, record_id, **keys) if at is None else at
        repair = repair or kind.repair.format(run_dir=self.run_dir)
        return get(kind, at=contained(self.root, at), record_id=record_id, repair=repair, run_dir=self.run_dir)
