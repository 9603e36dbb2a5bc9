"""What makes cells comparable: the configuration of a retraining cell, for the report, is everything its row
records that is not its method's own ranks — the dataset and model columns, and of its `config` (the dict
its config_hash hashes: roarfast.cells.CellTrainer.key) the recipe (epochs, batch, learning rate, ...), the
data's fingerprint, the model's source and every other key, and of the ranks' provenance the settings every
method shares (granularity, reduction). Two things are left out, each for a reason:

- the method's own ranks (`ranks`' parameters, code identity and, where it draws random numbers, seed):
  every method has its own, so they cannot tell configurations apart without splitting each method from
  random. Within a configuration only a method's newest ranks count (its cells made with older ranks are
  set aside, saying what changed), so one curve never mixes two sets of ranks;
- the fill: already a dimension of every table, figure and verdict, and a mask-only control (no fill)
  serves the cells of every fill.

Rows written before schema v5 record no config: they form one configuration of their own, in which the
newest row of each cell is reported. A run directory holding several configurations is reported apart,
each labelled by what differs ("epochs 2" / "epochs 4"), so no verdict, ranking, curve or control test ever
compares cells of two.
"""

import re
from dataclasses import dataclass, field

#: the keys of a config's ranks that are the method's own provenance (Selection.ranks_identity): not shared
METHOD_OWN_RANKS = ("parameters", "code", "seed")
#: a cell's config keys that are not part of its configuration (see the module's docstring)
PER_CELL = ("ranks", "fill")
#: the label of the rows that recorded no config, and of the one configuration recorded beside them
UNRECORDED, RECORDED = "configuration not recorded (rows before schema v5)", "configuration recorded"
#: a label names at most this many settings (the Configurations table lists them all)
LABEL_SETTINGS = 3
#: how the configuration's flattened settings are named in a label, where the leaf name would mislead
DISPLAY = {"config.dataset": "data", "config.model_source": "model source"}
#: the order in which settings enter a label: these first, then the rest by name, the digests last
_FIRST = ("dataset", "model", "epochs", "lr", "batch size")
_LAST = ("data", "model source")


@dataclass
class Configuration:
    """One configuration of a run directory's cells: `settings` (what its cells share, None when they
    recorded none), `label` ("" when the run directory holds one configuration), `differs` (display name ->
    value of the settings that tell it apart from the others) and its cells' rows."""

    settings: dict | None
    rows: list = field(default_factory=list)
    label: str = ""
    differs: dict = field(default_factory=dict)
    slug: str = ""

    @property
    def first(self) -> str:
        return min(r["finished"] or "" for r in self.rows)

    @property
    def last(self) -> str:
        return max(r["finished"] or "" for r in self.rows)

    def to_dict(self) -> dict:
        return {"label": self.label, "config": self.settings, "differs": self.differs, "first": self.first,
                "last": self.last, "slug": self.slug}


def settings_of(row: dict) -> dict | None:
    """The configuration of a retraining row (see the module's docstring); None for a row without config."""
    config = row.get("config")
    if config is None:
        return None
    shared = {k: v for k, v in config.items() if k not in PER_CELL}
    ranks = config.get("ranks") or {}
    shared["ranks"] = {k: v for k, v in ranks.items() if k not in METHOD_OWN_RANKS}
    return {"dataset": row["dataset"], "model": row["model"], "config": shared}


def split(rows: list) -> list[Configuration]:
    """The configurations of `rows` (retraining rows), oldest first (by their first finished row), each
    labelled by what differs between them."""
    found = {}
    for row in rows:
        settings = settings_of(row)
        key = None if settings is None else _canonical(settings)
        found.setdefault(key, Configuration(settings)).rows.append(row)
    configurations = sorted(found.values(), key=lambda c: (c.settings is not None, c.first))
    _label(configurations)
    return configurations


def _label(configurations: list) -> None:
    """Sets each configuration's label, differs and slug: with one, nothing; else the settings whose values
    differ among the recorded ones, named in the order of _order (at most LABEL_SETTINGS in a label)."""
    if len(configurations) < 2:
        return
    recorded = [c for c in configurations if c.settings is not None]
    flat = [flatten(c.settings) for c in recorded]
    names = sorted({name for f in flat for name in f}, key=_order)
    differing = [n for n in names if len({repr(f.get(n)) for f in flat}) > 1]
    for c, f in zip(recorded, flat):
        c.differs = {n: f.get(n) for n in differing}
        shown = [f"{n} {short(f.get(n))}" for n in differing[:LABEL_SETTINGS]]
        more = len(differing) - LABEL_SETTINGS
        c.label = (", ".join(shown) + (f", +{more} more" if more > 0 else "")) or RECORDED
    for c in configurations:
        if c.settings is None:
            c.label = UNRECORDED
    slugs = set()
    for i, c in enumerate(configurations, start=1):
        slug = re.sub(r"[^a-z0-9.]+", "-", c.label.lower()).strip("-")[:40] or f"c{i}"
        c.slug = slug if slug not in slugs else f"{slug}-{i}"
        slugs.add(c.slug)
    labels = [c.label for c in configurations]
    for i, c in enumerate(configurations, start=1):  # settings cut from a label may leave two alike
        if labels.count(c.label) > 1:
            c.label = f"{c.label} ({i})"


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
    """A setting's value in a label: a digest cut to 8 characters, a number as written, a list or dict in
    brief."""
    if isinstance(value, str) and re.fullmatch(r"[0-9a-f]{32,}", value):
        return value[:8]
    if isinstance(value, float):
        return f"{value:g}"
    text = str(value)
    return text if len(text) <= 24 else text[:21] + "..."


def _canonical(settings: dict) -> str:
    from roarfast.fingerprint import canonical_json

    return canonical_json(settings)


def ranks_change(old: dict | None, new: dict | None) -> str:
    """What differs between two ranks' provenances, in brief ("ig steps 2 -> 20"); "" when nothing shown."""
    a, b = flatten(old or {}), flatten(new or {})
    changes = [f"{n} {short(a.get(n))} -> {short(b.get(n))}" for n in sorted(set(a) | set(b))
               if repr(a.get(n)) != repr(b.get(n))]
    return "; ".join(changes[:LABEL_SETTINGS]) + (f"; +{len(changes) - LABEL_SETTINGS} more"
                                                    if len(changes) > LABEL_SETTINGS else "")
