"""The fills side by side (with two fills or more): ROAR and KAR panels per fill, the first panel of each fill
saying how visible its holes are (the hole detector's accuracy against the base rate)."""

from collections import defaultdict
from functools import partial

from roarfast.modes import MODES
from roarfast.report.figures import (INTERVALS, PANEL_HEIGHT, accuracy_panel, curves_of, figure_legend, method_colors,
                                     panel_grid, pyplot)
from roarfast.report.sections import Figure, register


def figures(summary: dict, context, run) -> list:
    return [Figure("fills.png", "Test accuracy after retraining with each fill, a panel per fill and mode; the "
                                "hole detector's pixel accuracy at finding the removed pixels against the base rate "
                                f"says how visible each fill's holes are; {INTERVALS}", partial(figure_fills, summary))]


def figure_fills(summary: dict, width: float):
    """The figure; None unless the cells hold two fills or more."""
    plt = pyplot()

    fills = summary["fills"]
    modes = [m for m in MODES if any(curves_of(summary, m, fill) for fill in fills)]
    if len(fills) < 2 or not modes:
        return None
    colors = method_colors(summary)
    leakage = defaultdict(list)
    for row in summary.get("fill_leakage") or []:
        leakage[row["fill"]].append(row)
    panels = [(fill, mode) for fill in fills for mode in modes]
    fig, axes, _ = panel_grid(plt, len(panels), width, PANEL_HEIGHT + (0.35 if leakage else 0))
    for ax, (fill, mode) in zip(axes, panels):
        # the detector removes pixels whatever the mode: said in the fill's first panel
        holes = _holes_found(leakage[fill]) if mode == modes[0] else ""
        accuracy_panel(ax, summary, mode, fill, colors, f"{mode.upper()}, fill {fill}{holes}")
    figure_legend(fig, axes)
    return fig


def _holes_found(rows: list) -> str:
    """A panel title's lines for one fill's leakage rows: the hole detector's pixel accuracy per fraction
    removed, and the base rates it must beat ("" when the fill was not measured)."""
    if not rows:
        return ""
    rows = sorted(rows, key=lambda r: r["fraction"])

    def percents(key):
        return ", ".join(f"{r[key]:.0%}" for r in rows)

    return (f"\nhole detector: {percents('accuracy')} at {percents('fraction')} removed\n"
            f"(base rates {percents('base_rate')})")


register("fills", "the fills side by side, with how visible each fill's holes are", 40, figures=figures)
