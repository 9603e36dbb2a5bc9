"""The report's figures (matplotlib, Agg: files only): the draw step, which saves every section's figures
(each configuration's apart), and the pieces the sections' figures share — a method's curve with its
interval as error bars, random as the reference (a visible marker with its interval, also with one
fraction, and a band between fractions), points of different methods side by side, chance and the base model as
lines, one colour per method in every figure, one legend for all panels (below them, as wide as the figure
allows), the accuracy panel of one mode and fill with its leaky points marked, and the ranking panel.

Every figure is drawn for the width it is printed at (COLUMN: one column of a two-column paper, 3.3 in; PAGE:
the whole text width, 7 in; the report's page shows PAGE), its panels laid out to fit (panel_grid: as many side by
side as keep each at least MIN_PANEL wide), in one style (STYLE: constrained layout, no text under 7 pt at that
size, editable text in SVG and PDF) and saved at exactly that size (no cropping: the size is the print size) in
each format asked (FORMATS, matplotlib's own backends) at the dpi asked. What a figure shows is its caption's to
say (a section Figure's title): no figure carries a title of its own above its panels.
"""

from collections import defaultdict
from contextlib import contextmanager
from itertools import pairwise
from pathlib import Path

from roarfast.errors import UserError

from roarfast.modes import KAR, ROAR, control_mode
from roarfast.report.analysis import LEAK_INCONCLUSIVE, LEAK_STANDS, LEAKY_NO_VERDICT, parts_of, shown_bounds
from roarfast.report.load import method_order
from roarfast.report.sections import RUN
from roarfast.report.text import ranked_by

AXIS = {ROAR: "fraction of pixels removed (%)", KAR: "fraction of pixels kept (%)"}
#: how a leaky cell is marked on its curve, per leak reading: (marker, colour, legend label)
LEAK_MARKS = {LEAK_STANDS: ("o", "black", "leaky control, verdict stands"),
              LEAK_INCONCLUSIVE: ("s", "red", "leaky control could explain the verdict"),
              LEAKY_NO_VERDICT: ("D", "0.45", "leaky control, no verdict drawn")}
#: the resolution of a PNG (SVG and PDF are vector: their dpi only sizes embedded images)
FIGURE_DPI = 150
#: the widths a figure is printed at (inches): one column of a two-column paper, and the whole text width
COLUMN, PAGE = 3.3, 7.0
#: the narrowest a panel may be at print size (inches), and a panel's height
MIN_PANEL, PANEL_HEIGHT = 2.3, 2.2
#: the smallest text at print size (points): what a reader can read on paper
MIN_TEXT_PT = 7
#: the formats a figure is saved in (matplotlib's Agg, SVG and PDF backends), and those the page can embed
FORMATS = ("png", "svg", "pdf")
EMBEDDABLE = ("png", "svg")
#: the one style of every figure: laid out without overlapping labels, no text under MIN_TEXT_PT at print size,
#: text left as text (SVG) and TrueType (PDF) so a paper's editor can restyle it
STYLE = {"figure.constrained_layout.use": True, "font.size": 8, "axes.titlesize": 8, "axes.labelsize": 8,
         "xtick.labelsize": MIN_TEXT_PT, "ytick.labelsize": MIN_TEXT_PT, "legend.fontsize": MIN_TEXT_PT,
         "legend.framealpha": 0.85, "figure.titlesize": 8, "axes.spines.top": False, "axes.spines.right": False,
         "axes.linewidth": 0.6, "lines.linewidth": 1.2, "xtick.major.width": 0.6, "ytick.major.width": 0.6,
         "grid.linewidth": 0.5, "svg.fonttype": "none", "pdf.fonttype": 42}
#: metadata left out of a saved file so the same figure gives the same bytes (no creation date)
_METADATA = {"svg": {"Date": None}, "pdf": {"CreationDate": None}, "png": {}}


def check_formats(formats, dpi: int) -> tuple:
    """The figure formats asked ("png,svg" or a sequence), in FORMATS' order, checked with the dpi: a UserError
    naming what is accepted."""
    asked = [f.strip().lower().lstrip(".") for f in (formats.split(",") if isinstance(formats, str) else formats)]
    unknown = [f for f in asked if f not in FORMATS]
    if unknown or not asked:
        raise UserError(f"--figure-format {','.join(asked) or '(none)'}: give one or more of {', '.join(FORMATS)}, "
                        f"comma-separated")
    if not isinstance(dpi, int) or isinstance(dpi, bool) or not 20 <= dpi <= 1200:
        raise UserError(f"--dpi should be a whole number from 20 to 1200, got {dpi!r}")
    return tuple(f for f in FORMATS if f in asked)


def save(fig, stem: Path, formats=("png",), dpi: int = FIGURE_DPI) -> list[Path]:
    """Saves `fig` as stem.<format> for each format, at its size (not cropped: it is the print size); returns the
    paths."""
    paths = []
    for fmt in formats:
        path = stem.with_name(f"{stem.name}.{fmt}")
        fig.savefig(path, format=fmt, dpi=dpi, metadata=_METADATA[fmt])
        paths.append(path)
    return paths


def panel_grid(plt, count: int, width: float, height: float = PANEL_HEIGHT, min_width: float = MIN_PANEL):
    """A figure `width` inches wide with `count` panels laid out in rows, as many side by side as keep each at
    least `min_width` wide: (figure, [axes], columns), the grid's unused axes hidden."""
    columns = max(1, min(count, int(width // min_width)))
    rows = -(-count // columns)
    fig, axes = plt.subplots(rows, columns, figsize=(width, rows * height), squeeze=False, layout="constrained")
    for ax in axes.flat[count:]:
        ax.set_visible(False)
    return fig, list(axes.flat)[:count], columns


@contextmanager
def styled():
    """matplotlib's pyplot with STYLE in force (figures made and saved inside keep it)."""
    plt = pyplot()
    with plt.rc_context(STYLE):
        yield plt


def draw(sections: list, summary: dict, loaded, run, out_dir: Path, formats=("png",), dpi: int = FIGURE_DPI,
         width: float = PAGE, suffix: str = "") -> dict:
    """Draws and saves every section's figures `width` inches wide into out_dir in each of `formats` (FORMATS) at
    `dpi`, one configuration at a time (LoadedRun `loaded`'s parts, whose summaries analysis.parts_of lists; a
    section with scope RUN draws from the run's summary and gets `loaded` as its context): with several, each
    configuration's figures are saved under file names ending in its slug, their titles labelled; `suffix` ends
    every file's name (the paper's "-column", "-page"). Lists them in summary["figures"] ([{file, files, title,
    kind, name, wide, configuration_id}]: file, the one the page shows (PNG, else SVG, else the first written);
    files, every format's; kind: the section's name, plus configuration: the label, where labelled; name: the
    file's stem before the slug and suffix; wide: printed across the page rather than in a column; fill by fill,
    then those of the whole run); returns section name -> the figures it drew, for the page."""
    parts = parts_of(summary)
    several = len(parts) > 1
    shown, listed = defaultdict(list), []
    shows = next((f for f in EMBEDDABLE if f in formats), formats[0])
    with styled() as plt:
        for section in sections:
            if section.figures is None:
                continue
            if section.scope == RUN:
                asked = [(None, section.figures(summary, loaded, run))]
            else:
                asked = [(p, section.figures(p, part.context, run)) for p, part in zip(parts, loaded.parts)]
            for part, figures in asked:
                for figure in figures:
                    fig = figure.draw(width)
                    if fig is None:
                        continue
                    stem = figure.file.rpartition(".")[0] or figure.file
                    entry = {"title": figure.title, "kind": section.name, "wide": figure.wide, "name": stem,
                             "configuration_id": None if part is None else part["configuration"].get("id")}
                    if part is not None and several:
                        label = part["configuration"]["label"]
                        stem = f"{stem}_{part['configuration']['slug']}"
                        entry.update(title=f"[{label}] {figure.title}", configuration=label)
                    stem += suffix
                    entry.update(file=f"{stem}.{shows}", files=[f"{stem}.{fmt}" for fmt in formats])
                    save(fig, out_dir / stem, formats, dpi)
                    plt.close(fig)
                    shown[section.name].append(entry)
                    listed.append((figure.fill, entry))
    fills = [fill for p in parts for fill in p["fills"]]
    position = {fill: fills.index(fill) for fill in fills}
    summary["figures"] = [entry for _, entry in sorted(listed, key=lambda t: position.get(t[0], len(position)))]
    return shown


def pyplot():
    """matplotlib.pyplot on the Agg backend: files only, no display needed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def curves_of(summary: dict, mode: str, fill) -> dict:
    """method -> sorted [(fraction, group)] of one mode and fill."""
    out = defaultdict(list)
    for g in summary["groups"]:
        if g["mode"] == mode and g["fill"] == fill:
            out[g["method"]].append((g["fraction"], g))
    return {m: sorted(v, key=lambda t: t[0]) for m, v in out.items()}


def method_colors(summary: dict) -> dict:
    """method -> colour, the same in every figure: tab20's dark shades first, then its light ones."""
    import matplotlib

    palette = matplotlib.colormaps["tab20"].colors
    palette = palette[0::2] + palette[1::2]
    methods = sorted({g["method"] for g in summary["groups"]} - {"random"})
    return {m: palette[i % len(palette)] for i, m in enumerate(methods)}


#: what a figure's title says of its intervals
INTERVALS = "bars: 95% t-interval over seeds (random's also shaded between fractions)"
#: with one fraction, the points of a panel spread over this many percentage points of its x axis
SPREAD_ONE_FRACTION = 6.0
#: with several, over this share of the smallest gap between two fractions
SPREAD_SHARE = 0.25


def offsets(names: list, fractions: list) -> dict:
    """name -> horizontal offset (percentage points) of its points in a panel, so that points of different
    methods at one fraction do not cover each other: spread evenly, centred on the fraction."""
    xs = sorted({100 * f for f in fractions})
    width = SPREAD_ONE_FRACTION if len(xs) < 2 else SPREAD_SHARE * min(b - a for a, b in pairwise(xs))
    if len(names) < 2:
        return {name: 0.0 for name in names}
    return {name: width * (i / (len(names) - 1) - 0.5) for i, name in enumerate(names)}


def _errorbars(ax, xs, points, color, **style) -> None:
    """The 95% intervals (as shown: clipped) of `points` at `xs` as error bars, where n >= 2."""
    bars = [(x, 100 * g["mean"], *(100 * b for b in shown_bounds(g))) for x, (_, g) in zip(xs, points)
            if g["low"] is not None]
    if bars:
        x, y, lo, hi = zip(*bars)
        ax.errorbar(x, y, yerr=[[yi - li for yi, li in zip(y, lo)], [hi_ - yi for yi, hi_ in zip(y, hi)]],
                    fmt="none", ecolor=color, elinewidth=0.9, capsize=2, **style)


def draw_curve(ax, points, label, color=None, linestyle="-", dx: float = 0.0):
    """One method's mean accuracy (%) against fraction (%) (shifted by dx), its 95% interval as error bars
    where n >= 2 (bars, not bands: several methods' bands would cover each other)."""
    x = [100 * f + dx for f, _ in points]
    y = [100 * g["mean"] for _, g in points]
    (line,) = ax.plot(x, y, marker="o", markersize=3.5, label=label, color=color, linestyle=linestyle)
    _errorbars(ax, x, points, line.get_color())
    return line


def draw_random(ax, points, dx: float = 0.0):
    """random, the reference: a dashed grey line with diamond markers (visible with one fraction too), its
    95% interval as error bars and, between the fractions, as a grey band."""
    x = [100 * f + dx for f, _ in points]
    y = [100 * g["mean"] for _, g in points]
    ax.plot(x, y, color="0.3", linestyle="--", marker="D", markersize=5, label="random", zorder=4)
    _errorbars(ax, x, points, "0.3", zorder=4)
    spread = [(xi, *(100 * b for b in shown_bounds(g))) for xi, (_, g) in zip(x, points) if g["low"] is not None]
    if len(spread) >= 2:
        xs, lo, hi = zip(*spread)
        ax.fill_between(xs, lo, hi, color="0.6", alpha=0.3, linewidth=0)


def figure_legend(fig, axes) -> None:
    """One legend for all panels, every label drawn in any panel once, below them: in as many columns as fit the
    figure's width, the figure made taller by the legend's height so the panels keep theirs."""
    entries = {}
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            entries.setdefault(label, handle)
    if not entries:
        return
    renderer = fig.canvas.get_renderer()
    room = 0.98 * fig.get_figwidth() * fig.dpi
    for columns in range(min(len(entries), 4), 0, -1):
        legend = fig.legend(list(entries.values()), list(entries), loc="outside lower center", ncols=columns,
                            frameon=False, handlelength=1.8, columnspacing=1.2)
        if columns == 1 or legend.get_window_extent(renderer).width <= room:
            break
        legend.remove()
    fig.set_figheight(fig.get_figheight() + legend.get_window_extent(renderer).height / fig.dpi + 0.05)


def plural(count: int, noun: str) -> str:
    """"1 epoch", "3 epochs"."""
    return f"{count} {noun}{'' if count == 1 else 's'}"


def decorate(ax, summary, mode, title):
    """A panel's chance and base-model lines, its axes (the fractions run in `mode` or its control; room
    around a single one) and title."""
    if summary["chance"] is not None:
        ax.axhline(100 * summary["chance"], color="0.2", linestyle=":", linewidth=1, label="chance")
    if summary["base"].get("test_acc") is not None:
        epochs = summary["base"].get("epochs")
        ax.axhline(100 * summary["base"]["test_acc"], color="tab:green", linestyle="-.", linewidth=1,
                   label="base model (unmodified" + (f", {plural(epochs, 'epoch')})" if epochs else ")"))
    fractions = panel_fractions(summary, mode)
    ax.set_xticks(fractions, [f"{f:g}" for f in fractions])
    if len(fractions) == 1:
        ax.set_xlim(fractions[0] - 2 * SPREAD_ONE_FRACTION, fractions[0] + 2 * SPREAD_ONE_FRACTION)
    ax.set_xlabel(AXIS.get(mode, "fraction (%)"))
    ax.set_ylabel("test accuracy (%)")
    ax.set_title(title)
    ax.set_ylim(0, 102)
    ax.grid(alpha=0.3)


def panel_fractions(summary: dict, mode: str) -> list:
    """The fractions (%) run in `mode` or its control."""
    return sorted({100 * g["fraction"] for g in summary["groups"] if g["mode"] in (mode, control_mode(mode))})


def draw_methods(ax, summary: dict, mode: str, curves: dict, methods: list, colors: dict) -> dict:
    """The curves of `methods` (random drawn as the reference), points at one fraction side by side; returns
    each method's offset (offsets)."""
    dx = offsets(methods, [f / 100 for f in panel_fractions(summary, mode)])
    for method in methods:
        if method == "random":
            draw_random(ax, curves["random"], dx["random"])
        else:
            draw_curve(ax, curves[method], method, colors[method], dx=dx[method])
    return dx


def accuracy_panel(ax, summary: dict, mode: str, fill: str, colors: dict, title: str) -> None:
    """One panel of the paper's figure: every estimator's curve of `mode` and `fill`, random as the reference
    (draw_random), points of different methods side by side, leaky points marked by what their leak does to
    the verdict (LEAK_MARKS)."""
    curves = curves_of(summary, mode, fill)
    dx = draw_methods(ax, summary, mode, curves, sorted(curves, key=method_order), colors)
    decorate(ax, summary, mode, title)
    for leak, (marker, color, label) in LEAK_MARKS.items():  # last: their legend entries stay together
        # ringed: the control alone is above chance, so the point partly measures the pattern's shape;
        # the mark says whether the verdict survives that (analysis.leak_reading: the leak's direction)
        leaky = [e for e in summary["verdicts"] if (e["mode"], e["fill"], e["leak"]) == (mode, fill, leak)]
        if leaky:
            ax.scatter([100 * e["fraction"] + dx.get(e["method"], 0.0) for e in leaky],
                       [100 * e["mean"] for e in leaky], s=80,
                       marker=marker, facecolors="none", edgecolors=color, linewidths=1.1, zorder=5, label=label)


def ranking_panel(ax, ranking: dict, colors: dict, title: str) -> None:
    """A ranking of one mode and fill (rankings.rankings' entry) as horizontal bars, best at the top: each
    estimator's AUC (or, with one fraction, accuracy) with its 95% interval as an error bar, random grey and
    hatched."""
    entries = ranking["entries"]
    ys = list(range(len(entries)))[::-1]
    for y, e in zip(ys, entries):
        random = e["method"] == "random"
        ax.barh(y, 100 * e["mean"], height=0.6, color="0.75" if random else colors.get(e["method"]),
                hatch="//" if random else None, edgecolor="0.3" if random else "none")
        if e["low"] is not None:
            low, high = shown_bounds(e)
            ax.errorbar(100 * e["mean"], y, xerr=[[100 * (e["mean"] - low)], [100 * (high - e["mean"])]], fmt="none",
                        ecolor="0.15", elinewidth=1, capsize=3)
    ax.set_yticks(ys, [e["method"] for e in entries])
    better = "lower" if ranking["lower_is_better"] else "higher"
    ax.set_xlabel(f"{ranked_by(ranking['fractions'])} (%), {better} is better")
    ax.set_xlim(0, 100)
    ax.set_title(title)
    ax.grid(axis="x", alpha=0.3)
