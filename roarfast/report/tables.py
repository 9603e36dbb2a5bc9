"""Tables for a paper: a report's tables (roarfast.report.sections' Table blocks) as LaTeX (booktabs) and as
Markdown, one writer of each for the report's tables.tex / tables.md and for `roarfast compare`'s files.

tables.tex holds the tables a paper quotes: the rankings, the verdicts against random and the accuracies with
their intervals (PAPER_SECTIONS), each configuration's labelled; it needs `\\usepackage{booktabs}`.
"""

import re

from roarfast.report.sections import Table

#: the sections whose tables tables.tex and tables.md hold, in page order
PAPER_SECTIONS = ("rankings", "verdicts", "accuracy_tables")
#: LaTeX's special characters, each as text mode writes it
_LATEX = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_", "{": r"\{",
          "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}", "<": r"\textless{}",
          ">": r"\textgreater{}", "|": r"\textbar{}", "±": r"$\pm$", "−": "-", "…": r"\ldots{}"}
_LATEX_RE = re.compile("|".join(re.escape(c) for c in _LATEX))


def latex_escape(text) -> str:
    """`text` (str() of any cell) with LaTeX's special characters escaped, safe in a text-mode cell."""
    return _LATEX_RE.sub(lambda m: _LATEX[m.group()], str(text))


def latex_table(table: Table, label: str = "") -> str:
    """One table as a booktabs `table` float: the title as its caption, a left-aligned first column and the
    rest (numbers with intervals) left-aligned too, since they hold text such as "[95% interval]"."""
    columns = max([len(table.header)] + [len(r) for r in table.rows]) or 1
    out = [r"\begin{table}[htbp]", r"\centering", r"\small", f"\\caption{{{latex_escape(table.title)}}}"]
    if label:
        out.append(f"\\label{{{label}}}")
    out += [f"\\begin{{tabular}}{{{'l' * columns}}}", r"\toprule"]
    if any(table.header):
        out += [_latex_row(table.header), r"\midrule"]
    out += [_latex_row(row) for row in table.rows]
    out += [r"\bottomrule", r"\end{tabular}", r"\end{table}"]
    return "\n".join(out)


def _latex_row(cells) -> str:
    # a row opening with "[" would be read as the optional argument of the previous row's \\
    text = " & ".join(latex_escape(c) for c in cells)
    return ("{}" + text if text.startswith("[") else text) + r" \\"


def latex_document(tables: list, source: str) -> str:
    """The tables as one file to \\input (booktabs), each labelled tab:roarfast-<n>."""
    head = [f"% {line}" for line in (f"written by roarfast from {source}", r"needs \usepackage{booktabs}")]
    body = [latex_table(t, f"tab:roarfast-{i}") for i, t in enumerate(tables, start=1)]
    return "\n\n".join(["\n".join(head), *body]) + "\n"


def markdown_cell(text) -> str:
    """A Markdown table cell: a pipe would end it, a newline would end the row."""
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
