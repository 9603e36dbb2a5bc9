"""The stage times: from stages.json when a sweep wrote it, else what the run directory holds."""

from roarfast.report.sections import Table, register


def numbers(loaded, summary: dict) -> dict:
    return {"stages": list(loaded.context.stages)}


def table(summary: dict) -> list:
    rows = [[s["stage"], "-" if s["seconds"] is None else f"{s['seconds']:.1f}", s["source"]]
            for s in summary["stages"]]
    return [Table("Stage times", ["stage", "seconds", "source"], rows)]


register("stages", "how long each stage took", 120, numbers=numbers, blocks=table)
