"""The mask-only controls (each cell retrained on its removal pattern alone): a table per mode of their
accuracy against chance with the leakage test's p, and each method's curve beside its control's."""

from collections import defaultdict
from functools import partial

from roarfast.modes import MODES, cell_mode, control_mode
from roarfast.report.figures import (INTERVALS, curves_of, decorate, draw_curve, figure_legend, offsets,
                                     panel_fractions, panel_grid, pyplot)
from roarfast.report.analysis import untestable
from roarfast.report.load import method_order
from roarfast.report.sections import Figure, Table, register
from roarfast.report.text import p_text, pct


def tables(summary: dict) -> list:
    by_mode = defaultdict(list)
    for e in summary["leakage"]:
        by_mode[e["mode"]].append(e)
    out = []
    for mode, entries in by_mode.items():
        fractions = sorted({e["fraction"] for e in entries})
        cells = {(e["method"], e["fraction"]): e for e in entries}
        methods = sorted({e["method"] for e in entries}, key=method_order)
        rows = [[m] + [leak_cell(cells.get((m, f))) for f in fractions] for m in methods]
        title = (f"Mask-only controls of the {cell_mode(mode).upper()} cells: accuracy against chance "
                 f"({pct(summary['chance'])}), one-sided p Holm-corrected over the configuration's controls")
        out.append(Table(title, ["method"] + [f"{f:.0%}" for f in fractions], rows))
    return out


def leak_cell(e: dict | None) -> str:
    if e is None:
        return "-"
    if e["leaky"] is None:
        return f"{pct(e['mean'])} (" + ("untestable: the cells did not leave chance" if untestable(e) else
                                        "not tested") + ")"
    return (f"{pct(e['mean'])}" + (" LEAKY" if e["leaky"] else "")
            + f" (Holm p={p_text(e['p_holm'])}, p={p_text(e['p'])}, n={e['n']})")


def figures(summary: dict, context, run) -> list:
    return [Figure("controls.png", "Each method's ROAR/KAR test accuracy beside its mask-only control's (a model "
                                   f"trained on the removal pattern alone: above chance, the pattern leaks); "
                                   f"{INTERVALS.partition(' (')[0]}", partial(figure_controls, summary),
                   wide=len(_panels(summary)) > 1)]


def _panels(summary: dict) -> list:
    """(mode, method) of each panel: every method with a mask-only control, per mode."""
    return [(mode, method) for mode in MODES
            for method in sorted(curves_of(summary, control_mode(mode), None), key=method_order)]


def figure_controls(summary: dict, width: float):
    """A panel per method and mode: its ROAR (KAR) curve per fill beside its mask-only control and chance,
    `width` inches wide. None when there are no controls."""
    plt = pyplot()

    panels = _panels(summary)
    if not panels:
        return None
    leaky = {(e["method"], e["mode"]) for e in summary["leakage"] if e["leaky"]}
    fig, axes, _ = panel_grid(plt, len(panels), width)
    for ax, (mode, method) in zip(axes, panels):
        fills = [fill for fill in summary["fills"] if method in curves_of(summary, mode, fill)]
        dx = offsets([*fills, None], [f / 100 for f in panel_fractions(summary, mode)])
        for fill in fills:
            draw_curve(ax, curves_of(summary, mode, fill)[method], f"{mode.upper()} ({fill})", dx=dx[fill])
        draw_curve(ax, curves_of(summary, control_mode(mode), None)[method], "mask-only control", color="tab:red",
                   linestyle="--", dx=dx[None])
        decorate(ax, summary, mode, f"{method}, {mode.upper()}")
        if (method, control_mode(mode)) in leaky:
            ax.set_title(f"{method}, {mode.upper()}: LEAKY control", color="firebrick")
    figure_legend(fig, axes)
    return fig


register("controls", "the mask-only controls against chance (mask leakage), with each method's curve beside its "
                     "control's", 60, blocks=tables, figures=figures)
