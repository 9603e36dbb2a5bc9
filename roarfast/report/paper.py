"""`roarfast paper` / roarfast.report.paper.write_paper: the folder a paper is written from, in one command, from the
report's own numbers (load, analyse: the same summary `roarfast report` writes):

- figures/: every figure of the report drawn for a column (<name>-column: 3.3 in wide) and for the whole text
  width (<name>-page: 7 in), as PDF (vector) and PNG, text at least 7 pt at that size (roarfast.report.figures);
- figures.tex: a float per figure, the width that suits it (a `figure` in a column, or a `figure*`), its caption
  saying what it shows and, where its study cannot answer as it stands, its status; labelled by content
  (fig:roarfast-<configuration id>-<figure>);
- tables.tex and tables.md: the tables a paper quotes (roarfast.report.tables, set by roarfast.report.latex), the
  same as `roarfast report` writes, with a combined table across configurations where there are several;
- methods.tex and methods.md: the methods paragraph (roarfast.report.methods_text), and references.bib: exactly
  what it cites (roarfast, the ROAR paper, the estimators' and fills' papers: roarfast.report.citations);
- preview.tex: a two-column article (a column 3.3 in, the text 7 in) that inputs them all: `pdflatex preview`,
  `bibtex preview` and `pdflatex preview` twice show the pages as a journal would print them.

The folder is built beside its place and swapped in whole (roarfast.report.output_dir), as the report is.
"""

from dataclasses import dataclass, field
from pathlib import Path

from roarfast.errors import UserError
from roarfast.report import sections
from roarfast.report.analysis import analyse, parts_of
from roarfast.report.citations import bibtex
from roarfast.report.decisions import conclusive, status_note
from roarfast.report.figures import COLUMN, PAGE, check_formats, draw
from roarfast.report.latex import latex_document, latex_escape
from roarfast.report.load import ALL, load_run
from roarfast.report.methods_text import cited, paragraphs, to_latex, to_markdown
from roarfast.report.output_dir import write_whole
from roarfast.report.tables import label, paper_markdown, paper_tables
from roarfast.rundir.catalog import named
from roarfast.rundir.directory import RunDir

#: the file that marks a directory as a paper folder roarfast wrote (the next one replaces it whole)
MARKER = ".roarfast-paper"
#: the files beside figures/, in the order written
PAPER_FILES = ("figures.tex", "tables.tex", "tables.md", "methods.tex", "methods.md", "references.bib", "preview.tex")
#: a PNG figure's resolution: print quality (the PDF is vector)
PAPER_DPI = 300
#: the figure variants: the width each is drawn at and the suffix of its files, and what LaTeX sizes it to
VARIANTS = {"column": (COLUMN, "-column", r"\linewidth", "figure"), "page": (PAGE, "-page", r"\textwidth", "figure*")}


@dataclass
class Paper:
    """A written paper folder: where it is, its files (relative to it) and the summary it was written from."""

    out_dir: Path
    files: list = field(default_factory=list)
    summary: dict = field(default_factory=dict)


def write_paper(run_dir, out_dir=None, configs=(), figure_formats=("pdf", "png"), dpi: int | None = None,
                dataset=None) -> Paper:
    """Writes the paper folder of the configurations `configs` names (names, labels, ids or id prefixes, as
    `roarfast report --config` takes them; none: every one with finished cells) under out_dir (default:
    RUN_DIR/paper); `figure_formats`: pdf, png, svg (the first of pdf, png that is there goes into figures.tex);
    `dpi`: a PNG's (default PAPER_DPI). Raises UserError (one line), writing nothing, as `roarfast report` does."""
    dpi = PAPER_DPI if dpi is None else dpi
    formats = check_formats(figure_formats, dpi)
    if not {"pdf", "png"} & set(formats):
        raise UserError(f"--figure-format {','.join(formats)}: a paper's figures.tex includes a PDF or a PNG; add pdf")
    run = RunDir(run_dir)
    loaded = load_run(run, dataset, ALL)
    configs = [configs] if isinstance(configs, str) else list(configs or ())
    if configs:
        chosen = [named([p.configuration for p in loaded.parts], c) for c in configs]
        loaded.parts = [p for p in loaded.parts if any(p.configuration is c for c in chosen)]
    listed = sections.ordered()
    summary = analyse(loaded, listed)
    out_dir = Path(out_dir) if out_dir is not None else run.root / "paper"

    def build(tmp: Path) -> list:
        (tmp / "figures").mkdir()
        drawn = {}
        for variant, (width, suffix, _, _) in VARIANTS.items():
            draw(listed, summary, loaded, run, tmp / "figures", formats, dpi, width, suffix)
            drawn[variant] = summary.pop("figures")
        pieces = paragraphs(summary)
        tables = paper_tables(summary)
        source = str(run.root)
        texts = {"figures.tex": figures_tex(drawn, summary, formats), "tables.tex": latex_document(tables, source),
                 "tables.md": paper_markdown(tables, source), "methods.tex": to_latex(pieces),
                 "methods.md": to_markdown(pieces), "references.bib": bibtex(cited(pieces)), "preview.tex": PREVIEW}
        for name in PAPER_FILES:
            (tmp / name).write_text(texts[name])
        return [f"figures/{f}" for variant in drawn.values() for entry in variant for f in entry["files"]] + \
            list(PAPER_FILES)

    return Paper(out_dir, write_whole(out_dir, build, "paper folder", MARKER), summary)


def figures_tex(drawn: dict, summary: dict, formats) -> str:
    """A float per figure: the page variant in a `figure*` for a figure printed across the page (its `wide`), else
    the column variant in a `figure`; its caption the figure's title, with its study's status where that cannot
    answer as it stands; its label fig:roarfast-<configuration id, or "run">-<figure>."""
    included = next(f for f in ("pdf", "png") if f in formats)
    status = {p["configuration"].get("id"): p for p in parts_of(summary)}
    out = ["% written by roarfast: each figure drawn at the width it is included at (3.3 in in a column, 7 in across "
           "the page), its text at least 7 pt; needs \\usepackage{graphicx}"]
    columns = {(e["name"], e.get("configuration")): e for e in drawn["column"]}
    for page in drawn["page"]:
        entry = page if page["wide"] else columns[(page["name"], page.get("configuration"))]
        _, _, width, env = VARIANTS["page" if page["wide"] else "column"]
        part = status.get(entry["configuration_id"])
        caption = entry["title"].rstrip(".") + "." + (f" {status_note(part)}" if part is not None
                                                      and not conclusive(part) else "")
        name = label((entry["configuration_id"] or "run")[:8], entry["name"], kind="fig")
        file = next(f for f in entry["files"] if f.endswith(f".{included}"))
        out.append("\n".join([f"\\begin{{{env}}}[tbp]", r"\centering",
                              f"\\includegraphics[width={width}]{{figures/{file}}}",
                              f"\\caption{{{latex_escape(caption)}}}", f"\\label{{{name}}}", f"\\end{{{env}}}"]))
    return "\n\n".join(out) + "\n"


#: the two-column article that shows the folder as printed: a 7 in text of two 3.3 in columns
PREVIEW = r"""% written by roarfast: the paper folder as a two-column article prints it (a column 3.3 in wide, the
% text 7 in): pdflatex preview && bibtex preview && pdflatex preview && pdflatex preview
\documentclass[10pt,twocolumn]{article}
\usepackage[letterpaper,textwidth=7in,columnsep=0.4in,textheight=9in]{geometry}
\usepackage{graphicx}
\usepackage{booktabs}
\extrafloats{100}
\begin{document}
\section*{Methods}
\input{methods.tex}
\input{figures.tex}
\clearpage
\input{tables.tex}
\clearpage
\bibliographystyle{plain}
\bibliography{references}
\end{document}
"""
