"""The verdicts against random, a table per mode and fill: each estimator at each fraction, its verdict ("no
different" only from the equivalence test; "undecided" with what the study could detect), its difference from
random with the 95% interval and Hedges' g, the Holm-corrected p that decided it, and what its mask-only control's
leak does to the verdict."""

from collections import defaultdict

from roarfast import stats
from roarfast.report.analysis import LEAK_INCONCLUSIVE, LEAK_STANDS, LEAKY_NO_VERDICT, NO_CONTROL, UNTESTED
from roarfast.report.load import method_order
from roarfast.report.sections import Table, register
from roarfast.report.text import difference_text, not_finding, p_text, title_fill, verdict_text

#: what a verdict table's cell adds per leak reading
LEAK_CELL = {NO_CONTROL: "; no control", UNTESTED: "; control untested", LEAK_STANDS: "; LEAKY control, stands",
             LEAK_INCONCLUSIVE: "; LEAKY control could explain it", LEAKY_NO_VERDICT: "; LEAKY control"}


def tables(summary: dict) -> list:
    by_slot = defaultdict(list)
    for e in summary["verdicts"]:
        by_slot[(e["mode"], e["fill"])].append(e)
    out = []
    for (mode, fill), entries in by_slot.items():
        fractions = sorted({e["fraction"] for e in entries})
        cells = {(e["method"], e["fraction"]): e for e in entries}
        methods = sorted({e["method"] for e in entries}, key=method_order)
        rows = [[m] + [verdict_cell(cells.get((m, f))) for f in fractions] for m in methods]
        out.append(Table(f"{not_finding(summary)}Verdict against random, {title_fill(mode, fill)} "
                         f"(difference from random in points [95% interval], Hedges' g, Holm-corrected p; \"no "
                         f"different\" only from TOST within +-{stats.points(summary['margin'])} points; beside a leaky "
                         f"control a verdict stands, or the leak could explain it, by the leak's direction: Methods)",
                         ["method"] + [f"{f:.0%}" for f in fractions], rows))
    return out


def verdict_cell(e: dict | None) -> str:
    if e is None:
        return "-"
    p = e["p_equivalence_holm"] if e["verdict"] == stats.NO_DIFFERENT else e["p_holm"]
    text = e["verdict"] if e["p"] is None else f"{verdict_text(e)}: {difference_text(e)}, p={p_text(p)}"
    return text + LEAK_CELL.get(e["leak"], "") + ("; random near chance" if e["random_near_chance"] else "")


register("verdicts", "each estimator against random per mode, fill and fraction, read beside its control", 50,
         blocks=tables)
