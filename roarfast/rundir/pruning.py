"""A prune carried out so that it cannot half-finish nor reach outside the run directory (`roarfast prune`,
roarfast.rundir.inventory decides what goes).

Its intent is written first (roarfast.records.prune.PruneIntent, claims/prune.json: the configurations' ids, the
damaged records' file names, the rank stores and base models no kept configuration nor HEAD uses, the rows'
keys); every link on the way is refused and every id checked before anything is removed; then HEAD stops naming
a removed configuration, the records go, each rank store and base model is renamed into claims/trash (one
rename: never found half removed) and removed there, and the results rows go last, in one transaction. A kill at
any point leaves the intent: the next command that opens the run directory for writing (`upgrade`), or lists or prunes
it, finishes it (`finish`), every step done again only where it is not done yet.
"""

import logging
import os
import shutil
import stat

from roarfast.errors import UserError
from roarfast.measurements.row import MeasurementKey
from roarfast.records.claims import owner_alive
from roarfast.records.prune import PruneIntent
from roarfast.records.ranks import dir_name
from roarfast.rundir.results import open_results

log = logging.getLogger(__name__)

#: the columns that key a results row, as an intent records each row it removes
KEY_FIELDS = ("kind", "dataset", "model", "method", "mode", "fill", "fraction", "seed", "config_hash")


def intent(configurations: list, damaged: list, ranks: list, models: list, rows: list, head: bool) -> dict:
    """A prune's intent: the ids of the `configurations` whose records go, the file names of `damaged` records,
    the rank stores `ranks` ([method, id]) and base `models` (ids) that go, the `rows` (results rows, dicts) that
    go, and whether HEAD's configuration is among them (`head`)."""
    return {"configurations": sorted(configurations), "damaged": sorted(damaged),
            "ranks": [list(key) for key in sorted(ranks)], "models": sorted(models),
            "rows": [{k: r[k] for k in KEY_FIELDS} for r in rows], "head": bool(head)}


def carry_out(run, plan: dict) -> None:
    """Removes what `plan` (intent(...)) names from RunDir `run`: its links refused first, its intent written,
    then finished (see the module's docstring)."""
    _check(run, plan)
    _refuse_links(run, plan)
    with run.claim("prune"):  # one prune at a time
        run.records.put(PruneIntent.from_record(plan), plan)
        _finish(run, plan)


def pending(run) -> dict | None:
    """The intent of a prune a kill left unfinished in `run` (verified), or None."""
    plan = run.records.get(PruneIntent)
    if plan is not None:
        _check(run, plan)
    return plan


def finish(run) -> str | None:
    """Finishes the prune a kill left unfinished in RunDir `run`, if any; returns the line that says so."""
    if pending(run) is None:
        return None
    with run.claim("prune"):
        plan = pending(run)  # another process may have finished it meanwhile
        if plan is None:
            return None
        _refuse_links(run, plan)
        _finish(run, plan)
    line = (f"prune: finished the prune that was interrupted in {run.root} (configurations "
            f"{', '.join(c[:8] for c in plan['configurations'] + plan['damaged']) or 'none'})")
    log.warning("note: %s", line)
    return line


def _check(run, plan: dict) -> None:
    """A UserError when `plan` is not of an intent's form (PruneIntent.check: nothing named in it can reach outside
    the run directory), or when a row it names is not a results row's key."""
    where = run.prune_intent_path
    PruneIntent.check(plan, where)
    try:
        for row in plan["rows"]:
            MeasurementKey(**{k: row[k] for k in KEY_FIELDS})
    except (KeyError, TypeError, ValueError) as err:
        raise UserError(f"{where} is not the intent of a prune ({err}); {PruneIntent.repair}") from None


def _places(run, plan: dict) -> list:
    """Every path the prune of `plan` removes or writes through, from the run directory down."""
    records = [run.configuration_path(c) for c in plan["configurations"]]
    records += [run.configurations_root / name for name in plan["damaged"]]
    stores = [run.rank_dir(method, rid) for method, rid in plan["ranks"]]
    models = [run.model_dir(mid) for mid in plan["models"]]
    return [run.head_path, run.claims_dir, run.trash_dir, run.configurations_root, *records, run.ranks_root,
            *{s.parent for s in stores}, *stores, run.models_root, *models]


def _refuse_links(run, plan: dict) -> None:
    """A UserError, before anything is removed, when a symbolic link stands at any place the prune removes or
    passes through, or a hard link at results.sqlite (which SQLite writes in place)."""
    for path in _places(run, plan):
        if path.is_symlink():
            raise UserError(f"prune: refusing to remove {path}: it is a symbolic link (to {os.readlink(path)}), and "
                            f"roarfast removes nothing through a link; nothing was removed: remove the link, or put "
                            f"what it points to in its place, and rerun")
    for suffix in ("", "-wal", "-shm"):
        path = run.results_path.with_name(run.results_path.name + suffix)
        try:
            status = os.lstat(path)
        except FileNotFoundError:
            continue
        if stat.S_ISLNK(status.st_mode) or (stat.S_ISREG(status.st_mode) and status.st_nlink > 1):
            raise UserError(f"prune: refusing to write {path}: it is a link, and SQLite writes it in place; nothing "
                            f"was removed: give it a file of its own and rerun")


def _finish(run, plan: dict) -> None:
    """The removal of `plan` from its first step not done yet: HEAD, the records, the artifacts (each renamed into
    the trash, then removed there), the rows last; then the intent."""
    if plan["head"] and run.head().configuration in plan["configurations"]:
        run.update_head("roarfast.rundir.inventory.prune()", configuration=None)
    for path in [run.configuration_path(c) for c in plan["configurations"]] + [
            run.configurations_root / name for name in plan["damaged"]]:
        path.unlink(missing_ok=True)
    doomed = [(run.rank_dir(method, rid), f"ranks-{dir_name(method)}-{rid}") for method, rid in plan["ranks"]]
    doomed += [(run.model_dir(mid), f"model-{mid}") for mid in plan["models"]]
    for path, name in doomed:
        if path.is_dir():
            run.trash_dir.mkdir(parents=True, exist_ok=True)
            shutil.rmtree(run.trash_dir / name, ignore_errors=True)  # one a kill left there
            os.rename(path, run.trash_dir / name)
    for method_dir in {path.parent for path, _ in doomed[:len(plan["ranks"])]}:
        if method_dir.is_dir() and not any(method_dir.iterdir()):
            method_dir.rmdir()
    if run.trash_dir.is_dir():
        shutil.rmtree(run.trash_dir)
    if plan["rows"] and run.results_path.is_file():
        with open_results(run) as db:
            keys = [MeasurementKey(**row) for row in plan["rows"]]
            # a cell claimed since the prune began is its claimant's: removing it would orphan the row it records
            rows = [db.get(key) for key in keys]
            db.delete([key for key, row in zip(keys, rows) if row is None or row["status"] != "running"
                       or not owner_alive(row["owner"], row["heartbeat"])])
    run.prune_intent_path.unlink()
