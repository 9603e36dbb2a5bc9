"""The report's rendering: the page assembled from the sections in order (each section's tables and lines,
then its figures; with several configurations, each configuration's apart under its label), written as
index.md and a self-contained index.html (figures embedded: PNG, else SVG; a PDF alone is linked), beside
cells.csv, summary.json and the tables a paper quotes as tables.tex (booktabs: roarfast.report.latex) and tables.md
(roarfast.report.tables, as `roarfast paper` writes them). Knows no section: what a page holds is the sections' business
(roarfast.report.sections).
"""

import base64
import csv
import dataclasses
import html
import json
from dataclasses import dataclass
from pathlib import Path

from roarfast.report.analysis import parts_of
from roarfast.report.sections import RUN, Lines, Table
from roarfast.report.latex import latex_document
from roarfast.report.tables import paper_markdown
from roarfast.report.text import titled

#: the files a report writes besides its figures, in the order written
REPORT_FILES = ("cells.csv", "summary.json", "index.md", "index.html", "tables.tex", "tables.md")
#: how index.html embeds a figure of each format it can show
_MIME = {"png": "image/png", "svg": "image/svg+xml"}


@dataclass(frozen=True)
class Image:
    """A drawn figure on the page: its file in the report directory and its title."""

    file: str
    title: str


def page(sections: list, summary: dict, shown: dict) -> list:
    """The page's blocks in reading order: each section's tables and lines, then the figures it drew
    (`shown`: section name -> [{file, title, configuration?}]). With several configurations, a section about
    one configuration shows each configuration's blocks and figures in turn, its titles labelled; a block
    that is the same in every configuration (a table of the whole run's measurements, such as the base
    model's no-retrain evaluations) comes once, first and unlabelled."""
    parts = parts_of(summary)
    out = []
    for section in sections:
        if section.scope == RUN or len(parts) == 1:
            out += _blocks(section, summary) + [Image(f["file"], f["title"]) for f in shown.get(section.name, [])]
            continue
        per_part = [_blocks(section, part) for part in parts]
        common = [b for b in per_part[0] if all(b in blocks for blocks in per_part[1:])]
        out += common
        for part, blocks in zip(parts, per_part):
            label = part["configuration"]["label"]
            out += [dataclasses.replace(b, title=f"[{label}] {b.title}") for b in blocks if b not in common]
            out += [Image(f["file"], f["title"]) for f in shown.get(section.name, [])
                    if f.get("configuration") == label]
    return out


def _blocks(section, summary: dict) -> list:
    blocks = [] if section.blocks is None else section.blocks(summary)
    wrong = [type(b).__name__ for b in blocks if not isinstance(b, (Table, Lines))]
    if wrong:
        raise TypeError(f"report section {section.name!r} gave {', '.join(wrong)}: blocks are Table or Lines")
    return [_titled(b, summary) for b in blocks]


def _titled(block, summary: dict):
    """`block` with Python objects shown by what they are (text.titled), not by their recorded names."""
    if isinstance(block, Table):
        return dataclasses.replace(block, rows=[[titled(cell, summary) for cell in row] for row in block.rows])
    return dataclasses.replace(block, lines=[titled(line, summary) for line in block.lines])


def write_files(summary: dict, blocks: list, cells: list, out_dir: Path, tables: list = (),
                source: str = "a run directory") -> list[str]:
    """Writes cells.csv, summary.json, index.md, index.html and `tables` (roarfast.report.tables.paper_tables: what
    `roarfast paper` writes too) as tables.tex and tables.md into out_dir (a directory of its own, which the report
    fills whole: roarfast.report.write_report); returns their names."""
    write_csv(cells, out_dir / "cells.csv")
    (out_dir / "summary.json").write_text(json.dumps(summary, indent=1, sort_keys=True))
    (out_dir / "index.md").write_text(render_markdown(blocks))
    (out_dir / "index.html").write_text(render_html(blocks, out_dir))
    (out_dir / "tables.tex").write_text(latex_document(list(tables), source))
    (out_dir / "tables.md").write_text(paper_markdown(list(tables), source))
    return list(REPORT_FILES)


def render_markdown(blocks: list) -> str:
    out = ["# roarfast report", ""]
    for block in blocks:
        out += [f"## {block.title}", ""]
        if isinstance(block, Table):
            out += ["| " + " | ".join(block.header) + " |", "|" + "---|" * len(block.header)]
            out += ["| " + " | ".join(str(c).replace("|", "/") for c in row) + " |" for row in block.rows]
        elif isinstance(block, Image):
            out.append(f"![{block.title}]({block.file})")
        else:
            out += [f"- {line}" for line in block.lines]
        out.append("")
    return "\n".join(out)


_CSS = ("body{font-family:sans-serif;max-width:1250px;margin:2em auto;padding:0 1em;color:#222}"
        "table{border-collapse:collapse;margin:0.5em 0 1.5em}td,th{border:1px solid #ccc;padding:3px 8px;"
        "text-align:left;font-size:0.9em}th{background:#f0f0f0}tr:nth-child(even){background:#fafafa}"
        "img{max-width:100%;border:1px solid #ddd}li{margin:2px 0;font-size:0.92em}"
        ".leaky{color:#a00;font-weight:bold}h2{margin-top:1.4em}")


def render_html(blocks: list, out_dir: Path) -> str:
    """The page as one HTML document; figures embedded as base64 PNG data URIs."""
    esc = html.escape
    out = [("<!DOCTYPE html><html><head><meta charset='utf-8'><title>roarfast report</title>"
            f"<style>{_CSS}</style></head><body><h1>roarfast report</h1>")]
    for block in blocks:
        title = esc(block.title)
        if isinstance(block, Table):
            out.append(f"<h2>{title}</h2><table>")
            if any(block.header):
                out.append("<tr>" + "".join(f"<th>{esc(h)}</th>" for h in block.header) + "</tr>")
            for row in block.rows:
                out.append("<tr>" + "".join(f"<td{_leaky_class(c)}>{esc(str(c))}</td>" for c in row) + "</tr>")
            out.append("</table>")
        elif isinstance(block, Image):
            mime = _MIME.get(block.file.rpartition(".")[2])
            if mime is None:  # a format no browser page embeds (PDF): linked beside the page
                out.append(f"<h2>{title}</h2><p><a href='{esc(block.file)}'>{esc(block.file)}</a></p>")
                continue
            data = base64.b64encode((out_dir / block.file).read_bytes()).decode("ascii")
            out.append(f"<h2>{title}</h2><img alt='{title}' src='data:{mime};base64,{data}'>")
        else:
            items = "".join(f"<li{_leaky_class(line)}>{esc(line)}</li>" for line in block.lines)
            out.append(f"<details open><summary><h2 style='display:inline'>{title}</h2></summary>"
                       f"<ul>{items}</ul></details>")
    out.append("</body></html>")
    return "\n".join(out)


def _leaky_class(text) -> str:
    return " class='leaky'" if "LEAKY" in str(text) else ""


def write_csv(cells: list, path: Path) -> None:
    """cells.csv: one row per finished cell and control, with its configuration's label (empty when the run
    holds one) and its config (JSON; empty before schema v5)."""
    columns = ["configuration", "dataset", "model", "method", "mode", "fill", "fraction", "seed", "test_acc",
               "control_acc", "val_acc", "epochs", "seconds", "config_hash", "finished", "config"]
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=columns, extrasaction="ignore")
        writer.writeheader()
        writer.writerows({**c, "config": "" if c.get("config") is None else json.dumps(c["config"], sort_keys=True)}
                         for c in cells)
