"""The fills side by side (with two fills or more): a row of ROAR and KAR panels per fill, each row's title
saying how visible that fill's holes are (the hole detector's accuracy against the base rate)."""

from collections import defaultdict
from functools import partial

from roarfast.modes import MODES
from roarfast.report.figures import INTERVALS, accuracy_panel, curves_of, figure_legend, method_colors, pyplot
from roarfast.report.sections import Figure, register


def figures(summary: dict, context, run) -> list:
    return [Figure("fills.png", "The fills side by side, with how visible each fill's holes are",
                   partial(figure_fills, summary))]


def figure_fills(summary: dict):
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
    fig, axes = plt.subplots(len(fills), len(modes), figsize=(6.0 * len(modes), 4.5 * len(fills)),
                             squeeze=False, layout="constrained")
    for row, fill in enumerate(fills):
        for col, mode in enumerate(modes):
            # the detector removes pixels whatever the mode: said once per row, in its first panel
            holes = _holes_found(leakage[fill]) if col == 0 else ""
            accuracy_panel(axes[row][col], summary, mode, fill, colors, f"{mode.upper()}, fill {fill}{holes}")
            axes[row][col].title.set_fontsize(10 if holes else 11)
    figure_legend(fig, axes.flat)
    fig.suptitle("Test accuracy after retraining, one row per fill (hole detector: pixel accuracy at finding the "
                 f"removed pixels vs the base rate); {INTERVALS}")
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
