"""Output for a paper: the report's figures as PNG/SVG/PDF at a chosen dpi, laid out with their legends inside
the axes; tables.tex (booktabs, LaTeX's specials escaped) and tables.md; roarfast.plot's figures from a
results frame."""

import re
import xml.etree.ElementTree as ET

import matplotlib.image as mpimg
from matplotlib.text import Text
import numpy as np
import pandas
import pytest
from click.testing import CliRunner

import roarfast
from roarfast.cli import main
from roarfast.errors import UserError
from roarfast.report import write_report
from roarfast.report.figures import COLUMN, MIN_PANEL, PAGE, panel_grid, pyplot, save, styled
from roarfast.report.sections.accuracy import figure_accuracy
from roarfast.report.sections.controls import figure_controls
from roarfast.report.sections.rankings import figures as ranking_figures
from roarfast.report.latex import breakable, latex_escape, latex_table, parts
from roarfast.report.tables import PaperTable
from roarfast.results import load
from roarfast.rundir.configurations import configurations
from tests.test_compare import IXG, RANDOM, SG5, make_run, make_shared_run


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return make_run(tmp_path_factory.mktemp("paper") / "run", (2,))


@pytest.fixture(scope="module")
def report(run):
    return write_report(run, run.parent / "report", figure_formats="pdf,png,svg", dpi=40)


def test_every_figure_is_written_in_every_format_asked_and_each_file_is_valid(report):
    figures = report.summary["figures"]
    assert figures and all(len(f["files"]) == 3 for f in figures)
    for figure in figures:
        png, svg, pdf = (report.out_dir / name for name in figure["files"])  # FORMATS' order, whatever was asked
        assert figure["file"] == png.name  # the page shows the PNG
        assert ET.parse(svg).getroot().tag.endswith("svg")
        assert pdf.read_bytes().startswith(b"%PDF")
        assert mpimg.imread(png).shape[2] in (3, 4)
    assert "data:image/png;base64" in report.index_html.read_text()


def test_dpi_scales_the_png_and_an_svg_alone_is_embedded(run, report, tmp_path):
    (entry,) = [f for f in report.summary["figures"] if f["kind"] == "accuracy"]
    small = mpimg.imread(report.out_dir / entry["file"])  # at dpi 40
    with styled() as plt:
        fig = figure_accuracy(report.summary, "dataset-mean", PAGE)
        (png,) = save(fig, tmp_path / "twice", ("png",), 80)
        plt.close(fig)
    assert mpimg.imread(png).shape[0] == pytest.approx(2 * small.shape[0], rel=0.1)
    only_svg = write_report(run, tmp_path / "s", figure_formats="svg")
    page = only_svg.index_html.read_text()
    assert "data:image/svg+xml;base64" in page and "image/png" not in page
    assert not list(only_svg.out_dir.glob("*.png"))


@pytest.mark.parametrize("args, says", [(["--figure-format", "png,gif"], "--figure-format png,gif: give one or more of"),
                                        (["--dpi", "5"], "--dpi should be a whole number from 20 to 1200")])
def test_a_bad_format_or_dpi_is_one_line(run, tmp_path, args, says):
    result = CliRunner().invoke(main, ["report", "--run-dir", str(run), "--out", str(tmp_path / "r"), *args])
    lines = result.output.strip().splitlines()
    assert result.exit_code == 1 and len(lines) == 1 and says in lines[0], result.output
    assert not (tmp_path / "r").exists()


def text_sizes(fig) -> dict:
    """{text: size in points} of every piece of text `fig` shows."""
    return {t.get_text(): t.get_fontsize() for t in fig.findobj(Text)
            if t.get_visible() and t.get_text().strip() and (t.axes is None or t.axes.get_visible())}


@pytest.mark.parametrize("width", [COLUMN, PAGE])
def test_figures_are_laid_out_for_their_print_width_with_readable_text_inside(report, run, width, tmp_path):
    summary = report.summary
    with styled():  # as the report and the paper draw them
        drawn = [figure_accuracy(summary, "dataset-mean", width), figure_controls(summary, width),
                 *(f.draw(width) for f in ranking_figures(summary, None, run))]
        for fig in drawn:
            assert fig.get_figwidth() == pytest.approx(width)
            sizes = text_sizes(fig)
            assert sizes and min(sizes.values()) >= 7, {t: size for t, size in sizes.items() if size < 7}
            fig.canvas.draw()
            drawn_box = fig.get_tightbbox(fig.canvas.get_renderer())  # inches: everything drawn, text included
            assert drawn_box.x0 >= -0.01 and drawn_box.x1 <= width + 0.01 and drawn_box.y0 >= -0.01 \
                and drawn_box.y1 <= fig.get_figheight() + 0.01, drawn_box
            for legend in fig.legends:  # below the panels, covering none
                box = legend.get_window_extent()
                assert not any(box.overlaps(ax.get_window_extent()) for ax in fig.axes if ax.get_visible())
            (pdf,) = save(fig, tmp_path / "f", ("pdf",))
            media = re.search(rb"/MediaBox \[\s*0 0 ([\d.]+) ([\d.]+)", pdf.read_bytes())
            assert float(media.group(1)) == pytest.approx(72 * width, abs=0.5)  # its print size, not cropped
        fig, axes, columns = panel_grid(pyplot(), 2, width)  # a ROAR and a KAR panel
        assert columns == (2 if width == PAGE else 1)  # side by side across the page, stacked in a column
        assert min(ax.get_position().width * width for ax in axes) >= 0.6 * MIN_PANEL


def test_latex_specials_are_escaped_and_columns_match():
    assert latex_escape("50% a_b & #1 {x} $y ~ ^ \\") == \
        r"50\% a\_b \& \#1 \{x\} \$y \textasciitilde{} \textasciicircum{} \textbackslash{}"
    text = latex_table(PaperTable("tab:x", "Ranking_1 at 50%", ["method", "50%", "seeds"],
                                  [["[epochs 2] ixg", ("21.0", "[18.5, 23.5]"), "3"], ["a|b", "x", "1"]], ["a_b"]))
    lines = text.splitlines()
    assert r"\begin{tabular}{lcc}" in lines and r"\toprule" in lines and r"\bottomrule" in lines
    assert r"\caption{Ranking\_1 at 50\%}" in lines and r"method & 50\% & seeds \\" in lines
    rows = lines[lines.index(r"\midrule") + 1:lines.index(r"\bottomrule")]
    assert all(row.count(" & ") == 2 for row in rows)  # one cell per column, none split by an escaped &
    assert rows[0].startswith("{}[epochs 2]")  # not read as the previous \\'s optional argument
    assert r"\begin{tabular}[t]{@{}c@{}}{}21.0\\{}[18.5, 23.5]\end{tabular}" in rows[0]  # a cell of two lines
    assert r"a\_b\par}" in text  # the note, escaped


def test_a_table_goes_in_a_column_across_the_page_or_in_parts_by_its_width():
    def table(columns: int) -> PaperTable:
        return PaperTable("tab:w", "w", ["estimator"] + [f"{10 * i}%" for i in range(columns)],
                          [["sg-sq-grad"] + [("94.8", "[82.9, 100.0]")] * columns], [])

    narrow, wide, wider = (latex_table(table(n)) for n in (3, 6, 11))
    assert narrow.startswith(r"\begin{table}[tbp]") and narrow.count(r"\begin{table") == 1
    assert wide.startswith(r"\begin{table*}[tbp]") and wide.count(r"\begin{table") == 1
    assert wider.count(r"\begin{table*}") == 2 and r"\label{tab:w-part2}" in wider  # split, evenly
    assert [len(p) for p in parts(table(11))] == [1 + 6, 1 + 5]  # the estimator column repeated in each part
    assert all(r"sg-sq-grad" in part for part in wider.split(r"\end{table*}")[:2])


def test_long_words_in_a_note_may_break():
    note = breakable("adopted weights /data/some/long/path/weights.pt (sha256 " + "f" * 64 + ")")
    assert r"/\allowbreak{}some/\allowbreak{}" in note and note.count(r"ffffffff\allowbreak{}") == 7


def test_plot_functions_take_a_results_frame_and_return_figures(run):
    frame = load(run)
    fig = roarfast.plot.accuracy_curves(frame)
    (roar,) = fig.axes
    labels = {line.get_label() for line in roar.get_lines() if not line.get_label().startswith("_")}
    assert {"random", "ixg", "chance"} <= labels  # chance from the cells' recorded test_chance
    fig = roarfast.plot.ranking(frame, mode="roar")
    ax = fig.axes[0]
    top_first = [t.get_text() for t in sorted(ax.get_yticklabels(), key=lambda t: -t.get_position()[1])]
    assert top_first == ["ixg", "random"]  # ROAR: lower is better, ixg's curve is far below random's
    widths = sorted(round(p.get_width(), 6) for p in ax.patches)
    assert widths == pytest.approx(sorted(100 * sum(v) / len(v) for v in (IXG[2], RANDOM[2])))


def test_plot_refuses_a_frame_mixing_configurations(run):
    frame = load(run)
    twice = pandas.concat([frame, frame])
    with pytest.raises(UserError, match="twice: it mixes configurations"):
        roarfast.plot.accuracy_curves(twice)
    labelled = pandas.concat([frame.assign(configuration="a"), frame.assign(configuration="b")])
    with pytest.raises(UserError, match="holds 2 configurations"):
        roarfast.plot.ranking(labelled)
    assert roarfast.plot.ranking(labelled, configuration="b").axes


def test_plot_takes_any_selector_a_configuration_answers_to(tmp_path):
    run = make_shared_run(tmp_path / "run")
    frame = load(run.root)
    ids = {name: cid for cid, name in zip(frame["configuration"], frame["name"])}
    (label,) = [r["label"] for r in configurations(run) if r["id"] == ids["sg5"]]  # what it was shown as before
    assert label != "sg5"
    for selector in ("sg5", label, ids["sg5"], ids["sg5"][:6]):  # its name, its label, its id, an id prefix
        fig = roarfast.plot.ranking(frame, configuration=selector)
        widths = {t.get_text(): p.get_width() for t, p in zip(fig.axes[0].get_yticklabels(), fig.axes[0].patches)}
        assert widths["sg-sq-grad"] == pytest.approx(100 * np.mean([np.mean(SG5[0.1]), np.mean(SG5[0.5][:3])]))
    with pytest.raises(UserError) as err:
        roarfast.plot.accuracy_curves(frame, configuration="sg7")
    lines = str(err.value).splitlines()
    assert len(lines) == 1 and "configuration= sg7: no such configuration" in lines[0]
    assert all(f"{ids[name][:8]} [{name}]" in lines[0] for name in ("sg15", "sg5", "adopted"))
    with pytest.raises(UserError, match=r"holds 3 configurations \(.*\[sg15\].*\): name one with configuration="):
        roarfast.plot.accuracy_curves(frame)
