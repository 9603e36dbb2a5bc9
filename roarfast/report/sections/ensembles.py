"""Base estimators against their SmoothGrad ensembles (SG, SG-SQ, VAR), one figure per fill: a panel per
base estimator with ensemble members in the results, and mode."""

from functools import partial

from roarfast.modes import MODES
from roarfast.report.figures import curves_of, decorate, draw_curve, draw_random, figure_legend, method_colors, pyplot
from roarfast.report.sections import Figure, register

BASE_ESTIMATORS = ("grad", "ig", "gb")
ENSEMBLES = ("sg", "sg-sq", "var")


def figures(summary: dict, context, run) -> list:
    return [Figure(f"ensembles_{fill}.png", f"Base estimators against their SmoothGrad ensembles, fill {fill}",
                   partial(figure_ensembles, summary, fill), fill) for fill in summary["fills"]]


def family(method: str) -> str | None:
    """The base estimator of a method of the SmoothGrad families (grad for sg-sq-grad), or None."""
    for base in BASE_ESTIMATORS:
        if method == base or any(method == f"{e}-{base}" for e in ENSEMBLES):
            return base
    return None


def figure_ensembles(summary: dict, fill: str):
    """Random as a band in every panel. None when no base estimator has an ensemble member in the results."""
    plt = pyplot()

    modes = [m for m in MODES if curves_of(summary, m, fill)]
    panels = []
    for base in BASE_ESTIMATORS:
        members = {m for mode in modes for m in curves_of(summary, mode, fill) if family(m) == base}
        if len(members) >= 2 or (members and base not in members):
            panels.append((base, sorted(members, key=lambda m: (m != base, m))))
    if not panels:
        return None
    colors = method_colors(summary)
    fig, axes = plt.subplots(len(modes), len(panels), figsize=(5.2 * len(panels) + 2.5, 4.2 * len(modes)),
                             squeeze=False, layout="constrained")
    for row, mode in enumerate(modes):
        curves = curves_of(summary, mode, fill)
        for col, (base, members) in enumerate(panels):
            ax = axes[row][col]
            if "random" in curves:
                draw_random(ax, curves["random"])
            for method in members:
                if method in curves:
                    draw_curve(ax, curves[method], method, colors[method])
            decorate(ax, summary, mode, f"{base} and its ensembles, {mode.upper()}")
    figure_legend(fig, axes.flat)
    fig.suptitle(f"Base estimators against SG / SG-SQ / VAR (fill {fill}); shaded: 95% t-interval over seeds")
    return fig


register("ensembles", "base estimators against their SmoothGrad ensembles, one figure per fill", 80,
         figures=figures)
