"""The configurations of a run directory: a configuration is what a request (a sweep, `run`, `retrain`,
`Study.run()`) asked of its cells, the settings they share (settings_of: dataset, model, recipe, the data's
fingerprint, the model's source, the base model's id, the ranking's granularity and reduction) and, for each of
its methods (random included), the id of the ranks its cells use. Its id is the digest of those two
(roarfast.records.ids), so the same request made again is the same configuration (its cells are done), and a
request that adds a method is another one that shares the cells of the first.

Its record, configurations/<id>.json (sealed): the settings, the rank ids, each method's ranks' provenance
and title (for labels and `roarfast ls`), the grids asked (methods, modes, fractions, seeds, controls, fill), the
command, when it was first and last requested, and what it is called (roarfast.rundir.labels): the label it got
when made, the name the user gave it, and the names and labels it had before. A record made before labels were
stored gets one computed as when it was made (against the record before it), stored by the next request.

A results row belongs to configuration C when its settings are C's, its method is one of C's and its ranks' id is
the one C names for it (`claims`).
"""

from roarfast.common.atomic import refuse_link
from roarfast.common.plugins import recorded_title
from roarfast.errors import UserError
from roarfast.records.head import now
from roarfast.records.configuration import ConfigurationRecord
from roarfast.rundir.labels import check_name, known_as, label, unique
from roarfast.modes import control_mode

#: the keys of a config's ranks that are the method's own provenance (Selection.ranks_identity): not shared
METHOD_OWN_RANKS = ("parameters", "code", "seed", "keying")
#: a cell's config keys that are not part of its configuration: its method's ranks (their provenance and id,
#: named by the configuration per method) and the fill (a dimension of every table; a control has none)
PER_CELL = ("ranks", "rank_id", "fill")
#: marks a label computed for a record made before labels were stored (not in the file until a request writes it)
_COMPUTED = "label computed"


def settings_of(row: dict) -> dict | None:
    """The settings a retraining row shares with the other cells of its configuration: its dataset and model
    columns, and of its config every key but PER_CELL, with the ranks' settings every method shares
    (granularity, reduction); None for a row without config (before results schema v5)."""
    config = row.get("config")
    if config is None:
        return None
    shared = {k: v for k, v in config.items() if k not in PER_CELL}
    ranks = config.get("ranks") or {}
    shared["ranks"] = {k: v for k, v in ranks.items() if k not in METHOD_OWN_RANKS}
    return {"dataset": row["dataset"], "model": row["model"], "config": shared}


def claims(record: dict, row: dict) -> bool:
    """Whether the results `row` is a cell of the configuration `record`."""
    config = row.get("config") or {}
    return (row["method"] in record["ranks"] and config.get("rank_id") == record["ranks"][row["method"]]
            and settings_of(row) == record["settings"])


def request(run, settings: dict, ranks: dict, provenance: dict, grid: dict, asked: str, about: dict,
            name: str | None = None) -> dict:
    """Records that the configuration of `settings` and `ranks` ({method: rank id}) was requested now with `grid`
    (what grid_of gives) by `asked` (the command); `provenance`: {method: its ranks' params}; `about`: what its
    labels may name besides (about_of); `name`: what the user calls it (refused in one line where another
    configuration goes or went by it).
    A new configuration gets its label now (what differs from HEAD's); the same configuration requested again
    keeps its record and label, its last time and its grids updated. Returns the record (with its "id")."""
    made = ConfigurationRecord(settings, ranks)
    cid = made.id
    name = None if name is None else check_name(name)
    with run.claim("configurations"):
        records = configurations(run)
        for other in records:  # labels computed for records made before they were stored: stored now, once
            if other.get(_COMPUTED) and other["id"] != cid:
                _write(run, other)
        record = next((r for r in records if r["id"] == cid), None)
        taken = {text for r in records if r["id"] != cid for text in known_as(r)}
        if name is not None and name in taken:
            raise UserError(f"--name {name}: another configuration of this run directory goes by that name; "
                            f"`roarfast ls` lists them")
        time = now()
        if record is None:
            head = run.head().configuration
            before = next((r for r in records if r["id"] == head), records[-1] if records else None)
            record = {**made.to_record(), "provenance": provenance, "titles": _titles(ranks), "grids": [], "first": time,
                      "about": about}
            record["label"] = unique(label(record, before), taken, len(records) + 1)
        if name is not None and name != record.get("name"):
            record["aliases"] = [t for t in dict.fromkeys([*record.get("aliases", ()), record.get("name")]) if t]
            record["name"] = name
        if grid not in record["grids"]:
            record["grids"].append(grid)
        record.update(last=time, command=asked, about=about)
        _write(run, record)
    return record


def _write(run, record: dict) -> None:
    record.pop(_COMPUTED, None)
    run.records.put(ConfigurationRecord.from_record(record), record)


def _titles(ranks: dict) -> dict:
    """{method: what it is shown as} for the methods named after a Python object in this process (mix(w=0.1))."""
    return {m: title for m in sorted(ranks) if (title := recorded_title(m))}


def about_of(base_meta: dict, dataset_record: dict | None) -> dict:
    """What a configuration's label may name besides its settings: its base model's seed and epochs, and its
    dataset's options (num_train, ...), which its settings hold only as the data's fingerprint."""
    recipe = base_meta.get("recipe") or {}
    return {"base seed": base_meta.get("seed"), "base epochs": recipe.get("epochs"),
            "data options": (dataset_record or {}).get("options")}


def grid_of(methods, modes, fractions, seeds, control_seeds, fill: str) -> dict:
    """A grid as a configuration records it: its cells are methods x modes x fractions x seeds, with the
    mask-only control of the cells of the `control_seeds`."""
    return {"methods": list(methods), "modes": list(modes), "fractions": [float(f) for f in fractions],
            "seeds": list(seeds), "control_seeds": list(control_seeds), "fill": fill}


def grid_cells(grids: list) -> set:
    """The cells of `grids`: {(method, mode as measured, fraction, seed, fill)} (fill None for a control)."""
    cells = set()
    for grid in grids:
        for method in grid["methods"]:
            for mode in grid["modes"]:
                for fraction in grid["fractions"]:
                    for seed in grid["seeds"]:
                        cells.add((method, mode, round(fraction, 9), seed, grid["fill"]))
                        if seed in grid["control_seeds"]:
                            cells.add((method, control_mode(mode), round(fraction, 9), seed, None))
    return cells


def configurations(run, damaged: list | None = None) -> list:
    """Every configuration record of RunDir `run`, oldest first (by when first requested), each with its label (one
    made before labels were stored: computed as when it was made, against the record before it). A record that
    is not what its name says (damaged, its id not its file's name nor the digest of its settings, a rank or base
    model id not of an id's form) is refused in one line; with `damaged` (a list), it is appended there as
    (path, the one line) instead, and the others are read (`roarfast ls` and `prune`)."""
    root = run.configurations_root
    refuse_link(root)  # a link there would make its records another directory's
    found = []
    for path in sorted(root.glob("*.json")) if root.is_dir() else ():
        try:
            found.append(_checked(run, path))
        except UserError as err:
            if damaged is None:
                raise
            damaged.append((path, str(err)))
    found.sort(key=lambda r: (r["first"], r["id"]))
    taken = {text for r in found for text in known_as(r)}
    for i, record in enumerate(found):
        if not record.get("label"):
            record["label"] = unique(label(record, found[i - 1] if i else None), taken, i + 1)
            record[_COMPUTED] = True
            taken.add(record["label"])
    return found


def _checked(run, path) -> dict:
    """The configuration record at `path`, verified (Records.get: sealed, of the form a record has, every id in it
    of an id's form, its id its file's name and the digest of what it records)."""
    return run.records.get(ConfigurationRecord, path.stem, at=path)
