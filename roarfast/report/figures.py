"""The report's figures (matplotlib, Agg: files only): the draw step, which saves every section's figures,
and the pieces the sections' figures share — a method's curve with its interval, random as a band, chance
and the base model as lines, one colour per method in every figure, one legend for all panels, and the
accuracy panel of one mode and fill with its leaky points marked.
"""

from collections import defaultdict
from pathlib import Path

from roarfast.modes import KAR, ROAR, control_mode
from roarfast.report.analysis import LEAK_INCONCLUSIVE, LEAK_STANDS, LEAKY_NO_VERDICT, shown_bounds
from roarfast.report.load import method_order

AXIS = {ROAR: "fraction of pixels removed (%)", KAR: "fraction of pixels kept (%)"}
#: how a leaky cell is marked on its curve, per leak reading: (marker, colour, legend label)
LEAK_MARKS = {LEAK_STANDS: ("o", "black", "leaky control, verdict stands"),
              LEAK_INCONCLUSIVE: ("s", "red", "leaky control, verdict INCONCLUSIVE"),
              LEAKY_NO_VERDICT: ("D", "0.45", "leaky control, no verdict drawn")}
FIGURE_DPI = 110


def draw(sections: list, summary: dict, context, run, out_dir: Path) -> dict:
    """Draws and saves every section's figures into out_dir and lists them in summary["figures"] ([{file,
    title, kind}], kind: the section's name; fill by fill, then those of the whole run); returns section
    name -> the figures it drew, for the page."""
    plt = pyplot()
    shown, listed = defaultdict(list), []
    for section in sections:
        if section.figures is None:
            continue
        for figure in section.figures(summary, context, run):
            fig = figure.draw()
            if fig is None:
                continue
            fig.savefig(out_dir / figure.file, dpi=FIGURE_DPI, bbox_inches="tight")
            plt.close(fig)
            entry = {"file": figure.file, "title": figure.title, "kind": section.name}
            shown[section.name].append(entry)
            listed.append((figure.fill, entry))
    position = {fill: i for i, fill in enumerate(summary["fills"])}
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


def draw_curve(ax, points, label, color=None, linestyle="-"):
    """One method's mean accuracy (%) against fraction (%), its 95% interval shaded where n >= 2."""
    x = [100 * f for f, _ in points]
    y = [100 * g["mean"] for _, g in points]
    (line,) = ax.plot(x, y, marker="o", markersize=4, label=label, color=color, linestyle=linestyle)
    spread = [(xi, *(100 * b for b in shown_bounds(g))) for xi, (_, g) in zip(x, points) if g["low"] is not None]
    if spread:
        xs, lo, hi = zip(*spread)
        ax.fill_between(xs, lo, hi, color=line.get_color(), alpha=0.15, linewidth=0)
    return line


def draw_random(ax, points):
    """random as a grey band (its 95% interval; its mean alone with one seed) with a dashed mean."""
    x = [100 * f for f, _ in points]
    y = [100 * g["mean"] for _, g in points]
    bounds = [shown_bounds(g) if g["low"] is not None else (g["mean"], g["mean"]) for _, g in points]
    ax.fill_between(x, [100 * lo for lo, _ in bounds], [100 * hi for _, hi in bounds], color="0.6", alpha=0.35,
                    linewidth=0, label="random, 95% interval")
    ax.plot(x, y, color="0.35", linestyle="--", label="random")


def figure_legend(fig, axes) -> None:
    """One legend for all panels, right of them: every label drawn in any panel, once."""
    entries = {}
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            entries.setdefault(label, handle)
    fig.legend(list(entries.values()), list(entries), loc="outside right center", fontsize=8)


def decorate(ax, summary, mode, title):
    """A panel's chance and base-model lines, its axes (the fractions run in `mode` or its control) and title."""
    if summary["chance"] is not None:
        ax.axhline(100 * summary["chance"], color="0.2", linestyle=":", linewidth=1, label="chance")
    if summary["base"].get("test_acc") is not None:
        ax.axhline(100 * summary["base"]["test_acc"], color="tab:green", linestyle="-.", linewidth=1,
                   label="base model (unmodified)")
    fractions = sorted({100 * g["fraction"] for g in summary["groups"] if g["mode"] in (mode, control_mode(mode))})
    ax.set_xticks(fractions)
    ax.set_xlabel(AXIS.get(mode, "fraction (%)"))
    ax.set_ylabel("test accuracy (%)")
    ax.set_title(title)
    ax.set_ylim(0, 102)
    ax.grid(alpha=0.3)


def accuracy_panel(ax, summary: dict, mode: str, fill: str, colors: dict, title: str) -> None:
    """One panel of the paper's figure: every estimator's curve of `mode` and `fill`, random as a band, leaky
    points marked by what their leak does to the verdict (LEAK_MARKS)."""
    curves = curves_of(summary, mode, fill)
    if "random" in curves:
        draw_random(ax, curves["random"])
    for method in sorted(curves, key=method_order):
        if method != "random":
            draw_curve(ax, curves[method], method, colors[method])
    decorate(ax, summary, mode, title)
    for leak, (marker, color, label) in LEAK_MARKS.items():  # last: their legend entries stay together
        # ringed: the control alone is above chance, so the point partly measures the pattern's shape;
        # the mark says whether the verdict survives that (analysis.leak_reading: the leak's direction)
        leaky = [e for e in summary["verdicts"] if (e["mode"], e["fill"], e["leak"]) == (mode, fill, leak)]
        if leaky:
            ax.scatter([100 * e["fraction"] for e in leaky], [100 * e["mean"] for e in leaky], s=160,
                       marker=marker, facecolors="none", edgecolors=color, linewidths=1.4, zorder=5, label=label)
