"""The paper's figure, one per fill: test accuracy against the fraction of pixels removed (ROAR) or kept
(KAR), one line per estimator with its 95% interval, random as the reference (dashed, diamonds), leaky points marked."""

from functools import partial

from roarfast.modes import MODES
from roarfast.report.figures import (INTERVALS, accuracy_panel, curves_of, figure_legend, method_colors, panel_grid,
                                     pyplot)
from roarfast.report.sections import Figure, register


def figures(summary: dict, context, run) -> list:
    return [Figure(f"accuracy_{fill}.png", f"Test accuracy after retraining against the fraction of pixels removed "
                                          f"(ROAR) or kept (KAR), fill {fill}; {INTERVALS}",
                   partial(figure_accuracy, summary, fill), fill, wide=len(_modes(summary, fill)) > 1)
            for fill in summary["fills"]]


def _modes(summary: dict, fill: str) -> list:
    return [m for m in MODES if curves_of(summary, m, fill)]


def figure_accuracy(summary: dict, fill: str, width: float):
    """A ROAR and a KAR panel of one fill, `width` inches wide. Returns the Figure (None when neither mode has
    cells with this fill)."""
    plt = pyplot()

    modes = _modes(summary, fill)
    if not modes:
        return None
    colors = method_colors(summary)
    fig, axes, _ = panel_grid(plt, len(modes), width)
    for ax, mode in zip(axes, modes):
        accuracy_panel(ax, summary, mode, fill, colors, f"{mode.upper()} (fill {fill})")
    figure_legend(fig, axes)
    return fig


register("accuracy", "test accuracy against the fraction removed or kept, one figure per fill", 30,
         figures=figures)
