"""The rankings: per mode and fill, each estimator's area under its accuracy-vs-fraction curve (per seed,
then mean and interval over the seeds), best first; with one fraction, its accuracy there. A ranking of fewer than
two estimators besides random, or with an entry of one seed, is never a finding. Drawn as bars, a panel per mode,
one figure per fill (a column's width: the panels stacked)."""

from collections import defaultdict
from functools import partial

from roarfast import stats
from roarfast.modes import LOWER_IS_BETTER, MODES
from roarfast.report.analysis import accuracies
from roarfast.report.load import method_order, mode_order
from roarfast.report.figures import MIN_PANEL, method_colors, panel_grid, pyplot, ranking_panel
from roarfast.report.sections import Figure, Table, register
from roarfast.report.text import interval_text, not_finding, ranked_by, title_fill


#: the fewest estimators (random aside) a ranking orders for it to be a finding
MIN_RANKED = 2


def numbers(loaded, summary: dict) -> dict:
    return {"rankings": rankings(accuracies(loaded.cells)[0])}


def rankings(accs: dict) -> list:
    """Per (mode, fill): each method's per-seed AUC over every fraction run in that mode and fill, mean and
    interval over the seeds that have them all; sorted best first. A method lacking a fraction (a sweep
    still running) is listed as incomplete rather than ranked over a shorter curve."""
    out = []
    slots = {(m, f) for (_x, m, f, _fr) in accs if m in MODES}
    for mode, fill in sorted(slots, key=lambda t: (mode_order(t[0]), t[1])):
        by_method = defaultdict(dict)  # method -> fraction -> {seed: acc}
        for (method, m, f, fraction), by_seed in accs.items():
            if (m, f) == (mode, fill):
                by_method[method][fraction] = by_seed
        fractions = sorted({fr for curves in by_method.values() for fr in curves})
        entries, incomplete = [], []
        for method, curves in sorted(by_method.items(), key=lambda kv: method_order(kv[0])):
            aucs = seed_aucs(curves, fractions)
            if not aucs:
                incomplete.append(method)
                continue
            entries.append({"method": method, **stats.t_interval(list(aucs.values())).to_dict()})
        entries.sort(key=lambda e: e["mean"] if LOWER_IS_BETTER[mode] else -e["mean"])
        out.append({"mode": mode, "fill": fill, "fractions": fractions, "lower_is_better": LOWER_IS_BETTER[mode],
                    "entries": entries, "incomplete": incomplete, "not_a_finding": not_a_finding(entries)})
    return out


def not_a_finding(entries: list) -> str | None:
    """Why a ranking is no finding whatever the study: it orders fewer than MIN_RANKED estimators besides random
    (one estimator against random is its verdict's business), or an entry rests on one seed (no interval);
    None when it can be one."""
    if sum(e["method"] != "random" for e in entries) < MIN_RANKED:
        return f"fewer than {MIN_RANKED} estimators besides random"
    if any(e["n"] < 2 for e in entries):
        return "one seed"
    return None


def seed_aucs(curves: dict, fractions: list) -> dict:
    """seed -> the AUC of one method's curve ({fraction: {seed: accuracy}}) over `fractions`, for the seeds
    run at every one of them ({} when none is)."""
    seeds = set.intersection(*(set(curves.get(fr, {})) for fr in fractions)) if fractions else set()
    return {s: stats.curve_auc(fractions, [curves[fr][s] for fr in fractions]) for s in sorted(seeds)}


def tables(summary: dict) -> list:
    out = []
    for r in summary["rankings"]:
        better = "lower" if r["lower_is_better"] else "higher"
        measure = "AUC" if len(r["fractions"]) > 1 else "accuracy"
        rows = [[str(i + 1), e["method"], interval_text(e), str(e["n"])] for i, e in enumerate(r["entries"])]
        rows += [["-", m, "not ranked: a fraction or seed missing", "-"] for m in r["incomplete"]]
        alone = f"NOT A FINDING ({r['not_a_finding']}): " if r["not_a_finding"] and not not_finding(summary) else ""
        out.append(Table(f"{not_finding(summary)}{alone}Ranking, {title_fill(r['mode'], r['fill'])}: "
                         f"{ranked_by(r['fractions'])}, {better} is "
                         f"better", ["rank", "method", f"{measure} [95% interval]", "seeds"], rows))
    return out


def figures(summary: dict, context, run) -> list:
    out = []
    for fill in summary["fills"]:
        ranked = [r for r in summary["rankings"] if r["fill"] == fill and r["entries"]]
        if ranked:
            measure = "; ".join(f"{r['mode'].upper()}: {ranked_by(r['fractions'])}, "
                                f"{'lower' if r['lower_is_better'] else 'higher'} is better" for r in ranked)
            out.append(Figure(f"ranking_{fill}.png", f"{not_finding(summary)}The estimators ranked, best at the top, "
                                                     f"fill {fill} ({measure}); bars: 95% t-interval over seeds",
                              partial(figure_ranking, summary, ranked), fill, wide=False))
    return out


def figure_ranking(summary: dict, ranked: list, width: float):
    """A bar panel per mode's ranking (`ranked`: entries of rankings()), `width` inches wide."""
    plt = pyplot()

    height = 0.2 * max(len(r["entries"]) for r in ranked) + 0.75
    fig, axes, _ = panel_grid(plt, len(ranked), width, height, min_width=max(MIN_PANEL, width / 2))
    for ax, r in zip(axes, ranked):
        ranking_panel(ax, r, method_colors(summary), r["mode"].upper())
    return fig


register("rankings", "the estimators ranked by the area under their accuracy curves", 20, numbers=numbers,
         blocks=tables, figures=figures)
