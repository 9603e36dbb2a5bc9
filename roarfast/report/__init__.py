"""The report: tables, figures and verdicts from a run directory (README, "The whole benchmark"), in four
steps that each take plain data from the one before — load (roarfast.report.load: the run directory's
measurements, read once), analyse (.analysis: the numbers the sections share, then each section's), draw
(.figures: each section's figures) and render (.render: the page of the sections in order, as index.md and
index.html, beside cells.csv and summary.json). What the page holds is the list of sections
(roarfast.report.sections, one module each: its numbers, its tables or lines, its figures).

Writes `<run_dir>/report/` by default; can be rerun at any time, also while a sweep is writing.
From Python: `report = write_report(run_dir)`; `report.index_html`, `report.verdict_lines()`,
`report.summary`.
"""

from dataclasses import dataclass, field
from pathlib import Path

from roarfast.report import sections
from roarfast.report.analysis import analyse
from roarfast.report.load import load_run
from roarfast.report.render import page, write_files
from roarfast.report.text import verdict_lines


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


def write_report(run_dir, out_dir=None, dataset=None) -> Report:
    """Reads the run directory (writing nothing there), writes the report under out_dir (default: the run
    directory's report directory) and returns it; `dataset`: the run's Dataset when the caller holds it (a
    Study's, which the run directory may not be able to load). Raises UserError, writing nothing, when the run
    directory has no results.sqlite or no finished cells, or when out_dir cannot be written."""
    from roarfast.atomic import check_writable
    from roarfast.report.figures import draw
    from roarfast.rundir import RunDir

    run = RunDir(run_dir)
    loaded = load_run(run, dataset)
    listed = sections.ordered()
    summary = analyse(loaded, listed)
    out_dir = Path(out_dir) if out_dir is not None else run.report_dir
    check_writable(out_dir, 0, "--out")  # the run directory itself may be read-only: only out_dir is written
    shown = draw(listed, summary, loaded.context, run, out_dir)
    files = write_files(summary, page(listed, summary, shown), loaded.cells, out_dir)
    return Report(out_dir, summary, [f["file"] for f in summary["figures"]] + files)
