"""Configurations side by side (`roarfast compare`, `roarfast.compare`): two or more configurations of one run
directory, or the configurations of several run directories, read as the report reads them (load_run, then
the shared analysis and the rankings), shown per mode, fill and fraction — each side's accuracy with its
interval and its verdict against random, each side's AUC — with what differs between them (the settings of
their configuration records), each side's status (whether its study can answer) and base model (adopted weights
named as adopted, with their digest), and each side's change from the first, the baseline: the cells both hold
are SHARED (one measurement: not tested), the same seeds are paired, other seeds compared by Welch
(roarfast.report.compare_rows), Holm-corrected over every change of that side.

A comparison is a sensitivity reading ("samples 5 vs 15", "epochs 2 vs 8"), never a verdict of its own: an
estimator's verdicts are each side's, against that side's random.
"""

import csv
import json
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from roarfast.common.atomic import check_writable
from roarfast.errors import UserError, is_write_refused, write_error
from roarfast.modes import MODES
from roarfast.report.analysis import findings, measured
from roarfast.report.compare_rows import SHARED, accuracy_rows, auc_rows, cell_groups, holm
from roarfast.report.load import ALL, load_run, method_order, mode_order
from roarfast.report.sections import Table
from roarfast.report.sections.run import base_text
from roarfast.report.tables import markdown_document
from roarfast.report.text import interval_text, p_text, pct, title_fill
from roarfast.rundir.catalog import flatten, named, short
from roarfast.rundir.directory import RunDir
from roarfast.rundir.labels import describe

#: the files `write` puts in its directory
COMPARE_FILES = ("compare.md", "compare.csv", "compare.json")
#: the columns of compare.csv, one row per measure x cell group x side
CSV_COLUMNS = ("measure", "mode", "fill", "fraction", "method", "side", "configuration", "mean", "low", "high", "n",
               "verdict", "change", "change_low", "change_high", "test", "shared_seeds", "p", "p_holm")
#: a side's letter in the tables (its label stands in the legend above them)
LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


@dataclass
class Comparison:
    """Configurations side by side. `sides`: [{label, letter, run_dir, id, configuration, cells, base_test_acc,
    chance, status, reasons, adopted (its base model's record of adopted weights, or None), base (the base model
    in words)}], the first the baseline; `differs`: {setting: [its value on each side]} for the settings that
    differ; `rows`: one per measure ("accuracy": per mode, fill, fraction and method; "auc": per mode, fill and
    method) and side, with its mean and interval, its verdict against random (accuracy, estimators only) and,
    beside the baseline, its change from the baseline's: the interval, the test (compare_rows: shared, paired or
    Welch), p and Holm-corrected p (CSV_COLUMNS); `notes`: what could not be compared."""

    sides: list
    differs: dict
    rows: list
    notes: list = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"sides": self.sides, "differs": self.differs, "rows": self.rows, "notes": self.notes}

    def frame(self):
        """The rows as a pandas DataFrame (a list of dicts without pandas)."""
        try:
            import pandas  # late: optional, and compare's CLI path needs no pandas
        except ImportError:
            return list(self.rows)
        return pandas.DataFrame.from_records(self.rows, columns=list(CSV_COLUMNS) + ["fractions"])

    def legend(self) -> list[str]:
        """One line per side ("A = epochs 2 (runs/a, 1a2b3c4d; 120 cells; CONCLUSIVE), the baseline"), with its
        base model where adopted weights are one's, and why a side's study cannot answer; then one per setting that
        differs ("epochs: A 2, B 8"), every one, never "+N more"; then how changes were tested."""
        lines = []
        for s in self.sides:
            where = f"{s['run_dir']}, {s['id'][:8]}" if s["id"] else s["run_dir"]
            lines.append(f"{s['letter']} = {s['label']} ({where}; {s['cells']} cells; {s['status'].upper()})"
                         + (", the baseline" if s is self.sides[0] else ""))
            if s["adopted"]:
                lines.append(f"{s['letter']}'s base model: {s['base']}")
            lines += [f"{s['letter']} is {s['status'].upper()}: {reason}; its verdicts are not findings"
                      for reason in s["reasons"]]
        for name, values in self.differs.items():
            lines.append(f"{name}: " + ", ".join(f"{s['letter']} {v}" for s, v in zip(self.sides, values)))
        if not self.differs:
            lines.append("no recorded setting differs between them")
        return lines + [self._tested()]

    def _tested(self) -> str:
        counts = {test: sum(r["test"] == test for r in self.rows) for test in (SHARED, "paired", "Welch")}
        return (f"changes from A: {counts[SHARED]} shared (the same cells on both sides: not tested, not in Holm's "
                f"correction), {counts['paired']} paired over the same seeds, {counts['Welch']} by Welch (other "
                f"seeds); Holm-corrected over each side's changes")

    def tables(self) -> list:
        """The comparison as Table blocks: per mode and fill, the accuracies (each side's mean [interval],
        verdict, and change from A), then the AUCs."""
        out = []
        for measure in ("accuracy", "auc"):
            by_slot = defaultdict(lambda: defaultdict(dict))  # (mode, fill) -> (fraction, method) -> side -> row
            for r in self.rows:
                if r["measure"] == measure:
                    by_slot[(r["mode"], r["fill"])][(r["fraction"], r["method"])][r["side"]] = r
            for (mode, fill), cells in sorted(by_slot.items(), key=lambda kv: (mode_order(kv[0][0]), kv[0][1] or "")):
                header = (["fraction"] if measure == "accuracy" else []) + ["method"]
                header += [f"{s['letter']} {'accuracy' if measure == 'accuracy' else 'AUC'} [95%]" for s in self.sides]
                if measure == "accuracy" and mode in MODES:
                    header += [f"{s['letter']} verdict" for s in self.sides]
                header += [f"{s['letter']} - A (points) [95%], p Holm" for s in self.sides[1:]]
                rows = []
                for (fraction, method), by_side in sorted(cells.items(), key=lambda kv: (kv[0][0] or 0,
                                                                                         method_order(kv[0][1]))):
                    row = ([f"{fraction:.0%}"] if measure == "accuracy" else []) + [method]
                    row += [_mean_text(by_side.get(i)) for i in range(len(self.sides))]
                    if measure == "accuracy" and mode in MODES:
                        row += [self._verdict_text(by_side.get(i), i) for i in range(len(self.sides))]
                    row += [_change_text(by_side.get(i)) for i in range(1, len(self.sides))]
                    rows.append(row)
                what = "Test accuracy" if measure == "accuracy" else "AUC (accuracy averaged over the fractions run)"
                out.append(Table(f"{what}, {title_fill(mode, fill)}", header, rows))
        return out

    def _verdict_text(self, row: dict | None, side: int) -> str:
        verdict = (row or {}).get("verdict") or "-"
        return verdict if verdict == "-" or self.sides[side]["findings"] else f"{verdict} (not a finding)"

    def write(self, out_dir) -> list[Path]:
        """Writes compare.md, compare.csv and compare.json into out_dir (made if missing); returns their paths.
        A refused write is one line (UserError)."""
        out_dir = Path(out_dir)
        try:
            out_dir.mkdir(parents=True, exist_ok=True)
            check_writable(out_dir, 0, "--out")
            paths = [out_dir / name for name in COMPARE_FILES]
            legend = "\n".join(f"- {line}" for line in self.legend() + [f"note: {n}" for n in self.notes])
            markdown = markdown_document(self.tables(), "roarfast comparison")
            title, _, rest = markdown.partition("\n\n")
            paths[0].write_text(f"{title}\n\n{legend}\n\n{rest}")
            with open(paths[1], "w", newline="") as f:
                writer = csv.DictWriter(f, fieldnames=CSV_COLUMNS, extrasaction="ignore")
                writer.writeheader()
                writer.writerows(self.rows)
            paths[2].write_text(json.dumps(self.to_dict(), indent=1, sort_keys=True))
        except OSError as err:
            if not is_write_refused(err):
                raise
            raise write_error(err, err.filename or out_dir) from None
        return paths


def compare(run_dirs, configs=()) -> Comparison:
    """Compares configurations side by side. `run_dirs`: one run directory (or a list of one) with `configs`,
    two or more of its configurations (labels, ids or id prefixes, as `report --config` takes them; none: every
    one with finished cells); or several run directories, each with its latest request's configuration, or
    with `configs` one per run directory. The first is the baseline. Raises UserError (one line) for fewer than
    two sides, an unknown or ambiguous name, or a run directory without finished cells."""
    run_dirs = [run_dirs] if isinstance(run_dirs, (str, Path)) else list(run_dirs)
    configs = [configs] if isinstance(configs, str) else list(configs or ())
    if not run_dirs:
        raise UserError("compare: name a run directory (with two or more configurations) or several")
    if len(run_dirs) == 1:
        sides = _sides_of_one(RunDir(run_dirs[0]), configs)
    else:
        if configs and len(configs) != len(run_dirs):
            raise UserError(f"compare: {len(run_dirs)} run directories and {len(configs)} --config: give none "
                            f"(each one's latest request) or one per run directory, in their order")
        sides = [_side_of(RunDir(d), configs[i] if configs else None) for i, d in enumerate(run_dirs)]
    return _compare(sides, several=len(run_dirs) > 1)


def _sides_of_one(run: RunDir, configs: list) -> list:
    loaded = load_run(run, select=ALL)
    parts = {id(p.configuration): p for p in loaded.parts}
    found = [p.configuration for p in loaded.parts]
    chosen = [named(found, c) for c in configs] if configs else found
    if len({id(c) for c in chosen}) < len(chosen):
        raise UserError(f"compare: --config {', '.join(configs)} name one configuration more than once")
    if len(chosen) < 2:
        held = "; ".join(f"{c.id[:8]} [{c.label}]" if c.label else c.id[:8] for c in found)
        if configs:
            raise UserError(f"compare: --config {configs[0]} names one configuration of {run.root}, which holds "
                            f"{len(found)} with finished cells ({held}): give --config for two or more (the first "
                            f"the baseline), or none to compare every one")
        raise UserError(f"compare: {run.root} holds one configuration with finished cells ({held}); compare it with "
                        f"another run directory, or make another configuration (`roarfast ls` lists them)")
    return [(run, parts[id(c)]) for c in chosen]


def _side_of(run: RunDir, config: str | None) -> tuple:
    loaded = load_run(run, select=config)
    if len(loaded.parts) > 1:
        labels = "; ".join(p.configuration.label for p in loaded.parts)
        raise UserError(f"compare: {run.root} holds several configurations and no latest request ({labels}): "
                        f"name one per run directory with --config")
    return run, loaded.parts[0]


def _compare(sides: list, several: bool) -> Comparison:
    summaries = [measured(part) for _, part in sides]
    groups = [cell_groups(part.cells) for _, part in sides]
    labels = _labels(sides, several)
    info = []
    for i, ((run, part), summary) in enumerate(zip(sides, summaries)):
        c, base = part.configuration, summary["base"]
        info.append({"label": labels[i], "letter": LETTERS[i % len(LETTERS)], "run_dir": str(run.root),
                     "id": c.id if c is not None else "", "configuration": c.label if c is not None else "",
                     "cells": len(part.cells), "base_test_acc": base.get("test_acc"), "chance": summary["chance"],
                     "status": summary["status"], "reasons": summary["reasons"], "findings": findings(summary),
                     "adopted": base.get("adopted"),
                     "base": f"{base_text(base)}: test {pct(base.get('test_acc'))}"})
    notes = []
    rows = accuracy_rows(groups, summaries, labels) + auc_rows(groups, labels, notes)
    holm(rows)
    differs = _differs(sides, several)
    # not a setting of a configuration (a done cell stays done under another count), but CPU accuracies depend on it
    threads = [", ".join(map(str, sorted({c["threads"] for c in part.cells if c["threads"] is not None}))) or "-"
               for _, part in sides]
    if len(set(threads)) > 1:
        differs["CPU threads per cell"] = threads
        notes.append("the sides' cells trained with other CPU thread counts, on which CPU accuracies depend: a change "
                     "may be theirs alone (docs/concepts/training.md, \"Thread counts\")")
    return Comparison(info, differs, rows, notes)


def _labels(sides: list, several: bool) -> list:
    """Each side's label: its configuration's (one run directory), or its run directory's name with its
    configuration's label, where it has one (several); told apart by the whole path where names repeat."""
    if not several:
        return [part.configuration.label or part.configuration.id[:8] for _, part in sides]
    names = [run.root.name for run, _ in sides]
    out = []
    for (run, part), name in zip(sides, names):
        text = name if names.count(name) == 1 else str(run.root)
        label = part.configuration.label if part.configuration is not None else ""
        out.append(f"{text} [{label}]" if label else text)
    return out


def _described(c) -> dict:
    """{display name: value} of a side's configuration, as its label and `ls --long` name them (labels.describe);
    rows no record claims: their flattened settings."""
    if c is None:
        return {}
    return describe(c.record) if c.record is not None else flatten(c.settings or {})


def _differs(sides: list, several: bool) -> dict:
    """{setting: [value per side, as labels write it]} of every recorded setting whose value differs."""
    flat = [_described(part.configuration) for _, part in sides]
    names = sorted({n for f in flat for n in f})
    out = {"run directory": [str(run.root) for run, _ in sides]} if several else {}
    for name in names:
        values = [f.get(name) for f in flat]
        if len({repr(v) for v in values}) > 1:
            out[name] = ["-" if v is None else short(v) for v in values]
    return out


def _mean_text(row: dict | None) -> str:
    return "-" if row is None else interval_text(row)


def _change_text(row: dict | None) -> str:
    if row is None or row["change"] is None:
        return "-"
    if row["test"] == SHARED:
        return "shared (the same cells)"
    points = f"{100 * row['change']:+.1f}"
    if row["change_low"] is None:
        return f"{points} (1 seed)"
    shared = f"; {row['shared_seeds']} shared seed(s) left out" if row["shared_seeds"] else ""
    return (f"{points} [{100 * row['change_low']:+.1f}, {100 * row['change_high']:+.1f}], {row['test']} "
            f"p={p_text(row['p_holm'])}{shared}")
