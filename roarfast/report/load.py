"""The report's first step: a run directory's measurements read once into plain data (LoadedRun) — one
Loaded per configuration of the retraining cells (roarfast.rundir.catalog: cells of two are never
compared), each with its finished cells (within a configuration, each method's newest ranks only), the raw
rows the no-retrain and fill-leakage sections and the rank agreement need, and its context: the base model's
meta, chance from the dataset, the stage times; and what was set aside, and why.

Reads only results.sqlite (read-only: nothing is written beside it), the base checkpoint's meta.json,
stages.json and dataset.json (with the dataset itself, for the example images, and for chance and the test
split's size where the cells did not record them), so a report can be written while a sweep runs, and from
a read-only run directory.
"""

from collections import Counter, defaultdict
from dataclasses import dataclass, field

from roarfast.errors import UserError
from roarfast.common.fingerprint import canonical_json
from roarfast.rundir.configurations import configurations
from roarfast.modes import MODES, RETRAIN_MODES, control_mode, is_control
from roarfast.rundir.catalog import Configuration, assemble, named, ranks_change, report_command
from roarfast.measurements.row import FILL_LEAKAGE, KIND_MODES, NO_RETRAIN, RETRAIN
from roarfast.rundir.results import open_results
from roarfast.stats import chance_rate


@dataclass
class Context:
    """What the report knows besides one configuration's measurements: the base model (its meta; {} when it
    was trained on other data than these cells), chance, test-split size (both as the cells recorded them
    where they all agree, else from the dataset), and the opened dataset (None when it could not be opened
    or is not these cells' data; a note says why)."""

    meta: dict
    chance: float | None
    chance_source: str
    n_test: int | None
    dataset: object = None
    run_dir: str | None = None  # the run directory, as the fixes' commands name it


@dataclass
class Loaded:
    """One configuration's measurements for the report.

    cells: its finished retraining cells and controls, one per (method, mode, fraction, seed, fill), sorted
        for reading, each with its control's accuracy (control_acc) where it has one, the test split's
        size and chance it was measured on (test_images, test_chance; None where the row lacks them), its
        configuration's label and its own config.
    retrained: the rows those cells come from. no_retrain, fill_leakage: the done rows of each kind (the
        whole run's), in results order.
    notes: what the report could not do or set aside in this configuration.
    """

    cells: list
    retrained: list
    no_retrain: list
    fill_leakage: list
    context: Context
    notes: list = field(default_factory=list)
    configuration: Configuration | None = None


@dataclass
class LoadedRun:
    """A run directory's measurements: a Loaded per configuration (oldest first), the notes about the whole
    run, what was set aside ([{configuration, method, rows, why}]: rows not reported, and why), the stage
    times ([{stage, seconds, source}]) and the run's dataset (None when not opened; a note says why)."""

    parts: list
    notes: list = field(default_factory=list)
    set_aside: list = field(default_factory=list)
    stages: list = field(default_factory=list)
    dataset: object = None
    answered: str = ""  # which configurations are reported, and why ("" when the run directory holds one)
    others: list = field(default_factory=list)  # the configurations not reported: {label, id, cells, differs, command}


#: `select` of load_run that reports every configuration apart
ALL = "all"


def method_order(method: str) -> tuple:
    """Random (the reference) first, then by name."""
    return (method != "random", method)


def mode_order(mode: str) -> int:
    return RETRAIN_MODES.index(mode)


def load_run(run, dataset=None, select: str | None = None) -> LoadedRun:
    """Reads RunDir `run` (with `dataset`, when given, instead of opening the one HEAD records) for the
    configuration `select` names (a label or an id prefix; ALL: every configuration, each apart; None: the
    latest request's, HEAD's: `_choose`). Raises UserError, reading nothing else, when it has no
    results.sqlite or no finished retraining cells."""
    path = run.results_path
    if not path.is_file():  # checked first: opening the database would create it
        raise UserError(f"no {path.name} in {run.root}: run `roarfast retrain` or `roarfast sweep` first "
                        f"(--run-dir names the run directory)")
    with open_results(run, readonly=True) as db:  # a read-only run directory can be reported on
        rows = db.rows(status="done")
    if not rows:
        raise UserError(f"no finished cells in {path}: run `roarfast retrain` or `roarfast sweep` first")
    notes = []
    unknown = sorted({r["mode"] for r in rows if r["mode"] not in KIND_MODES.get(r["kind"], ())})
    if unknown:
        notes.append(f"rows of modes this report does not read were left out: {', '.join(unknown)}")
    known = [r for r in rows if r["mode"] in KIND_MODES.get(r["kind"], ())]
    retrained = [r for r in known if r["kind"] == RETRAIN]
    if not retrained:
        raise UserError(f"no finished cells of modes {', '.join(RETRAIN_MODES)} in {path}")

    found = assemble(configurations(run), retrained)
    chosen, answered = _choose(run, found, select)
    head_meta = run.base_meta()
    if not head_meta and any(c.record is None for c in chosen):
        notes.append(f"no base checkpoint meta ({run.base_meta_path}): base accuracy unknown")
    ds = _open_dataset(run, dataset, notes, chosen)
    loaded = LoadedRun(parts=[], notes=notes, dataset=ds, answered=answered,
                       others=[{"label": c.label, "id": c.id, "cells": len(c.rows), "differs": c.differs,
                                "command": (c.record or {}).get("command"), "report": report_command(run, c)}
                               for c in found if c not in chosen and c.rows])
    opened = {} if ds is None else {ds.fingerprint: ds}  # data opened for the configurations, each once
    for configuration in chosen:
        recorded = configuration.record is not None
        kept = configuration.rows if recorded else _current_ranks(configuration, loaded.set_aside)
        part_notes = []
        cells = _newest_cells(kept, configuration, loaded.set_aside, part_notes)
        base = configuration.settings["config"].get("base") if recorded else None
        meta = run.model_meta(base) if recorded else head_meta
        where = run.model_path(base) if base else run.base_checkpoint
        loaded.parts.append(Loaded(cells=cells, retrained=kept,
                                   no_retrain=_measured_on(run, configuration, known, NO_RETRAIN),
                                   fill_leakage=_measured_on(run, configuration, known, FILL_LEAKAGE),
                                   context=_context(run, (meta, where), cells, part_notes, ds, configuration, opened),
                                   notes=part_notes, configuration=configuration))
    meta = loaded.parts[0].context.meta if len(loaded.parts) == 1 else head_meta
    loaded.stages = _stage_times(run, meta, [cell for part in loaded.parts for cell in part.cells])
    return loaded


def _choose(run, found: list, select: str | None) -> tuple:
    """(the configurations to report, which and why, where one is chosen among several): `select`'s (ALL: every
    one with finished cells), else the latest request's (HEAD's), else the only one, else every one (no latest
    request recorded)."""
    reportable = [c for c in found if c.rows]
    if select == ALL:
        return reportable, ""
    others = f"`roarfast report --run-dir {run.root} --all` reports every one apart"
    if select is not None:
        chosen = named(found, select)
        if not chosen.rows:
            raise UserError(f"--config {select}: configuration [{chosen.label}] has no finished cells yet; {others}")
        return [chosen], f"configuration [{chosen.label}] ({chosen.id[:8]}), as --config {select} asked"
    head = run.head()
    latest = [c for c in found if head.configuration is not None and c.id == head.configuration]
    if latest:
        if not latest[0].rows:
            raise UserError(f"the latest request's configuration ({latest[0].id[:8]}, `{head.command}`) has no "
                            f"finished cells yet: finish it (the same command again), or report another: {others}")
        label = f" [{latest[0].label}]" if latest[0].label else ""
        return latest, (f"the latest request's configuration{label} ({latest[0].id[:8]}, `{head.command}`)"
                        if len(reportable) > 1 else "")
    if len(reportable) == 1:
        return reportable, ""
    return reportable, ""  # no latest request recorded (format 1): every one apart, as the head lines say


def _measured_on(run, configuration: Configuration, rows: list, kind: str) -> list:
    """The rows of `kind` (no-retrain, fill-leakage) that belong with `configuration`: made on its dataset and, for
    the no-retrain evaluations, by its base model (their config holds its checkpoint's sha256); every such row for
    cells no record claims (made before configurations were recorded)."""
    rows = [r for r in rows if r["kind"] == kind]
    if configuration.record is None:
        return rows
    config = configuration.settings["config"]
    rows = [r for r in rows if (r.get("config") or {}).get("dataset") in (None, config.get("dataset"))]
    if kind != NO_RETRAIN or not rows:  # (hashing the checkpoint only where there are rows to match)
        return rows
    try:
        checkpoint = run.base_checkpoint_sha256(config.get("base"))
    except (UserError, OSError):  # its base model pruned or damaged: none of these rows can be shown as its
        return []
    return [r for r in rows if (r.get("config") or {}).get("base") == checkpoint]


def _open_dataset(run, ds, notes: list, chosen: list):
    """The dataset of the configurations `chosen`: `ds` when given, else the data their cells were trained on
    where they share one that is not HEAD's (its record in datasets/: a report of another configuration reads its
    own data, its example images included), else the one HEAD records, else None (a note says why)."""
    if ds is not None:
        return ds
    data = {(c.settings or {}).get("config", {}).get("dataset") for c in chosen}
    head = run.dataset_record()
    if len(data) == 1 and None not in data and (head or {}).get("fingerprint") not in data:
        (fingerprint,) = data
        try:
            return run.open_recorded_dataset(fingerprint)
        except UserError as err:
            notes.append(f"the data of these cells ({fingerprint[:8]}) was not opened ({err}): no example images")
            return None
    if head is None:  # never guess the dataset: chance and the grid would be wrong
        notes.append(f"no {run.dataset_path.name} in the run directory: no example images")
        return None
    try:
        return run.open_dataset()
    except UserError as err:
        notes.append(f"dataset not opened ({err}): no example images")
        return None


def _current_ranks(configuration: Configuration, set_aside: list) -> list:
    """The rows of `configuration` made with each method's newest ranks (those of its newest row); the rest
    are set aside, with what changed in the ranks. Rows that recorded no config are all kept."""
    if configuration.settings is None:
        return configuration.rows

    by_method = defaultdict(list)
    for row in configuration.rows:
        by_method[row["method"]].append(row)
    kept = []
    for method, rows in by_method.items():
        newest = max(rows, key=lambda r: r["finished"] or "")["config"].get("ranks")
        older = defaultdict(list)
        for row in rows:
            ranks = row["config"].get("ranks")
            (kept if canonical_json(ranks) == canonical_json(newest) else older[canonical_json(ranks)]).append(row)
        for group in older.values():
            change = ranks_change(group[0]["config"].get("ranks"), newest)
            set_aside.append({"configuration": configuration.label, "method": method, "rows": len(group),
                              "why": f"made with {method}'s older ranks ({change or 'another provenance'}); its "
                                     f"cells with its newest ranks are reported"})
    kept_ids = {id(row) for row in kept}
    return [row for row in configuration.rows if id(row) in kept_ids]


def _newest_cells(rows: list, configuration: Configuration, set_aside: list, notes: list) -> list:
    """One cell per (method, mode, fraction, seed, fill): the newest when several config hashes hold the same
    cell (only where no config was recorded: the older are set aside); controls matched to their cells."""
    newest = {}
    replaced = 0
    for row in rows:
        cell = {k: row[k] for k in ("method", "mode", "fraction", "seed", "fill", "test_acc", "val_acc", "epochs",
                                    "seconds", "dataset", "model", "config_hash", "finished", "threads", "config")}
        cell.update({k: (row["extra"] or {}).get(k) for k in ("test_images", "test_chance")})
        cell["configuration"] = configuration.label
        key = (cell["method"], cell["mode"], cell["fraction"], cell["seed"], cell["fill"])
        if key in newest:
            replaced += 1
            if cell["finished"] <= newest[key]["finished"]:
                continue
        newest[key] = cell
    if replaced:
        set_aside.append({"configuration": configuration.label, "method": None, "rows": replaced,
                          "why": "cells measured again under another config hash, which rows before schema v5 do not "
                                 "record: the newest of each cell is reported"})
    threads = Counter(c["threads"] for c in newest.values() if c["threads"] is not None)
    if len(threads) > 1:  # NULL: recorded before schema v4, not known to differ
        counts = ", ".join(f"{n} thread{'s' if n > 1 else ''}: {k} cell(s)" for n, k in sorted(threads.items()))
        notes.append(f"the cells were trained with different CPU thread counts ({counts}); CPU accuracies depend on "
                     f"the thread count, so cells compared here may differ by it alone; --threads-per-cell keeps one "
                     f"count (docs/concepts/training.md, \"Thread counts\")")
    cells = sorted(newest.values(), key=lambda c: (mode_order(c["mode"]), c["fill"] or "", method_order(c["method"]),
                                                   c["fraction"], c["seed"]))
    controls = {(c["method"], c["mode"], c["fraction"], c["seed"]): c["test_acc"]
                for c in cells if is_control(c["mode"])}
    for c in cells:
        c["control_acc"] = None if c["mode"] not in MODES else controls.get(
            (c["method"], control_mode(c["mode"]), c["fraction"], c["seed"]))
    return cells


def _context(run, base: tuple, cells: list, notes: list, ds, configuration: Configuration, opened: dict) -> Context:
    """One configuration's context: the base model's meta (`base`: (meta, its folder)) and the dataset only where
    they are of the data its cells were trained on (the fingerprint its cells recorded; unknown before schema v5:
    taken as theirs)."""
    meta, where = base
    data = None if configuration.settings is None else configuration.settings["config"].get("dataset")
    if data is not None and ds is not None and ds.fingerprint != data:
        try:  # the data these cells were trained on, as the run directory recorded it (`opened`: by fingerprint)
            if data not in opened:
                opened[data] = run.open_recorded_dataset(data)
            ds = opened[data]
        except UserError as err:
            notes.append(f"the run's dataset (fingerprint {ds.fingerprint[:8]}) is not the data these cells were "
                         f"trained on ({data[:8]}), which could not be opened ({err}): no example images; chance and "
                         f"the test split's size as the cells recorded them")
            ds = None
    if data is not None and meta.get("dataset_fingerprint") not in (None, data):
        notes.append(f"the base model ({where}) was trained on other data than these cells: its "
                     f"accuracy is not shown beside them")
        meta = {}
    recorded_chance, recorded_n = (_recorded(cells, key) for key in ("test_chance", "test_images"))
    num_classes = meta.get("num_classes")
    if recorded_chance is not None:
        chance, source = recorded_chance, "share of the test split's most frequent class, as the cells recorded it"
    elif ds is not None:
        chance, source = chance_rate(ds.test.labels), "share of the test split's most frequent class"
    elif num_classes:
        chance, source = 1.0 / num_classes, "1 / number of classes"
    else:
        chance, source = None, "unknown (no dataset, no base meta)"
    n_test = recorded_n if recorded_n is not None else (len(ds.test) if ds is not None else None)
    return Context(meta, chance, source, n_test, ds, str(run.root))


def _recorded(cells: list, key: str):
    """The value every cell recorded under `key` (test_images, test_chance), or None when they differ or
    some lack it."""
    values = {c[key] for c in cells}
    return values.pop() if len(values) == 1 else None


def _stage_times(run, meta: dict, cells: list) -> list:
    """[{stage, seconds, source}]: from stages.json when a sweep wrote it, else what the run directory
    holds (the base model's training time, the sums of the cells' and the controls' seconds)."""
    record = run.stage_times()
    source = run.stage_times_path.name
    if record is not None:
        rows = []
        for stage, value in record.items():
            if isinstance(value, dict):
                rows.extend({"stage": f"{stage} {name}", "seconds": s, "source": source} for name, s in value.items())
            else:
                rows.append({"stage": stage, "seconds": value, "source": source})
        return rows
    rows = [{"stage": "train", "seconds": meta.get("seconds"), "source": "base checkpoint meta.json"}]
    rows.append({"stage": "extract", "seconds": None, "source": "not recorded (the rank store keeps no timings)"})
    for label, control in (("retrain (sum of cells)", False), ("controls (sum of cells)", True)):
        seconds = [c["seconds"] for c in cells if is_control(c["mode"]) == control]
        if seconds:
            rows.append({"stage": label, "seconds": sum(seconds), "source": run.results_path.name})
    return rows
