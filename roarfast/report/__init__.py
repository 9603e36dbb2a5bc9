"""The report: tables, figures and verdicts from a run directory (README, "The whole benchmark"), in four
steps that each take plain data from the one before — load (roarfast.report.load: the run directory's
measurements, read once), analyse (.analysis: the numbers the sections share, then each section's), draw
(.figures: each section's figures) and render (.render: the page of the sections in order, as index.md and
index.html, beside cells.csv and summary.json). What the page holds is the list of sections
(roarfast.report.sections, one module each: its numbers, its tables or lines, its figures).

Writes `<run_dir>/report/` by default, built in a temporary directory beside it and swapped in whole
(roarfast.common.atomic.replace_dir), so a kill or a full disk leaves the previous report whole; can be rerun at
any time, also while a sweep is writing. A run directory holding several configurations of the cells
(roarfast.rundir.catalog) has each reported apart. From Python: `report = write_report(run_dir)`;
`report.index_html`, `report.verdict_lines()`, `report.summary` (with several configurations, each one's
numbers in summary["configurations"]: roarfast.report.analysis.parts_of lists them either way).
"""

from dataclasses import dataclass, field
from pathlib import Path

from roarfast.report import sections
from roarfast.report.analysis import analyse
from roarfast.report.figures import FIGURE_DPI, check_formats, draw
from roarfast.report.load import ALL, load_run
from roarfast.report.output_dir import write_whole
from roarfast.report.render import REPORT_FILES, page, write_files
from roarfast.report.tables import paper_tables
from roarfast.report.text import verdict_lines
from roarfast.rundir.directory import RunDir
from roarfast.stats.levels import margin_of

#: the file that marks a directory as a report roarfast wrote: such a directory is replaced whole by the next
#: report, and no other is (but an empty one)
MARKER = ".roarfast-report"


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
        """One line per estimator x mode x fraction verdict (with what its mask-only control's leak does to
        it), a line per leaky control of random, and a ranking line per mode and fill."""
        return verdict_lines(self.summary)

    def _repr_html_(self) -> str:
        """The page shown inline in a notebook: index.html's body (the tables, the verdict lines, the figures
        embedded), without its style sheet, which would restyle the whole notebook."""
        page = self.index_html.read_text()
        body = page.split("<body>", 1)[-1].rsplit("</body>", 1)[0]
        return f"<div class='roarfast-report'>{body}</div>"


def write_report(run_dir, out_dir=None, dataset=None, config: str | None = None, figure_formats=("png",),
                 dpi: int | None = None, margin: float | None = None) -> Report:
    """Reads the run directory (writing nothing there), writes the report of the configuration `config` names
    (a label or an id prefix; "all": every configuration, each apart; None: the latest request's, HEAD's)
    under out_dir (default: the run directory's report directory) and returns it; `dataset`: the run's Dataset
    when the caller holds it (a Study's, which the run directory may not be able to load); `figure_formats`:
    the figures' formats (png, svg, pdf: a sequence or "png,svg"), `dpi` a PNG's resolution (None:
    figures.FIGURE_DPI); `margin`: the smallest accuracy difference worth reporting, in points (--margin; None:
    the one the configuration's sweep recorded, else roarfast.stats.MARGIN's 5); beside the page,
    tables.tex (booktabs) and tables.md hold the rankings, verdicts and accuracies. Every file is built in a temporary directory
    beside out_dir, which replaces out_dir whole only once all are written: a failure or a kill leaves the
    previous report whole. Raises UserError, writing nothing, when the run directory has no results.sqlite
    or no finished cells, when out_dir cannot be written, or when it is a directory holding files no report
    wrote (the report replaces its directory whole); a failed write is one line saying what was left."""
    dpi = FIGURE_DPI if dpi is None else dpi
    margin = margin_of(margin, "--margin")
    formats = check_formats(figure_formats, dpi)
    run = RunDir(run_dir)
    loaded = load_run(run, dataset, config)
    listed = sections.ordered()
    summary = analyse(loaded, listed, margin)
    out_dir = Path(out_dir) if out_dir is not None else run.report_dir
    cells = [cell for part in loaded.parts for cell in part.cells]

    def build(tmp: Path) -> list:
        shown = draw(listed, summary, loaded, run, tmp, formats, dpi)
        return write_files(summary, page(listed, summary, shown), cells, tmp, paper_tables(summary), str(run.root))

    files = write_whole(out_dir, build, "report", MARKER, _written_before)
    return Report(out_dir, summary, [name for f in summary["figures"] for name in f["files"]] + files)


def _written_before(names: set) -> bool:
    """Whether a directory without the marker holding only render.REPORT_FILES and PNGs, index.html and
    summary.json among them, is a report written before the marker existed."""
    return {"index.html", "summary.json"} <= names and all(n in REPORT_FILES or n.endswith(".png") for n in names)
