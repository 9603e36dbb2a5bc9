"""What makes cells comparable, for the report, `ls`, `prune` and `compare`: the configurations of a run
directory's retraining cells (records, no statistics: light enough for `ls`).

A configuration recorded by the request that made its cells (roarfast.rundir.configurations) is its settings
(dataset, model, recipe, the data's fingerprint, the model's source, the base model, the ranking's settings)
and the ranks each of its methods uses: its cells are the rows it claims, so one curve never mixes two sets of
ranks, and two configurations may share cells. The fill is not part of it: it is a dimension of every table,
figure and verdict already, and a mask-only control (no fill) serves the cells of every fill.

Rows no record claims (written before run-directory format 2) are split as they always were: by everything
their row records but the method's own ranks (`settings_of`); within one, only a method's newest ranks count
(its cells made with older ranks are set aside, saying what changed); rows written before results schema v5
record no config and form one of their own, in which the newest row of each cell is reported. Such
configurations are never counted as done for a new request.

A recorded configuration goes by its name or the label it got when made (roarfast.rundir.labels: never
changed afterwards), and `differs` is the whole of what differs between the configurations shown together (the
report's Configurations table). Configurations of rows no record claims are labelled by what differs among them
("epochs 2" / "epochs 4"), so no verdict, ranking, curve or control test ever compares cells of two.
"""

import re
from dataclasses import dataclass, field

from roarfast.common.fingerprint import canonical_json
from roarfast.rundir.configurations import claims, settings_of
from roarfast.records.ids import SHOWN_CHARS
from roarfast.records.configuration import ConfigurationRecord
from roarfast.rundir.labels import differs, known_as, select, shown, value_text

#: the label of the rows that recorded no config, and of the one configuration recorded beside them
UNRECORDED, RECORDED = "configuration not recorded (rows before schema v5)", "configuration recorded"
#: what labels the configurations of rows no record claims, beside recorded ones
LEGACY = "made before base models were recorded"
#: how the configuration's flattened settings are named in a label, where the leaf name would mislead
DISPLAY = {"config.dataset": "data", "config.model_source": "model source", "config.base": "base model"}
#: the order in which settings enter a label: these first, then the rest by name, the digests last
_FIRST = ("dataset", "num train", "num test", "model", "epochs", "lr", "batch size", "methods", "base seed",
          "base epochs")
_LAST = ("data", "model source", "base model")


@dataclass
class Configuration:
    """One configuration of a run directory's cells: `settings` (what its cells share, None when they
    recorded none), `label` (what it goes by: its name or label; "" for the rows no record claims when they are
    all the run directory holds), `differs` (display name -> value of the settings that tell it apart from the
    others), `known` (every text that selects it besides its id) and its cells' rows."""

    settings: dict | None
    rows: list = field(default_factory=list)
    label: str = ""
    differs: dict = field(default_factory=dict)
    slug: str = ""
    id: str = ""  # its record's id; for rows no record claims, a digest of their settings
    record: dict | None = None  # its record (roarfast.rundir.configurations); None: rows no record claims
    known: list = field(default_factory=list)

    @property
    def name(self) -> str | None:
        """The name the user gave it, or None."""
        return (self.record or {}).get("name")

    @property
    def first(self) -> str:
        return min((r["finished"] or "" for r in self.rows), default=(self.record or {}).get("first", ""))

    @property
    def last(self) -> str:
        return max((r["finished"] or "" for r in self.rows), default=(self.record or {}).get("last", ""))

    def to_dict(self) -> dict:
        return {"label": self.label, "name": self.name, "config": self.settings, "differs": self.differs,
                "first": self.first, "last": self.last, "slug": self.slug, "id": self.id,
                "command": None if self.record is None else self.record["command"],
                "ranks": None if self.record is None else self.record["ranks"],
                "titles": (self.record or {}).get("titles") or {}}


def assemble(records: list, rows: list) -> list[Configuration]:
    """The configurations of a run directory: one per configuration record (oldest first; its cells: the rows
    it claims, none yet for one whose cells are not done; labelled as its record says), then the rows no record
    claims, split by their settings (`split`) and labelled by what differs between them."""
    found = [Configuration(r["settings"], [row for row in rows if claims(r, row)], id=r["id"], record=r,
                           label=shown(r), known=known_as(r)) for r in records]
    for c, differing in zip(found, differs(records)):
        c.differs = differing
    claimed = {id(row) for c in found for row in c.rows}
    legacy = _split([row for row in rows if id(row) not in claimed])
    for c in legacy:
        c.id = ConfigurationRecord.unrecorded_id(c.settings)
    _label(legacy)
    if found and legacy:
        for c in legacy:
            c.label = f"{LEGACY}: {c.label}" if c.label else LEGACY
    for c in legacy:
        c.known = [c.label] if c.label else []
    _slugs([*found, *legacy])
    return [*found, *legacy]


def split(rows: list) -> list[Configuration]:
    """The configurations of `rows` (retraining rows no record claims), oldest first (by their first finished
    row), each labelled by what differs between them."""
    return assemble([], rows)


def _split(rows: list) -> list[Configuration]:
    found = {}
    for row in rows:
        settings = settings_of(row)
        key = None if settings is None else _canonical(settings)
        found.setdefault(key, Configuration(settings)).rows.append(row)
    return sorted(found.values(), key=lambda c: (c.settings is not None, c.first))


def _label(configurations: list) -> None:
    """Sets the label and differs of each configuration of rows no record claims: with one, nothing; else every
    setting whose values differ among them, in _order."""
    if len(configurations) < 2:
        return
    recorded = [c for c in configurations if c.settings is not None]
    flat = [flatten(c.settings) for c in recorded]
    names = sorted({name for f in flat for name in f}, key=_order)
    differing = [n for n in names if len({repr(f.get(n)) for f in flat}) > 1]
    for c, f in zip(recorded, flat):
        c.differs = {n: f.get(n) for n in differing}
        c.label = ", ".join(f"{n} {short(f.get(n))}" for n in differing) or RECORDED
    for c in configurations:
        if c.settings is None:
            c.label = UNRECORDED


def _slugs(configurations: list) -> None:
    """Each configuration's slug (its files' names) and a label told apart where two are alike."""
    if len(configurations) < 2:
        return
    slugs = set()
    for i, c in enumerate(configurations, start=1):
        slug = re.sub(r"[^a-z0-9.]+", "-", c.label.lower()).strip("-")[:40] or f"c{i}"
        c.slug = slug if slug not in slugs else f"{slug}-{i}"
        slugs.add(c.slug)
    labels = [c.label for c in configurations]
    for i, c in enumerate(configurations, start=1):  # rows no record claims may be alike
        if labels.count(c.label) > 1 and c.record is None:
            c.label = f"{c.label} ({i})"
            c.known.append(c.label)


def flatten(settings: dict) -> dict:
    """{display name: value} of a configuration's settings: the leaf names ("epochs"), a dotted path where two
    leaves share a name, DISPLAY's names where a leaf would mislead."""
    paths = {}

    def walk(prefix, value):
        if isinstance(value, dict) and value:
            for k, v in value.items():
                walk(f"{prefix}.{k}" if prefix else str(k), v)
        else:
            paths[prefix] = value

    walk("", settings)
    leaves = [p.rsplit(".", 1)[-1] for p in paths]
    out = {}
    for path, value in paths.items():
        leaf = path.rsplit(".", 1)[-1]
        name = DISPLAY.get(path) or (leaf if leaves.count(leaf) == 1 else path.removeprefix("config."))
        out[name.replace("_", " ")] = value
    return out


def _order(name: str) -> tuple:
    return (_FIRST.index(name) if name in _FIRST else len(_FIRST), name in _LAST, name)


def short(value) -> str:
    """A setting's value in a label or a table: a digest cut to 8 characters, a number as written, a list as its
    items (roarfast.rundir.labels.value_text)."""
    return value_text(value)


def named(configurations: list, text: str, flag: str = "--config") -> Configuration:
    """The configuration `text` names: its id, its name or a label it goes or went by, or a prefix of its id (4
    characters or more); a UserError (naming it as `flag` did) listing them when none or several match."""
    return select(configurations, text, flag)


def report_command(run, c: Configuration) -> str:
    """The command that reports configuration `c` of RunDir `run`."""
    return f"roarfast report --run-dir {run.root} --config {c.id[:SHOWN_CHARS]}"


def _canonical(settings: dict) -> str:
    return canonical_json(settings)


def ranks_change(old: dict | None, new: dict | None) -> str:
    """What differs between two ranks' provenances, in brief ("ig steps 2 -> 20"); "" when nothing shown."""
    a, b = flatten(old or {}), flatten(new or {})
    return "; ".join(f"{n} {short(a.get(n))} -> {short(b.get(n))}" for n in sorted(set(a) | set(b))
                     if repr(a.get(n)) != repr(b.get(n)))
