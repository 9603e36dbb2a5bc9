"""The stage times of the whole run: from stages.json when a sweep wrote it, else what the run directory
holds (the base model's training time, the sums of every reported cell's and control's seconds)."""

from roarfast.report.sections import RUN, Table, register


def numbers(loaded, summary: dict) -> dict:
    return {"stages": list(loaded.stages)}


def table(summary: dict) -> list:
    rows = [[s["stage"], "-" if s["seconds"] is None else f"{s['seconds']:.1f}", s["source"]]
            for s in summary["stages"]]
    return [Table("Stage times", ["stage", "seconds", "source"], rows)]


register("stages", "how long each stage took", 120, numbers=numbers, blocks=table, scope=RUN)
