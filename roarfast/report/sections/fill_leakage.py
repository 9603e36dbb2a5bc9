"""Fill leakage (roarfast leakage): how well a per-pixel detector finds the removed pixels after each fill,
against the base rate, beside the mask-only class control of the same cells."""

from roarfast.modes import ROAR, control_mode
from roarfast.report.sections import Table, register
from roarfast.report.text import pct


def numbers(loaded, summary: dict) -> dict:
    return {"fill_leakage": fill_leakage_table(loaded.fill_leakage)}


def fill_leakage_table(rows: list) -> list | None:
    """The fill-leakage measurements (method, fill, fraction, detector accuracy, base rate), the newest of
    each (method, fill, fraction), sorted by them; None when none was made."""
    newest = {}
    for r in rows:
        key = (r["method"], r["fill"], r["fraction"])
        if key not in newest or r["finished"] > newest[key]["finished"]:
            newest[key] = r
    return [{"method": r["method"], "fill": r["fill"], "fraction": r["fraction"], "accuracy": r["test_acc"],
             "base_rate": r["extra"].get("base_rate")} for _, r in sorted(newest.items())] or None


def tables(summary: dict) -> list:
    measured = summary["fill_leakage"]
    if not measured:
        return []
    # summary["leakage"] holds the mask-only controls' tests (mask leakage), read beside the fill's
    controls = {(e["method"], e["fraction"]): e["mean"] for e in summary["leakage"] if e["mode"] == control_mode(ROAR)}
    rows = [[r["method"], r["fill"], f"{r['fraction']:.0%}", pct(r["accuracy"]), pct(r["base_rate"]),
             pct(controls.get((r["method"], r["fraction"])))] for r in measured]
    return [Table("Fill leakage (roarfast leakage): a per-pixel detector finding the removed pixels after each fill, "
                  "against the base rate; beside it the mask-only class control",
                  ["method", "fill", "fraction", "detector accuracy", "base rate", "class control (ROAR)"], rows)]


register("fill_leakage", "how visible each fill's holes are to a per-pixel detector", 110, numbers=numbers,
         blocks=tables)
