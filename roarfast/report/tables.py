"""The tables a paper quotes, built once from the report's summary for tables.tex and tables.md (`roarfast report`
and `roarfast paper` write them through here, roarfast.report.latex setting them in LaTeX): per configuration, its
rankings, its verdicts against random and its test accuracies (the mask-only controls' too) with their intervals;
with several configurations, a combined table of every configuration's AUCs.

Each table's label is made of what it holds (tab:roarfast-<configuration id>-<kind>-<mode>-<fill>), so the same
table has the same label whichever command wrote it; its caption says what was measured and how; its notes carry
the study's status (roarfast.report.decisions), its warnings and what its marks mean. Markdown writers for the
report's page tables (roarfast.report.sections' Table) live here too (`roarfast compare`'s files).
"""

import re
from collections import defaultdict
from dataclasses import dataclass, field

from roarfast.modes import LOWER_IS_BETTER, cell_mode, is_control
from roarfast.report.analysis import (LEAK_INCONCLUSIVE, LEAK_STANDS, LEAKY_NO_VERDICT, findings, parts_of,
                                      shown_bounds)
from roarfast.report.decisions import status_note, status_word
from roarfast.report.load import method_order, mode_order
from roarfast.report.sections import Table
from roarfast.report.text import ranked_by, titled

#: what a mode does with the fraction of pixels
PIXELS = {"roar": "removed", "kar": "kept"}
#: a verdict cell's mark per leak reading of its mask-only control, and what it means (said in the notes)
LEAK_MARKS = {LEAK_STANDS: ("L", "its mask-only control is leaky, and the verdict stands despite the lift"),
              LEAK_INCONCLUSIVE: ("L?", "its mask-only control is leaky, which could explain the verdict"),
              LEAKY_NO_VERDICT: ("L", "its mask-only control is leaky")}
#: a verdict cell's mark where random is near chance (said in the notes)
NEAR_CHANCE_MARK = "c"


@dataclass(frozen=True)
class PaperTable:
    """A table a paper quotes. `rows`' cells are text, or a tuple of lines (stacked in LaTeX, joined in Markdown);
    `fixed`: how many leading columns (the row's names) a part repeats where the table is split by its columns."""

    label: str
    caption: str
    header: list
    rows: list
    notes: list = field(default_factory=list)
    fixed: int = 1


def paper_tables(summary: dict) -> list[PaperTable]:
    """Every table a paper quotes of the report's summary: each configuration's rankings, verdicts and accuracies;
    then, with several configurations, the combined AUC tables."""
    parts = parts_of(summary)
    several = len(parts) > 1
    out = []
    for part in parts:
        out += [_titled(t, part) for t in (*_rankings(part, several), *_verdicts(part, several, summary),
                                           *_accuracies(part, several))]
    return out + (_combined(parts) if several else [])


def label(*words, kind: str = "tab") -> str:
    """<kind>:roarfast-<words> (tab, fig), each word in a label's characters (lower-case letters, digits, '.', '-')."""
    return f"{kind}:roarfast-" + "-".join(re.sub(r"[^a-z0-9.]+", "-", str(w).lower()).strip("-") for w in words if w)


def _config_id(part: dict) -> str:
    return ((part.get("configuration") or {}).get("id") or "run")[:8]


def _of(part: dict, several: bool) -> str:
    """" Configuration [label] (id)." where the tables hold several."""
    c = part.get("configuration") or {}
    return f" Configuration {c.get('label') or _config_id(part)} ({_config_id(part)})." if several else ""


def _notes(part: dict) -> list:
    return [status_note(part), *(f"Warning: {w.rstrip('.')}." for w in part.get("warnings", []))]


def _finding(part: dict) -> str:
    """What a ranking or verdict caption opens with where the study's are not findings."""
    return "" if findings(part) else f"Not a finding (study {status_word(part)}): "


def _titled(table: PaperTable, part: dict) -> PaperTable:
    """Python objects shown by what they are (text.titled), in the cells and the caption."""
    rows = [[tuple(titled(x, part) for x in c) if isinstance(c, tuple) else titled(c, part) for c in r]
            for r in table.rows]
    return PaperTable(table.label, titled(table.caption, part), table.header, rows, table.notes, table.fixed)


def percent(value) -> str:
    return "-" if value is None else f"{100 * value:.1f}"


def interval(entry: dict) -> str | None:
    """"[83.0, 100.0]" (percent, clipped to accuracy's range as shown); None for one seed (the table's seeds say)."""
    low, high = shown_bounds(entry)
    return None if low is None else f"[{100 * low:.1f}, {100 * high:.1f}]"


def mean_interval(entry: dict):
    """A cell of a mean over its interval; the mean alone for one seed."""
    shown = interval(entry)
    return percent(entry["mean"]) if shown is None else (percent(entry["mean"]), shown)


def p_short(p: float) -> str:
    """A corrected p as a table prints it: two digits, "<0.001" below that."""
    return "<0.001" if p < 0.001 else f"={p:.2g}"


def _rankings(part: dict, several: bool) -> list:
    out = []
    for r in part["rankings"]:
        if not r["entries"]:
            continue
        measure = "AUC" if len(r["fractions"]) > 1 else "accuracy"
        what = (f"the area under each one's test-accuracy curve over {r['fractions'][0]:.0%}-{r['fractions'][-1]:.0%} "
                f"of pixels {PIXELS[r['mode']]} (the curve's mean height)" if len(r["fractions"]) > 1 else
                f"its test accuracy with {r['fractions'][0]:.0%} of pixels {PIXELS[r['mode']]}")
        rows = [[str(i + 1), e["method"], percent(e["mean"]), interval(e) or "-", str(e["n"])]
                for i, e in enumerate(r["entries"])]
        notes = _notes(part) + ([f"Not ranked (a fraction or seed missing): {', '.join(r['incomplete'])}."]
                                if r["incomplete"] else [])
        out.append(PaperTable(
            label(_config_id(part), "ranking", r["mode"], r["fill"]),
            f"{_finding(part)}{r['mode'].upper()} ranking of the estimators, fill {r['fill']}: {what} in percent, mean "
            f"and 95% t-interval over seeds, best first ({'lower' if r['lower_is_better'] else 'higher'} is better)."
            + _of(part, several),
            ["rank", "estimator", f"{measure} (%)", "95% interval", "seeds"], rows, notes, fixed=2))
    return out


def _verdicts(part: dict, several: bool, run: dict) -> list:
    """`run`: the run's summary, whose methods section says the tests."""
    by_slot = defaultdict(list)
    for e in part["verdicts"]:
        by_slot[(e["mode"], e["fill"])].append(e)
    out = []
    for (mode, fill), entries in sorted(by_slot.items(), key=lambda kv: (mode_order(kv[0][0]), kv[0][1] or "")):
        fractions = sorted({e["fraction"] for e in entries})
        cells = {(e["method"], e["fraction"]): e for e in entries}
        methods = sorted({e["method"] for e in entries}, key=method_order)
        rows = [[m] + [_verdict_cell(cells.get((m, f))) for f in fractions] for m in methods]
        marks = sorted({LEAK_MARKS[e["leak"]] for e in entries if e["leak"] in LEAK_MARKS})
        notes = _notes(part) + [f"{mark}: {meaning}." for mark, meaning in marks]
        if any(e["random_near_chance"] for e in entries):
            notes.append(f"{NEAR_CHANCE_MARK}: random is near chance there, which leaves little room for a verdict.")
        test = (run.get("tests") or {}).get("verdict") or "a two-sample test over seeds, Holm-corrected"
        out.append(PaperTable(
            label(_config_id(part), "verdicts", mode, fill),
            f"{_finding(part)}Each estimator against random under {mode.upper()}, fill {fill}, per fraction of pixels "
            f"{PIXELS[mode]}: {test} over the estimators compared at that fraction; a cell gives the verdict and "
            f"the corrected p (two digits)." + _of(part, several),
            ["estimator"] + [f"{f:.0%}" for f in fractions], rows, notes))
    return out


def _verdict_cell(e: dict | None):
    if e is None:
        return "-"
    verdict = e["verdict"].removesuffix(" than random")
    marks = ",".join(m for m in (LEAK_MARKS.get(e["leak"], ("",))[0],
                                 NEAR_CHANCE_MARK if e["random_near_chance"] else "") if m)
    if e["p_holm"] is None:
        head, _, why = verdict.partition(" (")
        return (head, f"({why}" + (f" {marks}" if marks else "")) if why else head
    return verdict, f"p{p_short(e['p_holm'])}" + (f" {marks}" if marks else "")


def _accuracies(part: dict, several: bool) -> list:
    by_slot = defaultdict(list)
    for g in part["groups"]:
        by_slot[(g["mode"], g["fill"])].append(g)
    out = []
    for (mode, fill), groups in sorted(by_slot.items(), key=lambda kv: (mode_order(kv[0][0]), kv[0][1] or "")):
        fractions = sorted({g["fraction"] for g in groups})
        cells = {(g["method"], g["fraction"]): g for g in groups}
        methods = sorted({g["method"] for g in groups}, key=method_order)
        rows = [[m] + [mean_interval(cells[(m, f)]) if (m, f) in cells else "-" for f in fractions]
                + [_seeds([cells[(m, f)]["n"] for f in fractions if (m, f) in cells])] for m in methods]
        what = (f"of the mask-only controls of the {cell_mode(mode).upper()} cells (a model trained on the removal "
                f"pattern alone; chance {percent(part['chance'])}%)" if is_control(mode) else
                f"after retraining under {mode.upper()}, fill {fill}")
        out.append(PaperTable(
            label(_config_id(part), "accuracy", mode, fill),
            f"Test accuracy (%) {what}, per fraction of pixels {PIXELS[cell_mode(mode)]}: mean and 95% t-interval "
            f"over seeds, clipped to [0, 100]." + _of(part, several),
            ["estimator"] + [f"{f:.0%}" for f in fractions] + ["seeds"], rows, _notes(part)))
    return out


def _lines(cell) -> tuple:
    return cell if isinstance(cell, tuple) else (cell,)


def _seeds(ns) -> str:
    return f"{min(ns)}" if min(ns) == max(ns) else f"{min(ns)}-{max(ns)}"


def _combined(parts: list) -> list:
    """Per mode and fill any configuration ranked, each estimator's AUC in each configuration (a column each,
    lettered; the letters said in the notes with each one's status) and its rank there."""
    letters = {id(p): chr(ord("A") + i) for i, p in enumerate(parts)}
    slots = sorted({(r["mode"], r["fill"]) for p in parts for r in p["rankings"] if r["entries"]},
                   key=lambda s: (mode_order(s[0]), s[1]))
    out = []
    for mode, fill in slots:
        ranked = {id(p): next((r for r in p["rankings"] if (r["mode"], r["fill"]) == (mode, fill)), None)
                  for p in parts}
        shown = [p for p in parts if ranked[id(p)] and ranked[id(p)]["entries"]]
        methods = sorted({e["method"] for p in shown for e in ranked[id(p)]["entries"]}, key=method_order)
        rows = []
        for method in methods:
            row = [method]
            for p in shown:
                entries = ranked[id(p)]["entries"]
                rank = next((i for i, e in enumerate(entries) if e["method"] == method), None)
                row.append("-" if rank is None else (*_lines(mean_interval(entries[rank])), f"rank {rank + 1}"))
            rows.append(row)
        notes = [f"{letters[id(p)]}: configuration {p['configuration'].get('label') or _config_id(p)} "
                 f"({_config_id(p)}), {ranked_by(ranked[id(p)]['fractions'])}. {status_note(p)}" for p in shown]
        better = "lower" if LOWER_IS_BETTER[mode] else "higher"
        out.append(PaperTable(
            label("combined", "auc", mode, fill),
            f"{mode.upper()} across the configurations, fill {fill}: each estimator's area under its test-accuracy "
            f"curve (%, the curve's mean height over the fractions of pixels {PIXELS[mode]}), mean and 95% "
            f"t-interval over seeds, and its rank within its configuration ({better} is better). Columns are not "
            f"tested against each other here (`roarfast compare` does).",
            ["estimator"] + [letters[id(p)] for p in shown], rows, notes))
    return out


def markdown_cell(text) -> str:
    """A Markdown table cell: a pipe would end it, a newline would end the row; a cell of lines, one line."""
    if isinstance(text, tuple):
        text = " ".join(text)
    return str(text).replace("|", "\\|").replace("\n", " ")


def markdown_table(table: Table) -> str:
    """One table in Markdown (GitHub's pipe tables) under its title as a heading."""
    columns = max([len(table.header)] + [len(r) for r in table.rows]) or 1
    header = list(table.header) + [""] * (columns - len(table.header))
    out = [f"## {table.title}", "", "| " + " | ".join(markdown_cell(h) for h in header) + " |",
           "|" + "---|" * columns]
    out += ["| " + " | ".join(markdown_cell(c) for c in row) + " |" for row in table.rows]
    return "\n".join(out)


def markdown_document(tables: list, title: str) -> str:
    return "\n\n".join([f"# {title}", *(markdown_table(t) for t in tables)]) + "\n"


def paper_markdown(tables: list, source: str) -> str:
    """tables.md: each paper table under its label, with its caption and its notes."""
    out = [f"# Tables from {source}"]
    for t in tables:
        body = markdown_table(Table("", t.header, t.rows)).split("\n", 2)[2]
        out.append("\n\n".join([f"## {t.label}", t.caption, body, *(f"- {n}" for n in t.notes)]))
    return "\n\n".join(out) + "\n"
