"""The test accuracy of every cell group, a table per mode and fill (the mask-only controls' too): the mean
and 95% interval over seeds at each fraction, and how many seeds."""

from collections import defaultdict

from roarfast.report.load import method_order
from roarfast.report.sections import Table, register
from roarfast.report.text import interval_text, title_fill


def tables(summary: dict) -> list:
    by_slot = defaultdict(list)
    for g in summary["groups"]:
        by_slot[(g["mode"], g["fill"])].append(g)
    out = []
    for (mode, fill), groups in by_slot.items():
        fractions = sorted({g["fraction"] for g in groups})
        cells = {(g["method"], g["fraction"]): g for g in groups}
        methods = sorted({g["method"] for g in groups}, key=method_order)
        rows = [[m] + [interval_text(cells[(m, f)]) if (m, f) in cells else "-" for f in fractions]
                + [_seeds_text([cells[(m, f)]["n"] for f in fractions if (m, f) in cells])] for m in methods]
        out.append(Table(f"Test accuracy, {title_fill(mode, fill)}: mean [95% interval] over seeds",
                         ["method"] + [f"{f:.0%}" for f in fractions] + ["seeds"], rows))
    return out


def _seeds_text(ns) -> str:
    return f"{min(ns)}" if min(ns) == max(ns) else f"{min(ns)}-{max(ns)}"


register("accuracy_tables", "the test accuracy of every cell group: mean and 95% interval over seeds", 70,
         blocks=tables)
