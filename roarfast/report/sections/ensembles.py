"""Base estimators against their SmoothGrad ensembles (SG, SG-SQ, VAR), one figure per fill: a panel per
base estimator with ensemble members in the results, and mode. Which method belongs to which family is read
from the estimators' records (a member declares its `base`), never from their names; only estimators this
process knows are looked up, so a name from the run directory imports nothing."""

from functools import partial

from roarfast.methods.declaration import ESTIMATORS
from roarfast.modes import MODES
from roarfast.report.figures import INTERVALS, curves_of, decorate, draw_methods, figure_legend, method_colors, pyplot
from roarfast.report.sections import Figure, register


def figures(summary: dict, context, run) -> list:
    return [Figure(f"ensembles_{fill}.png", f"Base estimators against their SmoothGrad ensembles, fill {fill}",
                   partial(figure_ensembles, summary, fill), fill) for fill in summary["fills"]]


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


def figure_ensembles(summary: dict, fill: str):
    """Random as the reference in every panel. None when no base estimator has an ensemble member in the
    results."""
    plt = pyplot()

    modes = [m for m in MODES if curves_of(summary, m, fill)]
    methods = {m for mode in modes for m in curves_of(summary, mode, fill)}
    bases = {}
    for method in methods:
        base = family(method, methods)
        if base is not None:
            bases.setdefault(base, set()).add(method)
    panels = [(base, sorted(members, key=lambda m: (m != base, m))) for base, members in sorted(bases.items())
              if len(members) >= 2 or base not in members]
    if not panels:
        return None
    colors = method_colors(summary)
    fig, axes = plt.subplots(len(modes), len(panels), figsize=(5.2 * len(panels), 4.2 * len(modes)),
                             squeeze=False, layout="constrained")
    for row, mode in enumerate(modes):
        curves = curves_of(summary, mode, fill)
        for col, (base, members) in enumerate(panels):
            ax = axes[row][col]
            draw_methods(ax, summary, mode, curves, [m for m in ["random", *members] if m in curves], colors)
            decorate(ax, summary, mode, f"{base} and its ensembles, {mode.upper()}")
    figure_legend(fig, axes.flat)
    fig.suptitle(f"Base estimators against SG / SG-SQ / VAR (fill {fill}); {INTERVALS}")
    return fig


register("ensembles", "base estimators against their SmoothGrad ensembles, one figure per fill", 80,
         figures=figures)
