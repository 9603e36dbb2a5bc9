"""The report's rendering: the summary (roarfast.report.analysis) as index.md, a self-contained index.html
(figures embedded), cells.csv and summary.json, and the verdict lines `roarfast report` and `roarfast run`
print. index.md and index.html render the same list of sections, in reading order.
"""

import base64
import csv
import html
import json
from collections import defaultdict
from pathlib import Path

from roarfast.fills import DEFAULT_FILL
from roarfast.modes import ROAR, cell_mode, control_mode
from roarfast.report.analysis import (AGREEMENT_FILL, LEAK_INCONCLUSIVE, LEAK_STANDS, LEAKY_NO_VERDICT, NO_CONTROL,
                                      UNTESTED, shown_bounds)
from roarfast.report.load import method_order


def write_files(summary: dict, cells: list, out_dir: Path) -> list[str]:
    """Writes cells.csv, summary.json, index.md and index.html into out_dir; returns their names."""
    write_csv(cells, out_dir / "cells.csv")
    (out_dir / "summary.json").write_text(json.dumps(summary, indent=1, sort_keys=True))
    (out_dir / "index.md").write_text(render_markdown(summary))
    (out_dir / "index.html").write_text(render_html(summary, out_dir))
    return ["cells.csv", "summary.json", "index.md", "index.html"]


def _pct(value) -> str:
    return "-" if value is None else f"{value:.1%}"


def _p(value) -> str:
    return "-" if value is None else (f"{value:.2g}" if value >= 1e-4 else f"{value:.1e}")


def _where(summary: dict, mode: str, fill: str | None, fraction: float) -> str:
    """"ROAR 50%" (with the fill when the run holds another than the default)."""
    show_fill = fill is not None and (len(summary["fills"]) > 1 or fill != DEFAULT_FILL)
    return f"{mode.upper()} {fraction:.0%}" + (f" [{fill}]" if show_fill else "")


#: what a verdict's tag says beside its verdict, per leak reading (none for a clean or uncontrolled one)
_LEAK_TAG = {LEAK_STANDS: " [stands despite a leaky control]", LEAK_INCONCLUSIVE: " [INCONCLUSIVE: leaky control]"}


def _control_text(summary: dict, entry: dict) -> str:
    """The verdict line's reading of the cell's mask-only control."""
    control, leak = entry["control"], entry["leak"]
    if leak == NO_CONTROL:
        return "no control"
    if leak == UNTESTED:
        return f"control {_pct(control['mean'])} (not tested: {control['test'].removeprefix('none: ')})"
    if not control["leaky"]:
        return f"control {_pct(control['mean'])}, not leaky"
    text = (f"LEAKY: its mask-only control reaches {_pct(control['mean'])} (chance {_pct(summary['chance'])}, "
            f"p={_p(control['p'])}), so the removal pattern's shape alone lifts this accuracy")
    if leak == LEAKY_NO_VERDICT:
        return text
    effect = "could explain" if leak == LEAK_INCONCLUSIVE else "works against"
    return f"{text}, which {effect} \"{entry['verdict']}\""


def verdict_lines(summary: dict) -> list[str]:
    """One line per estimator x mode x fraction verdict (with what its mask-only control's leak does to
    it), a line per leaky control of random, and a ranking line per mode and fill."""
    lines = []
    for e in summary["verdicts"]:
        where = _where(summary, e["mode"], e["fill"], e["fraction"])
        numbers = f"{_pct(e['mean'])} vs random {_pct(e['random_mean'])}"
        if e["p"] is not None:
            numbers += f", Welch p={_p(e['p'])}, Holm p={_p(e['p_holm'])}"
        else:
            numbers += f", seeds {e['n']} vs {e['n_random']}"
        lines.append(f"{where} {e['method']}: {e['verdict']}{_LEAK_TAG.get(e['leak'], '')} ({numbers}); "
                     f"{_control_text(summary, e)}")
    for leak in summary["leakage"]:
        if leak["method"] == "random" and leak["leaky"]:
            lines.append(f"{leak['mode'].upper()} {leak['fraction']:.0%} random: LEAKY control "
                         f"{_pct(leak['mean'])} (chance {_pct(summary['chance'])}, p={_p(leak['p'])})")
    for r in summary["rankings"]:
        if not r["entries"]:
            continue
        order = " < " if r["lower_is_better"] else " > "
        ranked = order.join(f"{e['method']} {_pct(e['mean'])}" for e in r["entries"])
        fill = f" [{r['fill']}]" if len(summary["fills"]) > 1 or r["fill"] != DEFAULT_FILL else ""
        better = "lower" if r["lower_is_better"] else "higher"
        missing = f"; not ranked (a fraction or seed missing): {', '.join(r['incomplete'])}" if r["incomplete"] else ""
        lines.append(f"ranking {r['mode'].upper()}{fill} ({_ranked_by(r['fractions'])}, {better} is better): "
                     f"{ranked}{missing}")
    return lines


def _ranked_by(fractions: list) -> str:
    """What a ranking orders by: the AUC over the fractions run, or with one fraction its accuracy."""
    if len(fractions) == 1:
        return f"accuracy at {fractions[0]:.0%}"
    return f"AUC over {fractions[0]:.0%}-{fractions[-1]:.0%}" if fractions else "AUC"


def _interval_text(g: dict) -> str:
    if g["low"] is None:
        return f"{_pct(g['mean'])} (1 seed)"
    low, high = shown_bounds(g)
    return f"{_pct(g['mean'])} [{low:.1%}, {high:.1%}]"


def _count_lines(summary: dict) -> list:
    """The Run table's rows counting the mask-only controls and the verdicts by what they can be trusted for."""
    controls, verdicts = summary["counts"]["controls"], summary["counts"]["verdicts"]
    untested = (f"; {controls['untested']} untested (chance or the test split's size unknown)"
                if controls["untested"] else "")
    not_drawn = verdicts["all"] - verdicts["drawn"]
    return [["mask-only controls", f"{controls['tested']} tested: {controls['leaky']} leaky{untested}"],
            ["verdicts against random", f"{verdicts['drawn']} drawn: {verdicts['conclusive']} conclusive, "
                                        f"{verdicts['inconclusive']} inconclusive (leaky control), "
                                        f"{verdicts['unchecked']} unchecked (no tested control)"
                                        + (f"; {not_drawn} not drawn (one seed or no random)" if not_drawn else "")]]


def _seeds_text(ns) -> str:
    return f"{min(ns)}" if min(ns) == max(ns) else f"{min(ns)}-{max(ns)}"


def _title_fill(mode: str, fill) -> str:
    return f"{mode.upper()} (mask-only control)" if fill is None else f"{mode.upper()} (fill {fill})"


def _sections(summary: dict) -> list[tuple]:
    """The report's content in reading order: ("table", title, header, rows), ("figure", file, title) and
    ("lines", title, lines); index.md and index.html render the same list."""
    base = summary["base"]
    figures = {kind: [f for f in summary.get("figures", []) if f["kind"] == kind]
               for kind in ("accuracy", "fills", "ensembles", "controls", "examples")}
    n_cells = sum(len(g["seeds"]) for g in summary["groups"])
    run = [["dataset", ", ".join(summary["datasets"])], ["model", ", ".join(summary["models"])],
           ["base model test / validation accuracy", f"{_pct(base['test_acc'])} / {_pct(base['val_acc'])}"],
           ["chance", f"{_pct(summary['chance'])} ({summary['chance_source']})"],
           ["test images", "-" if summary["n_test"] is None else str(summary["n_test"])],
           ["fills", ", ".join(summary["fills"]) or "-"], ["finished cells (with controls)", str(n_cells)],
           *_count_lines(summary)]
    out = [("table", "Run", ["", ""], run)]
    for r in summary["rankings"]:
        better = "lower" if r["lower_is_better"] else "higher"
        measure = "AUC" if len(r["fractions"]) > 1 else "accuracy"
        rows = [[str(i + 1), e["method"], _interval_text(e), str(e["n"])] for i, e in enumerate(r["entries"])]
        rows += [["-", m, "not ranked: a fraction or seed missing", "-"] for m in r["incomplete"]]
        out.append(("table", f"Ranking, {_title_fill(r['mode'], r['fill'])}: {_ranked_by(r['fractions'])}, "
                             f"{better} is better", ["rank", "method", f"{measure} [95% interval]", "seeds"], rows))
    out += [("figure", f["file"], f["title"]) for f in figures["accuracy"] + figures["fills"]]
    by_verdict = defaultdict(list)
    for e in summary["verdicts"]:
        by_verdict[(e["mode"], e["fill"])].append(e)
    for (mode, fill), entries in by_verdict.items():
        fractions = sorted({e["fraction"] for e in entries})
        cells = {(e["method"], e["fraction"]): e for e in entries}
        methods = sorted({e["method"] for e in entries}, key=method_order)
        rows = [[m] + [_verdict_cell(cells.get((m, f))) for f in fractions] for m in methods]
        out.append(("table", f"Verdict against random, {_title_fill(mode, fill)} (Holm-corrected p; beside a "
                             f"leaky control a verdict stands or is inconclusive by the leak's direction: Methods)",
                    ["method"] + [f"{f:.0%}" for f in fractions], rows))
    by_control = defaultdict(list)
    for e in summary["leakage"]:
        by_control[e["mode"]].append(e)
    for mode, entries in by_control.items():
        fractions = sorted({e["fraction"] for e in entries})
        cells = {(e["method"], e["fraction"]): e for e in entries}
        methods = sorted({e["method"] for e in entries}, key=method_order)
        rows = [[m] + [_leak_cell(cells.get((m, f))) for f in fractions] for m in methods]
        title = (f"Mask-only controls of the {cell_mode(mode).upper()} cells: accuracy against chance "
                 f"({_pct(summary['chance'])}), one-sided p")
        out.append(("table", title, ["method"] + [f"{f:.0%}" for f in fractions], rows))
    out += [("figure", f["file"], f["title"]) for f in figures["controls"]]
    by_slot = defaultdict(list)
    for g in summary["groups"]:
        by_slot[(g["mode"], g["fill"])].append(g)
    for (mode, fill), groups in by_slot.items():
        fractions = sorted({g["fraction"] for g in groups})
        cells = {(g["method"], g["fraction"]): g for g in groups}
        methods = sorted({g["method"] for g in groups}, key=method_order)
        rows = [[m] + [_interval_text(cells[(m, f)]) if (m, f) in cells else "-" for f in fractions]
                + [_seeds_text([cells[(m, f)]["n"] for f in fractions if (m, f) in cells])] for m in methods]
        out.append(("table", f"Test accuracy, {_title_fill(mode, fill)}: mean [95% interval] over seeds",
                    ["method"] + [f"{f:.0%}" for f in fractions] + ["seeds"], rows))
    out += [("figure", f["file"], f["title"]) for f in figures["ensembles"] + figures["examples"]]
    out += _beyond_retraining(summary)
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


#: what a verdict table's cell adds per leak reading
_LEAK_CELL = {NO_CONTROL: "; no control", UNTESTED: "; control untested", LEAK_STANDS: "; LEAKY control, stands",
              LEAK_INCONCLUSIVE: "; LEAKY control, INCONCLUSIVE", LEAKY_NO_VERDICT: "; LEAKY control"}


def _verdict_cell(e: dict | None) -> str:
    if e is None:
        return "-"
    text = e["verdict"] if e["p"] is None else f"{e['verdict']} (p={_p(e['p_holm'])})"
    return text + _LEAK_CELL.get(e["leak"], "")


def _method_notes(summary: dict) -> list[str]:
    tests = summary["tests"]
    return [(f"Intervals: {tests['interval']}, shown clipped to [0%, 100%], accuracy's range (over a few seeds "
             f"near either end the t-interval passes it; summary.json keeps the raw bounds)."),
            (f"Verdicts: {tests['verdict']} over the estimators compared at each mode and fraction, alpha "
             f"{summary['alpha']}; ROAR: lower accuracy than random is better, KAR: higher. {tests['degenerate']}. "
             f"With one seed on either side no verdict is drawn."),
            (f"Ranking: {tests['ranking']}, per seed, over every fraction run in that mode (with one fraction: the "
             f"accuracy there); a method lacking one is not ranked."),
            (f"Leakage: {tests['leakage']}. A leaky cell's accuracy partly measures the removal pattern's shape "
             f"rather than the removed information, and the shape can only lift it. So the leak's direction decides "
             f"what a verdict is worth: in ROAR (lower is better) a \"better than random\" was reached despite "
             f"the lift and stands, while \"no different\" or \"worse\" may be the lift's doing and is "
             f"inconclusive; in KAR (higher is better) a \"better than random\" may be the lift's doing and is "
             f"inconclusive, while \"no different\" or \"worse\" stand. A control that could not be tested is "
             f"counted as untested, never as not leaky.")]


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


def write_csv(cells: list, path: Path) -> None:
    """cells.csv: one row per finished cell and control."""
    columns = ["dataset", "model", "method", "mode", "fill", "fraction", "seed", "test_acc", "control_acc",
               "val_acc", "epochs", "seconds", "config_hash", "finished"]
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=columns, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(cells)


def _beyond_retraining(summary: dict) -> list[tuple]:
    """The tables of the no-retrain evaluation (with the rank agreement) and of fill leakage."""
    out = []
    evaluated = summary.get("no_retrain")
    if evaluated:
        modes = evaluated["modes"]
        rows = [[c["method"], f"{c['fraction']:.0%}"]
                + [(f"{_pct(c['modes'][m]['test_acc'])} / {_pct(c['modes'][m]['mean_probability'])}"
                    if m in c["modes"] else "-") for m in modes] for c in evaluated["cells"]]
        out.append(("table", "No retraining (roarfast evaluate): the base model's test accuracy / mean probability "
                             "of its original prediction as the most- (MoRF) or least-relevant (LeRF) pixels are "
                             "replaced; road-: with the imputation fill", ["method", "fraction", *modes], rows))
        rows = [[e["a"].upper(), e["b"].upper(), "-" if e["tau"] is None else f"{e['tau']:+.2f}"]
                for e in evaluated["agreement"]]
        if rows:
            out.append(("table", f"Rank agreement of the estimator rankings (Kendall tau-b; ROAR/KAR with the "
                                 f"{AGREEMENT_FILL} fill)", ["benchmark", "benchmark", "tau"], rows))
    fill_leakage = summary.get("fill_leakage")
    if fill_leakage:
        # summary["leakage"] holds the mask-only controls' tests (mask leakage), read beside the fill's
        controls = {(e["method"], e["fraction"]): e["mean"] for e in summary.get("leakage", [])
                    if e["mode"] == control_mode(ROAR)}
        rows = [[r["method"], r["fill"], f"{r['fraction']:.0%}", _pct(r["accuracy"]), _pct(r["base_rate"]),
                 _pct(controls.get((r["method"], r["fraction"])))] for r in fill_leakage]
        out.append(("table", "Fill leakage (roarfast leakage): a per-pixel detector finding the removed pixels "
                             "after each fill, against the base rate; beside it the mask-only class control",
                    ["method", "fill", "fraction", "detector accuracy", "base rate", "class control (ROAR)"], rows))
    return out
