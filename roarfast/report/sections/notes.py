"""Notes: what the report could not do or noticed (rows of unknown modes, different thread counts, a missing
base model or dataset, an example grid not drawn), each configuration's labelled when the run holds several;
shown only when there are any."""

from roarfast.report.analysis import parts_of
from roarfast.report.sections import RUN, Lines, register


def lines(summary: dict) -> list:
    parts = parts_of(summary)
    notes = list(summary["notes"])
    if len(parts) > 1:
        notes += [f"[{p['configuration']['label']}] {note}" for p in parts for note in p["notes"]]
    return [Lines("Notes", notes)] if notes else []


register("notes", "what the report could not do or noticed", 150, blocks=lines, scope=RUN)
