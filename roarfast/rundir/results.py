"""A run directory's results.sqlite opened (roarfast.measurements.db.ResultsDB), with what format 1 kept beside
it moved in: leakage.json, the fill leakage measured before results schema v3 (roarfast.rundir.legacy)."""

import logging

from roarfast.errors import UserError
from roarfast.measurements.db import ResultsDB
from roarfast.rundir.directory import RunDir
from roarfast.rundir.legacy import LEAKAGE_REPAIR, fill_leakage_rows

log = logging.getLogger(__name__)


def open_results(run, *, readonly: bool = False, damaged: list | None = None) -> ResultsDB:
    """The results database of a run directory (a RunDir or its path), with the run directory's
    leakage.json (fill leakage before schema v3) moved into it (into the in-memory copy only, when
    `readonly`: ResultsDB(readonly=True)). A damaged leakage.json is refused in one line; with `damaged` (a list,
    `readonly`: `roarfast ls`), that line is appended there instead and the database opened without its rows."""
    run = run if isinstance(run, RunDir) else RunDir(run)
    db = ResultsDB(run.results_path, readonly=readonly)
    try:
        _move_in(run, db, readonly)
    except UserError as err:
        if damaged is None or not readonly:
            db.close()
            raise
        damaged.append(str(err))
    return db


def _move_in(run, db, readonly: bool) -> None:
    """leakage.json's rows moved into `db` (and the file removed, unless `readonly`)."""
    legacy = run.legacy_fill_leakage_path
    rows = fill_leakage_rows(run)
    if rows is None:
        return
    log.warning("note: %s (fill leakage before results schema v3) is read unverified: its rows enter %s with "
                "digests of their content as found", legacy, run.results_path.name)
    dataset = (run.dataset_record() or {}).get("name", "unknown")
    try:
        db.import_fill_leakage(rows, dataset, legacy.name)
    except ValueError as err:  # a row's value out of its range (MeasurementKey's checks)
        raise UserError(f"{legacy}: a row cannot be read ({err}); {LEAKAGE_REPAIR}") from None
    if not readonly:
        legacy.unlink(missing_ok=True)  # another process may have moved it in at the same time
