"""Base estimators against their SmoothGrad ensembles (SG, SG-SQ, VAR), one figure per fill where the configuration
ran a base estimator and a member of its family: a panel per such base estimator and mode, titled by the
estimators it shows. Which method belongs to which family is read
from the estimators' records (a member declares its `base`), never from their names; only estimators this
process knows are looked up, so a name from the run directory imports nothing."""

from functools import partial

from roarfast.methods.declaration import ESTIMATORS
from roarfast.modes import MODES
from roarfast.report.figures import (INTERVALS, curves_of, decorate, draw_methods, figure_legend, method_colors,
                                     panel_grid, pyplot)
from roarfast.report.sections import Figure, register


def figures(summary: dict, context, run) -> list:
    out = []
    for fill in summary["fills"]:
        panels = families(summary, fill)
        if panels:
            shown = "; ".join(f"{base} against {', '.join(members[1:])}" for base, members in panels)
            out.append(Figure(f"ensembles_{fill}.png", f"Base estimators against their SmoothGrad ensembles "
                                                       f"({shown}), fill {fill}; {INTERVALS}",
                              partial(figure_ensembles, summary, fill), fill,
                              wide=len(panels) * len([m for m in MODES if curves_of(summary, m, fill)]) > 1))
    return out


def _record(method: str):
    """The record of an estimator this process knows (a built-in, or one registered here), else None."""
    return ESTIMATORS.load(method) if method in ESTIMATORS else None


def family(method: str, methods) -> str | None:
    """The base estimator of `method`'s SmoothGrad family among `methods` (its record's declared base; a
    method some member of `methods` declares as its base is its own family's), or None."""
    record = _record(method)
    if record is not None and record.base is not None:
        return record.base
    declared = {r.base for r in map(_record, methods) if r is not None}
    return method if method in declared else None


def families(summary: dict, fill: str) -> list:
    """[(base, [base, its ensemble members])] of the estimators this configuration ran with `fill`: a base estimator
    and at least one member of its family, both in the results (a member without its base, or a base without a
    member, compares nothing)."""
    methods = {m for mode in MODES for m in curves_of(summary, mode, fill)}
    bases = {}
    for method in methods:
        base = family(method, methods)
        if base is not None:
            bases.setdefault(base, set()).add(method)
    return [(base, sorted(members, key=lambda m: (m != base, m))) for base, members in sorted(bases.items())
            if base in members and len(members) >= 2]


def figure_ensembles(summary: dict, fill: str, width: float):
    """A panel per base estimator and mode: the base, its ensemble members the configuration ran, random as the
    reference. None when no base estimator has an ensemble member in the results."""
    plt = pyplot()

    modes = [m for m in MODES if curves_of(summary, m, fill)]
    panels = [(mode, base, members) for mode in modes for base, members in families(summary, fill)]
    if not panels:
        return None
    colors = method_colors(summary)
    fig, axes, _ = panel_grid(plt, len(panels), width)
    for ax, (mode, base, members) in zip(axes, panels):
        curves = curves_of(summary, mode, fill)
        draw_methods(ax, summary, mode, curves, [m for m in ["random", *members] if m in curves], colors)
        decorate(ax, summary, mode, f"{base} vs {', '.join(members[1:])}, {mode.upper()}")
    figure_legend(fig, axes)
    return fig


register("ensembles", "base estimators against their SmoothGrad ensembles, one figure per fill", 80,
         figures=figures)
