"""Notes: what the report set aside or could not do (rows of unknown modes, older configurations, different
thread counts, a missing base model or dataset, an example grid not drawn); shown only when there are any."""

from roarfast.report.sections import Lines, register


def lines(summary: dict) -> list:
    return [Lines("Notes", summary["notes"])] if summary["notes"] else []


register("notes", "what the report set aside or could not do", 150, blocks=lines)
