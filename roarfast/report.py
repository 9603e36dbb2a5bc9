"""The report stage (DESIGN.md section 10): tables, figures and verdicts from a run directory.

Reads only `results.sqlite`, the base checkpoint's meta.json, `stages.json` (when a sweep wrote it),
the rank store and the dataset (for the example images and chance), so it can be rerun at any time,
also while a sweep is writing. Writes `<run_dir>/report/`: index.md, a self-contained index.html,
cells.csv, summary.json and the PNG figures.

From Python: `report = write_report(run_dir)`; `report.index_html`, `report.verdict_lines()`,
`report.summary`.
"""

import base64
import csv
import html
import json
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from roarfast import report_extras, stats
from roarfast.errors import UserError

MODES = ("roar", "kar")
CONTROL_MODE = {"roar": "roar-mask", "kar": "kar-mask"}
KNOWN_MODES = (*MODES, *CONTROL_MODE.values())
DEFAULT_FILL = "dataset-mean"
BASE_ESTIMATORS = ("grad", "ig", "gb")
ENSEMBLES = ("sg", "sg-sq", "var")
LOWER_IS_BETTER = {"roar": True, "kar": False}
AXIS = {"roar": "fraction of pixels removed (%)", "kar": "fraction of pixels kept (%)"}
EXAMPLE_INDEX = 0  # the test image drawn in the example grid
FIGURE_DPI = 110


@dataclass
class Report:
    """A written report: where it is and what it says (`summary` is summary.json's content)."""

    out_dir: Path
    summary: dict
    files: list = field(default_factory=list)

    @property
    def index_html(self) -> Path:
        return self.out_dir / "index.html"

    def verdict_lines(self) -> list[str]:
        """One line per estimator x mode x fraction verdict (leaky cells say so in it), a line per leaky
        control of random, and a ranking line per mode and fill."""
        return verdict_lines(self.summary)


def write_report(run_dir, out_dir=None) -> Report:
    """Reads the run directory, writes the report under out_dir (default <run_dir>/report) and returns it.

    Raises UserError, writing nothing, when the run directory has no results.sqlite or no finished cells.
    """
    run_dir = Path(run_dir)
    cells, notes = load_cells(run_dir)
    context = load_context(run_dir, notes)
    summary = summarize(cells, context, notes)
    summary["no_retrain"] = report_extras.no_retrain(_done_rows(run_dir))
    summary["fill_leakage"] = report_extras.fill_leakage(run_dir)
    out_dir = Path(out_dir) if out_dir is not None else run_dir / "report"
    out_dir.mkdir(parents=True, exist_ok=True)
    files = _write_figures(summary, cells, run_dir, context, out_dir)
    summary["figures"] = files
    _write_csv(cells, out_dir / "cells.csv")
    (out_dir / "summary.json").write_text(json.dumps(summary, indent=1, sort_keys=True))
    (out_dir / "index.md").write_text(render_markdown(summary))
    (out_dir / "index.html").write_text(render_html(summary, out_dir))
    return Report(out_dir, summary, [f["file"] for f in files] + ["cells.csv", "summary.json", "index.md",
                                                                    "index.html"])


# ---------------------------------------------------------------------------------------------- inputs

def _done_rows(run_dir: Path) -> list[dict]:
    from roarfast.results import ResultsDB

    with ResultsDB(run_dir / "results.sqlite") as db:
        return db.rows(status="done")


def load_cells(run_dir: Path) -> tuple[list[dict], list[str]]:
    """The finished cells of known modes, one per (method, mode, fraction, seed, fill): the newest when
    several configuration hashes hold the same cell. Returns (cells, notes about what was dropped)."""
    path = run_dir / "results.sqlite"
    if not path.is_file():  # checked first: opening the database would create it
        raise UserError(f"no results.sqlite in {run_dir}: run `roarfast retrain` or `roarfast sweep` first "
                        f"(--run-dir names the run directory)")
    rows = _done_rows(run_dir)
    if not rows:
        raise UserError(f"no finished cells in {path}: run `roarfast retrain` or `roarfast sweep` first")
    notes = []
    unknown = sorted({r["mode"] for r in rows if r["mode"] not in (*KNOWN_MODES, *report_extras.EVALUATE_MODES)})
    if unknown:
        notes.append(f"rows of modes this report does not read were left out: {', '.join(unknown)}")
    newest = {}
    replaced = 0
    for row in rows:
        if row["mode"] not in KNOWN_MODES:
            continue
        control = row["mode"] not in MODES
        fill = None if control else (row["extra"] or {}).get("fill", DEFAULT_FILL)
        cell = {"method": row["method"], "mode": row["mode"], "fraction": row["fraction"], "seed": row["seed"],
                "fill": fill, "test_acc": row["test_acc"], "val_acc": row["val_acc"], "epochs": row["epochs"],
                "seconds": row["seconds"], "dataset": row["dataset"], "model": row["model"],
                "config_hash": row["config_hash"], "finished": row["finished"]}
        key = (cell["method"], cell["mode"], cell["fraction"], cell["seed"], fill)
        if key in newest:
            replaced += 1
            if cell["finished"] <= newest[key]["finished"]:
                continue
        newest[key] = cell
    if replaced:
        notes.append(f"{replaced} result(s) of cells run under several configurations (config hashes) were "
                     f"set aside: the newest of each cell is reported")
    if not newest:
        raise UserError(f"no finished cells of modes {', '.join(KNOWN_MODES)} in {path}")
    cells = sorted(newest.values(), key=lambda c: (_mode_order(c["mode"]), c["fill"] or "", _method_order(c["method"]),
                                                   c["fraction"], c["seed"]))
    for c in cells:
        c["control_acc"] = None
    controls = {(c["method"], c["mode"], c["fraction"], c["seed"]): c["test_acc"] for c in cells
                if c["mode"] not in MODES}
    for c in cells:
        if c["mode"] in MODES:
            c["control_acc"] = controls.get((c["method"], CONTROL_MODE[c["mode"]], c["fraction"], c["seed"]))
    return cells, notes


def _method_order(method: str) -> tuple:
    return (method != "random", method)


def _mode_order(mode: str) -> int:
    return KNOWN_MODES.index(mode)


@dataclass
class Context:
    """What the report knows besides the cells: the base model, chance, test-split size, stage times,
    and the opened dataset (None when it could not be opened; the note says why)."""

    meta: dict
    chance: float | None
    chance_source: str
    n_test: int | None
    stages: list
    dataset: object = None


def load_context(run_dir: Path, notes: list) -> Context:
    meta_path = run_dir / "checkpoints" / "base" / "meta.json"
    meta = json.loads(meta_path.read_text()) if meta_path.is_file() else {}
    if not meta:
        notes.append(f"no base checkpoint meta ({meta_path}): base accuracy unknown")
    from roarfast.rundir import DATASET_FILE, open_dataset

    ds = None
    if not (run_dir / DATASET_FILE).is_file():  # never guess the dataset: chance and the grid would be wrong
        notes.append(f"no {DATASET_FILE} in the run directory: chance from the class count, no example images")
    else:
        try:
            ds = open_dataset(run_dir)
        except UserError as err:
            notes.append(f"dataset not opened ({err}): chance from the class count, no example images")
    if ds is not None:
        import torch

        labels = ds.test.labels
        chance = float(torch.bincount(labels).max()) / len(labels)
        source = "share of the test split's most frequent class"
        n_test = len(ds.test)
    else:
        num_classes = meta.get("num_classes")
        chance = 1.0 / num_classes if num_classes else None
        source = "1 / number of classes" if num_classes else "unknown (no dataset, no base meta)"
        n_test = None
    return Context(meta, chance, source, n_test, _stage_times(run_dir, meta), ds)


def _stage_times(run_dir: Path, meta: dict) -> list:
    """[{stage, seconds, source}]: from stages.json when a sweep wrote it, else what the run directory
    holds (the base model's training time; the sum of the cells' seconds is added by summarize)."""
    path = run_dir / "stages.json"
    if path.is_file():
        record = json.loads(path.read_text())
        rows = []
        for stage, value in record.items():
            if isinstance(value, dict):
                rows.extend({"stage": f"{stage} {name}", "seconds": s, "source": "stages.json"}
                            for name, s in value.items())
            else:
                rows.append({"stage": stage, "seconds": value, "source": "stages.json"})
        return rows
    rows = [{"stage": "train", "seconds": meta.get("seconds"), "source": "base checkpoint meta.json"}]
    rows.append({"stage": "extract", "seconds": None, "source": "not recorded (the rank store keeps no timings)"})
    return rows


# ------------------------------------------------------------------------------------------ statistics

def summarize(cells: list, context: Context, notes: list) -> dict:
    """Everything the report shows, JSON-able: groups (mean and interval per method x mode x fill x
    fraction), leakage per control, verdicts against random, rankings by AUC, base model, chance, stages."""
    accs = defaultdict(dict)  # (method, mode, fill, fraction) -> {seed: acc}
    for c in cells:
        accs[(c["method"], c["mode"], c["fill"], c["fraction"])][c["seed"]] = c["test_acc"]
    groups = []
    for (method, mode, fill, fraction), by_seed in accs.items():
        interval = stats.t_interval(list(by_seed.values()))
        groups.append({"method": method, "mode": mode, "fill": fill, "fraction": fraction,
                       "seeds": sorted(by_seed), **interval.to_dict()})
    leakage = _leakage(accs, context)
    verdicts = _verdicts(accs, leakage)
    rankings = _rankings(accs)
    stages = list(context.stages)
    if not any(s["source"] == "stages.json" for s in stages):
        for label, control in (("retrain (sum of cells)", False), ("controls (sum of cells)", True)):
            seconds = [c["seconds"] for c in cells if (c["mode"] not in MODES) == control]
            if seconds:
                stages.append({"stage": label, "seconds": sum(seconds), "source": "results.sqlite"})
    fills = sorted({c["fill"] for c in cells if c["fill"] is not None})
    meta = context.meta
    return {
        "datasets": sorted({c["dataset"] for c in cells}),
        "models": sorted({c["model"] for c in cells}),
        "fills": fills,
        "base": {k: meta.get(k) for k in ("model", "dataset", "test_acc", "val_acc", "seconds", "num_classes")},
        "chance": context.chance,
        "chance_source": context.chance_source,
        "n_test": context.n_test,
        "alpha": stats.ALPHA,
        "leak_margin": stats.LEAK_MARGIN,
        "tests": {"interval": stats.T_INTERVAL, "verdict": stats.WELCH, "ranking": stats.AUC_TEXT,
                  "leakage": f"{stats.LEAK_T}; with one seed or no spread: {stats.LEAK_BINOMIAL}; leaky when "
                             f"p < {stats.ALPHA} and the control beats chance by >= {stats.LEAK_MARGIN:.0%}",
                  "degenerate": "no spread in both groups: equal means give p = 1, different means p = 0"},
        "groups": sorted(groups, key=lambda g: (_mode_order(g["mode"]), g["fill"] or "", _method_order(g["method"]),
                                                g["fraction"])),
        "leakage": leakage,
        "verdicts": verdicts,
        "rankings": rankings,
        "stages": stages,
        "notes": notes,
    }


def _leakage(accs: dict, context: Context) -> list:
    """Per control group (method, control mode, fraction): its mean, interval and leak test against chance."""
    out = []
    for (method, mode, _fill, fraction), by_seed in sorted(accs.items(), key=lambda kv: (
            _mode_order(kv[0][1]), _method_order(kv[0][0]), kv[0][3])):
        if mode in MODES:
            continue
        values = list(by_seed.values())
        interval = stats.t_interval(values)
        entry = {"method": method, "mode": mode, "fraction": fraction, **interval.to_dict(),
                 "chance": context.chance, "test": None, "p": None, "leaky": None}
        needs_n = len(values) < 2 or len(set(values)) == 1
        if context.chance is None:
            entry["test"] = "none: chance unknown"
        elif needs_n and context.n_test is None:
            entry["test"] = "none: one seed and the test split's size is unknown"
        else:
            result = stats.leak_test(values, context.chance, context.n_test or 0)
            entry.update(test=result.test, p=result.p, leaky=result.leaky)
        out.append(entry)
    return out


def _verdicts(accs: dict, leakage: list) -> list:
    """Each estimator against random at every (mode, fill, fraction), Holm-corrected over the
    estimators tested there."""
    controls = {(e["method"], e["mode"], e["fraction"]): e for e in leakage}
    out = []
    slots = sorted({(mode, fill, fraction) for (_m, mode, fill, fraction) in accs if mode in MODES},
                   key=lambda slot: (_mode_order(slot[0]), *slot[1:]))
    for mode, fill, fraction in slots:
        random = accs.get(("random", mode, fill, fraction))
        entries = []
        for (method, m, f, fr), by_seed in accs.items():
            if (m, f, fr) != (mode, fill, fraction) or method == "random":
                continue
            values = list(by_seed.values())
            entry = {"method": method, "mode": mode, "fill": fill, "fraction": fraction,
                     "mean": sum(values) / len(values), "n": len(values),
                     "random_mean": None, "n_random": 0, "p": None, "p_holm": None}
            if random is None:
                entry["verdict"] = "no verdict drawn (random was not run here)"
            else:
                rv = list(random.values())
                entry.update(random_mean=sum(rv) / len(rv), n_random=len(rv))
                if len(values) < 2 or len(rv) < 2:
                    entry["verdict"] = "no verdict drawn (one seed)"
                else:
                    entry["p"] = stats.welch_p(values, rv)
            control = controls.get((method, CONTROL_MODE[mode], fraction))
            entry["control"] = None if control is None else {k: control[k] for k in ("mean", "n", "p", "leaky")}
            entries.append(entry)
        tested = [e for e in entries if e["p"] is not None]
        for e, p_holm in zip(tested, stats.holm([e["p"] for e in tested])):
            e["p_holm"] = p_holm
            e["verdict"] = stats.verdict(e["mean"], e["random_mean"], p_holm, LOWER_IS_BETTER[mode])
        out.extend(sorted(entries, key=lambda e: _method_order(e["method"])))
    return out


def _rankings(accs: dict) -> list:
    """Per (mode, fill): each method's per-seed AUC over every fraction run in that mode and fill, mean and
    interval over the seeds that have them all; sorted best first. A method lacking a fraction (a sweep
    still running) is listed as incomplete rather than ranked over a shorter curve."""
    out = []
    for mode, fill in sorted({(m, f) for (_x, m, f, _fr) in accs if m in MODES}, key=lambda t: (_mode_order(t[0]), t[1])):
        by_method = defaultdict(dict)  # method -> fraction -> {seed: acc}
        for (method, m, f, fraction), by_seed in accs.items():
            if (m, f) == (mode, fill):
                by_method[method][fraction] = by_seed
        fractions = sorted({fr for curves in by_method.values() for fr in curves})
        entries, incomplete = [], []
        for method, curves in sorted(by_method.items(), key=lambda kv: _method_order(kv[0])):
            seeds = set.intersection(*(set(curves.get(fr, {})) for fr in fractions))
            if not seeds:
                incomplete.append(method)
                continue
            aucs = [stats.curve_auc(fractions, [curves[fr][s] for fr in fractions]) for s in sorted(seeds)]
            entries.append({"method": method, **stats.t_interval(aucs).to_dict()})
        entries.sort(key=lambda e: e["mean"] if LOWER_IS_BETTER[mode] else -e["mean"])
        out.append({"mode": mode, "fill": fill, "fractions": fractions, "lower_is_better": LOWER_IS_BETTER[mode],
                    "entries": entries, "incomplete": incomplete})
    return out


# -------------------------------------------------------------------------------------------- text

def _pct(value) -> str:
    return "-" if value is None else f"{value:.1%}"


def _p(value) -> str:
    return "-" if value is None else (f"{value:.2g}" if value >= 1e-4 else f"{value:.1e}")


def _where(summary: dict, mode: str, fill: str | None, fraction: float) -> str:
    """"ROAR 50%" (with the fill when the run holds another than the default)."""
    show_fill = fill is not None and (len(summary["fills"]) > 1 or fill != DEFAULT_FILL)
    return f"{mode.upper()} {fraction:.0%}" + (f" [{fill}]" if show_fill else "")


def _control_text(summary: dict, entry: dict) -> str:
    control = entry.get("control")
    if control is None:
        return "no control"
    if control["leaky"]:
        return (f"LEAKY: its mask-only control reaches {_pct(control['mean'])} (chance {_pct(summary['chance'])}, "
                f"p={_p(control['p'])}), so this accuracy partly measures the removal pattern's shape rather "
                f"than the removed information")
    if control["leaky"] is None:
        return f"control {_pct(control['mean'])} (not tested)"
    return f"control {_pct(control['mean'])}, not leaky"


def verdict_lines(summary: dict) -> list[str]:
    lines = []
    for e in summary["verdicts"]:
        where = _where(summary, e["mode"], e["fill"], e["fraction"])
        numbers = f"{_pct(e['mean'])} vs random {_pct(e['random_mean'])}"
        if e["p"] is not None:
            numbers += f", Welch p={_p(e['p'])}, Holm p={_p(e['p_holm'])}"
        else:
            numbers += f", seeds {e['n']} vs {e['n_random']}"
        lines.append(f"{where} {e['method']}: {e['verdict']} ({numbers}); {_control_text(summary, e)}")
    for leak in summary["leakage"]:
        if leak["method"] == "random" and leak["leaky"]:
            lines.append(f"{leak['mode'].upper()} {leak['fraction']:.0%} random: LEAKY control "
                         f"{_pct(leak['mean'])} (chance {_pct(summary['chance'])}, p={_p(leak['p'])})")
    for r in summary["rankings"]:
        if not r["entries"]:
            continue
        order = " < " if r["lower_is_better"] else " > "
        ranked = order.join(f"{e['method']} {_pct(e['mean'])}" for e in r["entries"])
        span = f"{r['fractions'][0]:.0%}-{r['fractions'][-1]:.0%}"
        fill = f" [{r['fill']}]" if len(summary["fills"]) > 1 or r["fill"] != DEFAULT_FILL else ""
        better = "lower" if r["lower_is_better"] else "higher"
        missing = f"; not ranked (a fraction or seed missing): {', '.join(r['incomplete'])}" if r["incomplete"] else ""
        lines.append(f"ranking {r['mode'].upper()}{fill} (AUC over {span}, {better} is better): {ranked}{missing}")
    return lines


def _interval_text(g: dict) -> str:
    if g["low"] is None:
        return f"{_pct(g['mean'])} (1 seed)"
    return f"{_pct(g['mean'])} [{g['low']:.1%}, {g['high']:.1%}]"


def _seeds_text(ns) -> str:
    return f"{min(ns)}" if min(ns) == max(ns) else f"{min(ns)}-{max(ns)}"


def _title_fill(mode: str, fill) -> str:
    return f"{mode.upper()} (mask-only control)" if fill is None else f"{mode.upper()} (fill {fill})"


def _sections(summary: dict) -> list[tuple]:
    """The report's content in reading order: ("table", title, header, rows), ("figure", file, title) and
    ("lines", title, lines); index.md and index.html render the same list."""
    base = summary["base"]
    figures = {kind: [f for f in summary.get("figures", []) if f["kind"] == kind]
               for kind in ("accuracy", "ensembles", "controls", "examples")}
    n_cells = sum(len(g["seeds"]) for g in summary["groups"])
    run = [["dataset", ", ".join(summary["datasets"])], ["model", ", ".join(summary["models"])],
           ["base model test / validation accuracy", f"{_pct(base['test_acc'])} / {_pct(base['val_acc'])}"],
           ["chance", f"{_pct(summary['chance'])} ({summary['chance_source']})"],
           ["test images", "-" if summary["n_test"] is None else str(summary["n_test"])],
           ["fills", ", ".join(summary["fills"]) or "-"], ["finished cells (with controls)", str(n_cells)],
           ["leaky cells", str(sum(bool((e.get("control") or {}).get("leaky")) for e in summary["verdicts"]))]]
    out = [("table", "Run", ["", ""], run)]
    for r in summary["rankings"]:
        span = f"{r['fractions'][0]:.0%}-{r['fractions'][-1]:.0%}" if r["fractions"] else "-"
        better = "lower" if r["lower_is_better"] else "higher"
        rows = [[str(i + 1), e["method"], _interval_text(e), str(e["n"])] for i, e in enumerate(r["entries"])]
        rows += [["-", m, "not ranked: a fraction or seed missing", "-"] for m in r["incomplete"]]
        out.append(("table", f"Ranking, {_title_fill(r['mode'], r['fill'])}: AUC over {span}, {better} is better",
                    ["rank", "method", "AUC [95% interval]", "seeds"], rows))
    out += [("figure", f["file"], f["title"]) for f in figures["accuracy"]]
    by_verdict = defaultdict(list)
    for e in summary["verdicts"]:
        by_verdict[(e["mode"], e["fill"])].append(e)
    for (mode, fill), entries in by_verdict.items():
        fractions = sorted({e["fraction"] for e in entries})
        cells = {(e["method"], e["fraction"]): e for e in entries}
        methods = sorted({e["method"] for e in entries}, key=_method_order)
        rows = [[m] + [_verdict_cell(cells.get((m, f))) for f in fractions] for m in methods]
        out.append(("table", f"Verdict against random, {_title_fill(mode, fill)} (Holm-corrected p)",
                    ["method"] + [f"{f:.0%}" for f in fractions], rows))
    by_control = defaultdict(list)
    for e in summary["leakage"]:
        by_control[e["mode"]].append(e)
    for mode, entries in by_control.items():
        fractions = sorted({e["fraction"] for e in entries})
        cells = {(e["method"], e["fraction"]): e for e in entries}
        methods = sorted({e["method"] for e in entries}, key=_method_order)
        rows = [[m] + [_leak_cell(cells.get((m, f))) for f in fractions] for m in methods]
        cell_mode = next(m for m, c in CONTROL_MODE.items() if c == mode)
        title = (f"Mask-only controls of the {cell_mode.upper()} cells: accuracy against chance "
                 f"({_pct(summary['chance'])}), one-sided p")
        out.append(("table", title, ["method"] + [f"{f:.0%}" for f in fractions], rows))
    out += [("figure", f["file"], f["title"]) for f in figures["controls"]]
    by_slot = defaultdict(list)
    for g in summary["groups"]:
        by_slot[(g["mode"], g["fill"])].append(g)
    for (mode, fill), groups in by_slot.items():
        fractions = sorted({g["fraction"] for g in groups})
        cells = {(g["method"], g["fraction"]): g for g in groups}
        methods = sorted({g["method"] for g in groups}, key=_method_order)
        rows = [[m] + [_interval_text(cells[(m, f)]) if (m, f) in cells else "-" for f in fractions]
                + [_seeds_text([cells[(m, f)]["n"] for f in fractions if (m, f) in cells])] for m in methods]
        out.append(("table", f"Test accuracy, {_title_fill(mode, fill)}: mean [95% interval] over seeds",
                    ["method"] + [f"{f:.0%}" for f in fractions] + ["seeds"], rows))
    out += [("figure", f["file"], f["title"]) for f in figures["ensembles"] + figures["examples"]]
    out += report_extras.sections(summary)
    stage_rows = [[s["stage"], "-" if s["seconds"] is None else f"{s['seconds']:.1f}", s["source"]]
                  for s in summary["stages"]]
    out.append(("table", "Stage times", ["stage", "seconds", "source"], stage_rows))
    out.append(("lines", "All verdicts", verdict_lines(summary)))
    out.append(("lines", "Methods", _method_notes(summary)))
    if summary["notes"]:
        out.append(("lines", "Notes", summary["notes"]))
    return out


def _leak_cell(e: dict | None) -> str:
    if e is None:
        return "-"
    if e["leaky"] is None:
        return f"{_pct(e['mean'])} (not tested)"
    return f"{_pct(e['mean'])}" + (" LEAKY" if e["leaky"] else "") + f" (p={_p(e['p'])}, n={e['n']})"


def _verdict_cell(e: dict | None) -> str:
    if e is None:
        return "-"
    text = e["verdict"] if e["p"] is None else f"{e['verdict']} (p={_p(e['p_holm'])})"
    control = e.get("control")
    if control is None:
        return text + "; no control"
    return text + ("; LEAKY" if control["leaky"] else "")


def _method_notes(summary: dict) -> list[str]:
    tests = summary["tests"]
    return [f"Intervals: {tests['interval']}.",
            (f"Verdicts: {tests['verdict']} over the estimators compared at each mode and fraction, alpha "
             f"{summary['alpha']}; ROAR: lower accuracy than random is better, KAR: higher. {tests['degenerate']}. "
             f"With one seed on either side no verdict is drawn."),
            (f"Ranking: {tests['ranking']}, per seed, over every fraction run in that mode; a method lacking one "
             f"is not ranked."),
            (f"Leakage: {tests['leakage']}. A leaky cell's accuracy partly measures the removal pattern's shape "
             f"rather than the removed information.")]


def render_markdown(summary: dict) -> str:
    out = ["# roarfast report", ""]
    for section in _sections(summary):
        if section[0] == "table":
            _, title, header, rows = section
            out += [f"## {title}", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
            out += ["| " + " | ".join(str(c).replace("|", "/") for c in row) + " |" for row in rows]
        elif section[0] == "figure":
            _, name, title = section
            out += [f"## {title}", "", f"![{title}]({name})"]
        else:
            _, title, lines = section
            out += [f"## {title}", ""] + [f"- {line}" for line in lines]
        out.append("")
    return "\n".join(out)


_CSS = ("body{font-family:sans-serif;max-width:1250px;margin:2em auto;padding:0 1em;color:#222}"
        "table{border-collapse:collapse;margin:0.5em 0 1.5em}td,th{border:1px solid #ccc;padding:3px 8px;"
        "text-align:left;font-size:0.9em}th{background:#f0f0f0}tr:nth-child(even){background:#fafafa}"
        "img{max-width:100%;border:1px solid #ddd}li{margin:2px 0;font-size:0.92em}"
        ".leaky{color:#a00;font-weight:bold}h2{margin-top:1.4em}")


def render_html(summary: dict, out_dir: Path) -> str:
    """The report as one HTML page; figures embedded as base64 PNG data URIs."""
    esc = html.escape
    out = [("<!DOCTYPE html><html><head><meta charset='utf-8'><title>roarfast report</title>"
            f"<style>{_CSS}</style></head><body><h1>roarfast report</h1>")]
    for section in _sections(summary):
        if section[0] == "table":
            _, title, header, rows = section
            out.append(f"<h2>{esc(title)}</h2><table>")
            if any(header):
                out.append("<tr>" + "".join(f"<th>{esc(h)}</th>" for h in header) + "</tr>")
            for row in rows:
                out.append("<tr>" + "".join(f"<td{_leaky_class(c)}>{esc(str(c))}</td>" for c in row) + "</tr>")
            out.append("</table>")
        elif section[0] == "figure":
            _, name, title = section
            data = base64.b64encode((out_dir / name).read_bytes()).decode("ascii")
            out.append(f"<h2>{esc(title)}</h2><img alt='{esc(title)}' src='data:image/png;base64,{data}'>")
        else:
            _, title, lines = section
            items = "".join(f"<li{_leaky_class(line)}>{esc(line)}</li>" for line in lines)
            out.append(f"<details open><summary><h2 style='display:inline'>{esc(title)}</h2></summary>"
                       f"<ul>{items}</ul></details>")
    out.append("</body></html>")
    return "\n".join(out)


def _leaky_class(text) -> str:
    return " class='leaky'" if "LEAKY" in str(text) else ""


def _write_csv(cells: list, path: Path) -> None:
    columns = ["dataset", "model", "method", "mode", "fill", "fraction", "seed", "test_acc", "control_acc",
               "val_acc", "epochs", "seconds", "config_hash", "finished"]
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=columns, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(cells)


# ------------------------------------------------------------------------------------------ figures

def _write_figures(summary: dict, cells: list, run_dir: Path, context: Context, out_dir: Path) -> list:
    """Draws and saves every figure; returns [{file, title, kind}]."""
    plt = _pyplot()
    files = []

    def save(fig, name, title, kind):
        if fig is None:
            return
        fig.savefig(out_dir / name, dpi=FIGURE_DPI, bbox_inches="tight")
        plt.close(fig)
        files.append({"file": name, "title": title, "kind": kind})

    for fill in summary["fills"]:
        save(figure_accuracy(summary, fill), f"accuracy_{fill}.png",
             f"Test accuracy against the fraction of pixels removed (ROAR) or kept (KAR), fill {fill}", "accuracy")
        save(figure_ensembles(summary, fill), f"ensembles_{fill}.png",
             f"Base estimators against their SmoothGrad ensembles, fill {fill}", "ensembles")
    save(figure_controls(summary), "controls.png", "Each method's ROAR/KAR curve beside its mask-only control",
         "controls")
    from roarfast._extension import ExtensionError

    try:
        grid = example_grid(summary, context, run_dir)
    except (UserError, ExtensionError) as err:
        summary["notes"].append(f"example images not drawn: {err}")
        grid = None
    if grid is not None:
        save(figure_examples(*grid), "examples.png",
             f"Test image {EXAMPLE_INDEX} as retraining saw it (rows: methods; columns: mode and fraction)",
             "examples")
    return files


def _pyplot():
    """matplotlib.pyplot on the Agg backend: files only, no display needed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _groups(summary: dict, mode: str, fill) -> dict:
    """method -> sorted [(fraction, group)] of one mode and fill."""
    out = defaultdict(list)
    for g in summary["groups"]:
        if g["mode"] == mode and g["fill"] == fill:
            out[g["method"]].append((g["fraction"], g))
    return {m: sorted(v, key=lambda t: t[0]) for m, v in out.items()}


def _colors(summary: dict) -> dict:
    """method -> colour, the same in every figure: tab20's dark shades first, then its light ones."""
    import matplotlib

    palette = matplotlib.colormaps["tab20"].colors
    palette = palette[0::2] + palette[1::2]
    methods = sorted({g["method"] for g in summary["groups"]} - {"random"})
    return {m: palette[i % len(palette)] for i, m in enumerate(methods)}


def _draw_curve(ax, points, label, color=None, linestyle="-"):
    """One method's mean accuracy (%) against fraction (%), its 95% interval shaded where n >= 2."""
    x = [100 * f for f, _ in points]
    y = [100 * g["mean"] for _, g in points]
    (line,) = ax.plot(x, y, marker="o", markersize=4, label=label, color=color, linestyle=linestyle)
    spread = [(xi, 100 * g["low"], 100 * g["high"]) for xi, (_, g) in zip(x, points) if g["low"] is not None]
    if spread:
        xs, lo, hi = zip(*spread)
        ax.fill_between(xs, lo, hi, color=line.get_color(), alpha=0.15, linewidth=0)
    return line


def _draw_random(ax, points):
    """random as a grey band (its 95% interval; its mean alone with one seed) with a dashed mean."""
    x = [100 * f for f, _ in points]
    y = [100 * g["mean"] for _, g in points]
    lo = [100 * (g["low"] if g["low"] is not None else g["mean"]) for _, g in points]
    hi = [100 * (g["high"] if g["high"] is not None else g["mean"]) for _, g in points]
    ax.fill_between(x, lo, hi, color="0.6", alpha=0.35, linewidth=0, label="random, 95% interval")
    ax.plot(x, y, color="0.35", linestyle="--", label="random")


def _figure_legend(fig, axes) -> None:
    """One legend for all panels, right of them: every label drawn in any panel, once."""
    entries = {}
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            entries.setdefault(label, handle)
    fig.legend(list(entries.values()), list(entries), loc="outside right center", fontsize=8)


def _decorate(ax, summary, mode, title):
    if summary["chance"] is not None:
        ax.axhline(100 * summary["chance"], color="0.2", linestyle=":", linewidth=1, label="chance")
    if summary["base"].get("test_acc") is not None:
        ax.axhline(100 * summary["base"]["test_acc"], color="tab:green", linestyle="-.", linewidth=1,
                   label="base model (unmodified)")
    fractions = sorted({100 * g["fraction"] for g in summary["groups"] if g["mode"] in (mode, CONTROL_MODE[mode])})
    ax.set_xticks(fractions)
    ax.set_xlabel(AXIS.get(mode, "fraction (%)"))
    ax.set_ylabel("test accuracy (%)")
    ax.set_title(title)
    ax.set_ylim(0, 102)
    ax.grid(alpha=0.3)


def figure_accuracy(summary: dict, fill: str):
    """The paper's figure: a ROAR and a KAR panel, one line per estimator with its 95% interval, random as
    a shaded band. Returns the Figure (None when neither mode has cells with this fill)."""
    plt = _pyplot()

    modes = [m for m in MODES if _groups(summary, m, fill)]
    if not modes:
        return None
    colors = _colors(summary)
    fig, axes = plt.subplots(1, len(modes), figsize=(6.5 * len(modes) + 2.5, 4.8), squeeze=False,
                             layout="constrained")
    for ax, mode in zip(axes[0], modes):
        curves = _groups(summary, mode, fill)
        if "random" in curves:
            _draw_random(ax, curves["random"])
        for method in sorted(curves, key=_method_order):
            if method != "random":
                _draw_curve(ax, curves[method], method, colors[method])
        leaky = [e for e in summary["verdicts"] if (e["mode"], e["fill"]) == (mode, fill)
                 and (e.get("control") or {}).get("leaky")]
        if leaky:  # ringed: the control alone is above chance, the point partly measures the pattern's shape
            ax.scatter([100 * e["fraction"] for e in leaky], [100 * e["mean"] for e in leaky], s=160,
                       facecolors="none", edgecolors="black", linewidths=1.2, zorder=5,
                       label="leaky (mask-only control above chance)")
        _decorate(ax, summary, mode, f"{mode.upper()} (fill {fill})")
    _figure_legend(fig, axes.flat)
    fig.suptitle("Test accuracy after retraining; shaded: 95% t-interval over seeds")
    return fig


def _family(method: str) -> str | None:
    """The base estimator of a method of the SmoothGrad families (grad for sg-sq-grad), or None."""
    for base in BASE_ESTIMATORS:
        if method == base or any(method == f"{e}-{base}" for e in ENSEMBLES):
            return base
    return None


def figure_ensembles(summary: dict, fill: str):
    """Base estimators against their SG / SG-SQ / VAR ensembles: a panel per base estimator present (and
    mode), random as a band. None when no base estimator has an ensemble member in the results."""
    plt = _pyplot()

    modes = [m for m in MODES if _groups(summary, m, fill)]
    panels = []
    for base in BASE_ESTIMATORS:
        members = {m for mode in modes for m in _groups(summary, mode, fill) if _family(m) == base}
        if len(members) >= 2 or (members and base not in members):
            panels.append((base, sorted(members, key=lambda m: (m != base, m))))
    if not panels:
        return None
    colors = _colors(summary)
    fig, axes = plt.subplots(len(modes), len(panels), figsize=(5.2 * len(panels) + 2.5, 4.2 * len(modes)),
                             squeeze=False, layout="constrained")
    for row, mode in enumerate(modes):
        curves = _groups(summary, mode, fill)
        for col, (base, members) in enumerate(panels):
            ax = axes[row][col]
            if "random" in curves:
                _draw_random(ax, curves["random"])
            for method in members:
                if method in curves:
                    _draw_curve(ax, curves[method], method, colors[method])
            _decorate(ax, summary, mode, f"{base} and its ensembles, {mode.upper()}")
    _figure_legend(fig, axes.flat)
    fig.suptitle(f"Base estimators against SG / SG-SQ / VAR (fill {fill}); shaded: 95% t-interval over seeds")
    return fig


def figure_controls(summary: dict):
    """A panel per method and mode: its ROAR (KAR) curve per fill beside its mask-only control and chance.
    None when there are no controls."""
    plt = _pyplot()

    panels = []
    for mode in MODES:
        controls = _groups(summary, CONTROL_MODE[mode], None)
        panels += [(mode, method) for method in sorted(controls, key=_method_order)]
    if not panels:
        return None
    cols = min(4, len(panels))
    rows = -(-len(panels) // cols)
    leaky = {(e["method"], e["mode"]) for e in summary["leakage"] if e["leaky"]}
    fig, axes = plt.subplots(rows, cols, figsize=(4.3 * cols + 2.5, 3.6 * rows), squeeze=False,
                             layout="constrained")
    for ax in axes.flat[len(panels):]:
        ax.set_visible(False)
    for ax, (mode, method) in zip(axes.flat, panels):
        for fill in summary["fills"]:
            curve = _groups(summary, mode, fill).get(method)
            if curve:
                _draw_curve(ax, curve, f"{mode.upper()} ({fill})")
        _draw_curve(ax, _groups(summary, CONTROL_MODE[mode], None)[method], "mask-only control", color="tab:red",
                    linestyle="--")
        _decorate(ax, summary, mode, f"{method}, {mode.upper()}")
        if (method, CONTROL_MODE[mode]) in leaky:
            ax.set_title(f"{method}, {mode.upper()}: LEAKY control", color="firebrick")
    _figure_legend(fig, axes.flat)
    fig.suptitle("ROAR/KAR accuracy beside the mask-only control (trained on the removal pattern alone); "
                 "shaded: 95% t-interval over seeds")
    return fig


def example_grid(summary: dict, context: Context, run_dir: Path):
    """(images float ndarray[rows, cols, H, W, C] in [0, 1], row labels, column labels, fill name) of test image
    EXAMPLE_INDEX masked as retraining masked it (ops.mask_normalize, retrain.fill_values, then back to
    pixels), or None when there is nothing to draw. Raises UserError when the store or fill cannot serve."""
    import numpy as np
    import torch

    from roarfast import ops
    from roarfast.data.base import FileSet
    from roarfast.retrain import fill_values
    from roarfast.store import RankStore

    ds = context.dataset
    if ds is None or not summary["fills"]:
        return None
    if isinstance(ds.test, FileSet):
        raise UserError("the dataset is streamed from disk; the grid draws in-memory datasets only")
    fill_name = DEFAULT_FILL if DEFAULT_FILL in summary["fills"] else summary["fills"][0]
    fill = fill_values(fill_name, ds.mean, ds.std)
    columns = [(mode, f) for mode in MODES for f in sorted({g["fraction"] for g in summary["groups"]
                                                            if g["mode"] == mode and g["fill"] == fill_name})]
    store = RankStore(run_dir)
    stored = set(store.methods("test"))
    methods = sorted({g["method"] for g in summary["groups"] if g["mode"] in MODES} & stored, key=_method_order)
    if not methods or not columns:
        return None
    image = ds.test.images[EXAMPLE_INDEX:EXAMPLE_INDEX + 1]
    mean = torch.tensor(ds.mean).view(1, -1, 1, 1)
    std = torch.tensor(ds.std).view(1, -1, 1, 1)
    original = image.float().div(255)[0].permute(1, 2, 0).numpy()
    rows = []
    for method in methods:
        ranks = store.read(method, "test", dataset_fingerprint=ds.fingerprint).rows([EXAMPLE_INDEX])
        row = [original]
        for mode, fraction in columns:
            x = ops.mask_normalize(image, ranks, float(fraction), fill, mode == "kar", mean=ds.mean, std=ds.std)
            row.append((x * std + mean).clamp(0, 1)[0].permute(1, 2, 0).numpy())
        rows.append(row)
    labels = ["original"] + [f"{mode.upper()} {f:.0%}" for mode, f in columns]
    return np.stack([np.stack(r) for r in rows]), methods, labels, fill_name


def figure_examples(images, row_labels: list, col_labels: list, fill: str):
    """The example grid: rows = methods, columns = original then mode x fraction."""
    plt = _pyplot()

    rows, cols = images.shape[:2]
    fig, axes = plt.subplots(rows, cols, figsize=(1.35 * cols + 1.0, 1.4 * rows + 0.6), squeeze=False,
                             layout="constrained")
    for r in range(rows):
        for c in range(cols):
            ax = axes[r][c]
            picture = images[r, c]
            ax.imshow(picture[..., 0] if picture.shape[-1] == 1 else picture, cmap="gray" if picture.shape[-1] == 1
                      else None, vmin=0, vmax=1, interpolation="nearest")
            ax.set_xticks([])
            ax.set_yticks([])
            if r == 0:
                ax.set_title(col_labels[c], fontsize=8)
            if c == 0:
                ax.set_ylabel(row_labels[r], fontsize=8)
    fig.suptitle(f"One test image as retraining saw it (removed pixels take the fill: {fill})", fontsize=10)
    return fig
