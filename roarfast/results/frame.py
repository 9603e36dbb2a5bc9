"""A run directory's measurements for a notebook (`roarfast.results.load`): read-only, as a pandas DataFrame."""

from roarfast.results.db import open_results
from roarfast.results.measurement import KEY_COLUMNS
from roarfast.rundir.directory import RunDir


def load(run_dir, *, status: str | None = "done", kind: str | None = None):
    """Every measurement of `run_dir`'s results.sqlite for a notebook: a pandas DataFrame (one row per
    measurement: retraining cells and controls per seed, no-retrain evaluations, fill leakage; `kind`
    tells them apart, extras such as mean_probability and base_rate as columns, versions as a dict column),
    or a list of dicts when pandas is not installed. `status=None` includes running and failed ones;
    `kind` keeps one kind."""
    run = RunDir(run_dir)
    if not run.results_path.exists():
        raise FileNotFoundError(f"{run.results_path} does not exist: nothing has been measured in {run_dir}")
    filters = {name: value for name, value in (("status", status), ("kind", kind)) if value is not None}
    with open_results(run, readonly=True) as db:
        rows = db.rows(**filters)
    records = [{**{k: v for k, v in row.items() if k not in ("extra", "owner")}, **row["extra"]} for row in rows]
    try:
        import pandas
    except ImportError:
        return records
    return pandas.DataFrame.from_records(records, columns=list(records[0]) if records else [*KEY_COLUMNS, "status"])
