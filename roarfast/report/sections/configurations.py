"""First on the page, when there is something to know before any number: which configuration of the run
directory is reported (the latest request's, or the one --config names) and the others, each with the command
that reports it; the configurations the cells were trained under, when several are reported (each apart,
by name or label, with a column per setting that differs between them: no verdict, ranking, curve or control test compares cells of two); and what was set
aside, and why."""

from roarfast.report.analysis import parts_of
from roarfast.rundir.catalog import short
from roarfast.report.sections import RUN, Lines, Table, register
from roarfast.report.text import set_aside_line


def numbers(loaded, summary: dict) -> dict:
    return {"set_aside": list(loaded.set_aside), "answered": loaded.answered, "others": list(loaded.others)}


def blocks(summary: dict) -> list:
    parts = parts_of(summary)
    out = []
    if summary.get("answered"):
        out.append(Lines("Reported", [f"reported: {summary['answered']}"]))
    if summary.get("others"):
        # the reported one first, so that what differs reads against it
        shown = [{**p["configuration"], "report": "this report"} for p in parts] + summary["others"]
        settings = list(dict.fromkeys(name for c in shown for name in c.get("differs") or {}))
        rows = [[c["label"], (c.get("id") or "")[:8], str(c["cells"]), c.get("command") or "-",
                 c["report"] if c["report"] == "this report" else f"`{c['report']}`",
                 *(short((c.get("differs") or {}).get(name)) for name in settings)] for c in shown]
        out.append(Table(f"Other configurations in this run directory: {len(summary['others'])}, in no number below "
                         f"(`roarfast report --all` reports every one apart); what differs, whole",
                         ["configuration", "id", "cells (with controls)", "requested by", "reported by", *settings],
                         rows))
    if len(parts) > 1:
        shown = [p["configuration"] for p in parts]
        settings = list(dict.fromkeys(name for c in shown for name in c["differs"]))
        rows = [[c["label"], (c.get("id") or "")[:8], str(c["cells"]), _when(c["first"]), _when(c["last"]),
                 *(short(c["differs"].get(name)) if name in c["differs"] else "-" for name in settings)]
                for c in shown]
        out.append(Table(f"Configurations: the cells were trained under {len(parts)}, each reported apart below under "
                         f"its name or label (no verdict, ranking, curve or control test compares cells of two "
                         f"configurations); what differs between them, whole",
                         ["configuration", "id", "cells (with controls)", "first finished", "last finished",
                          *settings], rows))
    lines = [set_aside_line(entry, len(parts) > 1) for entry in summary.get("set_aside", [])]
    if lines:
        out.append(Lines("Set aside (not in any number below)", lines))
    return out


def _when(stamp: str) -> str:
    """A row's finished time to the minute, in UTC as recorded."""
    return stamp[:16].replace("T", " ") if stamp else "-"


register("configurations", "the configurations the cells were trained under, and what was set aside", 5,
         numbers=numbers, blocks=blocks, scope=RUN)
