"""First on the page, before any number: whether the study can answer (roarfast.report.status). CONCLUSIVE only
when its base model and random's least-modified cells showed learning; INCONCLUSIVE (at chance) and UNDERPOWERED
(cannot tell) are said with the reason and the fix; summary.json's "status" ("conclusive" / "inconclusive" /
"underpowered") and "reasons" say it too (with several configurations, the run's status is the weakest of theirs:
inconclusive when any is, else underpowered when any is, each reason labelled)."""

from roarfast.report.analysis import parts_of
from roarfast.report.sections import RUN, Lines, register
from roarfast.report.status import CONCLUSIVE, INCONCLUSIVE, UNDERPOWERED
from roarfast.report.text import label_prefix, power_lines, status_lines
from roarfast.stats.learning import STATUS_WORDS


def numbers(loaded, summary: dict) -> dict:
    parts = parts_of(summary)
    if len(parts) == 1:
        return {}  # one configuration: its own status is the summary's
    statuses = {p["status"] for p in parts}
    status = next(s for s in (INCONCLUSIVE, UNDERPOWERED, CONCLUSIVE) if s in statuses)
    reasons = [f"{label_prefix(summary, p)}{reason}" for p in parts for reason in p["reasons"]]
    return {"status": status, "reasons": reasons}


def blocks(summary: dict) -> list:
    parts = parts_of(summary)
    statuses = sorted({STATUS_WORDS[p["status"]] for p in parts})
    title = (f"{' / '.join(statuses)}: whether the study can answer" if any(p["status"] != CONCLUSIVE for p in parts)
             else "CONCLUSIVE: learning shown")
    if any(p["status"] != CONCLUSIVE for p in parts):
        title += " (the rankings and verdicts below are not findings where it cannot)"
    return [Lines(title, status_lines(summary) + power_lines(summary))]


register("status", "whether the study can answer (CONCLUSIVE, INCONCLUSIVE, UNDERPOWERED), with the reason and the "
                   "fix, and what it could detect, before any number", 1, numbers=numbers, blocks=blocks, scope=RUN)
