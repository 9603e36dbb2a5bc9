"""First on the page, before any number: whether the study can answer. A configuration whose retrained cells or
base model did not leave chance is INCONCLUSIVE (roarfast.report.status), said with the reason and the fix;
summary.json's "status" ("conclusive" / "inconclusive") and "reasons" say it too (with several configurations,
the run's status is inconclusive when any is, each reason labelled)."""

from roarfast.report.analysis import parts_of
from roarfast.report.sections import RUN, Lines, register
from roarfast.report.status import CONCLUSIVE, INCONCLUSIVE
from roarfast.report.text import label_prefix, status_lines


def numbers(loaded, summary: dict) -> dict:
    parts = parts_of(summary)
    if len(parts) == 1:
        return {}  # one configuration: its own status is the summary's
    reasons = [f"{label_prefix(summary, p)}{reason}" for p in parts for reason in p["reasons"]]
    return {"status": INCONCLUSIVE if reasons else CONCLUSIVE, "reasons": reasons}


def blocks(summary: dict) -> list:
    lines = status_lines(summary)
    if not lines:
        return []
    return [Lines("INCONCLUSIVE: this study cannot answer (the rankings and verdicts below are not findings)", lines)]


register("status", "whether the study can answer: INCONCLUSIVE, with the reason and the fix, before any number", 1,
         numbers=numbers, blocks=blocks, scope=RUN)
