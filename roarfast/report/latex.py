"""The paper's tables set in LaTeX (booktabs), each sized for the page it goes on: a table that fits a column of a
two-column paper is a `table`, one that fits only the whole text width a `table*`, and one wider than that is split
by its columns into parts that each fit (its leading columns repeated), so no table runs into the margin. The
width is reckoned from the text of its cells at the table's size (\\footnotesize: Computer Modern's character widths,
with a margin for other fonts); a cell of several lines is stacked. Beneath each table, its notes (the study's
status, its warnings, its marks) wrap at the table's width, long digests and paths allowed to break.

Needs `\\usepackage{booktabs}`; `\\input` the file where the tables go.
"""

import re

#: the widths a table must fit (TeX points): one column of a two-column paper (3.3 in) and the text width (7 in)
COLUMN_PT, PAGE_PT = 3.3 * 72.27, 7.0 * 72.27
#: the share of those widths a table is planned to fill: room for a font a little wider than Computer Modern's
FILL = 0.97
#: the table's size (\footnotesize of a 10 pt document) and the space beside each column (2 \tabcolsep, set to
#: TABCOLSEP: LaTeX's 6 pt makes a four-column table of intervals a little wider than a column)
FONT_PT, TABCOLSEP = 8.0, "4pt"
COLUMN_SEP_PT = 2 * float(TABCOLSEP.removesuffix("pt"))
#: Computer Modern Roman's widths in em (cmr10; cmr8 is wider by DESIGN_SIZE_SCALE), of the characters tables hold
_EM = {**dict.fromkeys("0123456789", 0.5), **dict(zip("abcdefghijklmnopqrstuvwxyz", (
    .5, .556, .444, .556, .444, .306, .5, .556, .278, .306, .528, .278, .833, .556, .5, .556, .528, .392, .394, .389,
    .556, .528, .722, .528, .528, .444))), " ": .333, ".": .278, ",": .278, ":": .278, ";": .278, "-": .333,
    "[": .278, "]": .278, "(": .389, ")": .389, "%": .833, "=": .778, "/": .5, "?": .472, "_": .5, "'": .278}
_EM_OTHER, _EM_UPPER, DESIGN_SIZE_SCALE = 0.6, 0.75, 1.08
#: LaTeX's special characters, each as text mode writes it
_LATEX = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_", "{": r"\{",
          "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}", "<": r"\textless{}",
          ">": r"\textgreater{}", "|": r"\textbar{}", "±": r"$\pm$", "−": "-", "…": r"\ldots{}"}
_LATEX_RE = re.compile("|".join(re.escape(c) for c in _LATEX))
#: where a long word in a note may break (a path's separators, a digest every few characters): marked before
#: escaping with a character no text holds, then written as \allowbreak
_BREAK, _LONG_WORD, _DIGEST_RUN = "\x00", 24, re.compile(r"[0-9a-fA-F]{12,}")


def latex_escape(text) -> str:
    """`text` (str() of any cell) with LaTeX's special characters escaped, safe in a text-mode cell."""
    return _LATEX_RE.sub(lambda m: _LATEX[m.group()], str(text))


def text_width(text: str) -> float:
    """The width (TeX points) of `text` set at FONT_PT in Computer Modern, reckoned by character."""
    em = sum(_EM.get(c, _EM_UPPER if c.isupper() else _EM_OTHER) for c in str(text))
    return em * FONT_PT * DESIGN_SIZE_SCALE


def _lines(cell) -> tuple:
    return cell if isinstance(cell, tuple) else (str(cell),)


def column_widths(header: list, rows: list) -> list[float]:
    """Each column's width (TeX points, without the space beside it): its widest line, header included."""
    columns = max([len(header)] + [len(r) for r in rows])
    every = [list(header)] + [list(r) for r in rows]
    return [max((text_width(line) for r in every if i < len(r) for line in _lines(r[i])), default=0.0)
            for i in range(columns)]


def parts(table) -> list[list[int]]:
    """The columns of each part the table is set in: all of them where it fits the text width, else its columns
    after the first `table.fixed` in as few chunks of even size as fit it, each chunk with those."""
    widths = [w + COLUMN_SEP_PT for w in column_widths(table.header, table.rows)]
    room = FILL * PAGE_PT
    fixed = list(range(min(table.fixed, len(widths))))
    rest = list(range(len(fixed), len(widths)))
    for count in range(1, len(rest) + 1):
        size = -(-len(rest) // count)
        chunks = [fixed + rest[i:i + size] for i in range(0, len(rest), size)]
        if all(sum(widths[j] for j in chunk) <= room for chunk in chunks):
            return chunks
    return [fixed + [i] for i in rest]  # a column wider than the page alone: one a part (its text runs over)


def latex_table(table) -> str:
    """The table (roarfast.report.tables.PaperTable) as booktabs floats: one, or one per part (parts), each a
    `table` where it fits a column, else a `table*`."""
    chosen = parts(table)
    floats = []
    for n, columns in enumerate(chosen, start=1):
        label = table.label if n == 1 else f"{table.label}-part{n}"
        caption = table.caption + (f" (Part {n} of {len(chosen)}.)" if len(chosen) > 1 else "")
        header = [table.header[i] if i < len(table.header) else "" for i in columns]
        rows = [[row[i] if i < len(row) else "" for i in columns] for row in table.rows]
        width = sum(column_widths(header, rows)) + COLUMN_SEP_PT * len(columns)
        env = "table" if width <= FILL * COLUMN_PT else "table*"
        aligns = "".join("l" if i < table.fixed else "c" for i in columns)
        out = [f"\\begin{{{env}}}[tbp]", r"\centering", f"\\caption{{{latex_escape(caption)}}}", f"\\label{{{label}}}",
               r"\footnotesize", f"\\setlength{{\\tabcolsep}}{{{TABCOLSEP}}}", f"\\begin{{tabular}}{{{aligns}}}",
               r"\toprule"]
        if any(header):
            out += [_row(header), r"\midrule"]
        stacked = any(isinstance(c, tuple) for r in rows for c in r)  # rows of several lines, set apart
        out += [_row(r) + (r" \addlinespace[2pt]" if stacked and i < len(rows) - 1 else "") for i, r in enumerate(rows)]
        out += [r"\bottomrule", r"\end{tabular}"]
        if table.notes:
            out += [r"\par\smallskip", r"{\raggedright\footnotesize",
                    "\\par\n".join(breakable(note) for note in table.notes) + r"\par}"]
        out.append(f"\\end{{{env}}}")
        floats.append("\n".join(out))
    return "\n\n".join(floats)


def _row(cells) -> str:
    # a row opening with "[" would be read as the optional argument of the previous row's \\
    text = " & ".join(_cell(c) for c in cells)
    return ("{}" + text if text.startswith("[") else text) + r" \\"


def _cell(cell) -> str:
    """A cell's text escaped; several lines stacked (a nested tabular, no space of its own)."""
    lines = [latex_escape(line) for line in _lines(cell)]
    if len(lines) == 1:
        return lines[0]
    return r"\begin{tabular}[t]{@{}c@{}}" + r"\\".join("{}" + line for line in lines) + r"\end{tabular}"


def breakable(text: str) -> str:
    """`text` escaped for a paragraph, its long words (paths, digests) allowed to break: after a path's separators
    and every 8 characters of a long run of hex digits."""
    def mark(match):
        word = match.group()
        if len(word) < _LONG_WORD:
            return word
        word = re.sub(r"([/_.\-=,])", rf"\1{_BREAK}", word)
        return _DIGEST_RUN.sub(lambda m: _BREAK.join(m.group()[i:i + 8] for i in range(0, len(m.group()), 8)), word)

    return latex_escape(re.sub(r"\S+", mark, str(text))).replace(_BREAK, r"\allowbreak{}")


def latex_document(tables: list, source: str) -> str:
    """The tables as one file to \\input (booktabs), each labelled by what it holds."""
    head = [f"% {line}" for line in (f"written by roarfast from {source}", r"needs \usepackage{booktabs}")]
    return "\n\n".join(["\n".join(head), *(latex_table(t) for t in tables)]) + "\n"
