"""A prune carried out so that it cannot half-finish nor reach outside the run directory (`roarfast prune`,
roarfast.rundir.inventory decides what goes).

Its intent is checked (roarfast.records.prune.PruneIntent: every id an id, every method and file name one name),
every place it removes built by the one path builder and refused where a link stands on its way, and HEAD read,
before anything is written; then the intent is written (claims/prune.json), HEAD stops naming a removed
configuration, the records go, each rank store and base model is renamed into claims/trash (one rename: never
found half removed) and removed there, and the results rows go last, in one transaction; then the intent.

A kill at any point leaves the intent: the next command that opens the run directory for writing (`upgrade`), or
lists or prunes it, finishes it (`finish`), every step done again only where it is not done yet. An error is
never left for every later command to meet again: one before anything was changed withdraws the intent (nothing
was removed); one that stops a prune midway, or an intent that cannot be finished (damaged, edited to name what
is not of its run directory, a link planted on its way), is said once, in one line with what to do, and its
intent removed, so that no later command tries it again (`roarfast ls` lists what it left). Only the environment
refusing a write (a full disk, a read-only directory) keeps the intent of a prune begun: a later command that can
write there finishes it.
"""

import logging
import os
import shutil
import stat

from roarfast.errors import UserError, is_write_refused
from roarfast.measurements.row import MeasurementKey
from roarfast.records.claims import owner_alive
from roarfast.records.ids import SHOWN_CHARS
from roarfast.records.paths import contained, place
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
    """Removes what `plan` (intent(...)) names from RunDir `run`: checked, its intent written, then finished (see
    the module's docstring)."""
    _check(run, plan)
    try:
        _refuse_links(run, plan)  # before anything is written, the claim's lock included
    except UserError as err:
        raise UserError(f"prune: {err}; nothing was removed: put a file or folder of its own in its place, and "
                        f"rerun") from None
    with run.claim("prune"):  # one prune at a time
        if plan["head"]:
            run.head()  # read before anything is written: a damaged HEAD stops the prune here, not midway
        run.records.put(PruneIntent.from_record(plan), plan)
        _carry(run, plan, begun_here=True)


def pending(run) -> dict | None:
    """The intent of a prune a kill left unfinished in `run` (verified), or None."""
    plan = run.records.get(PruneIntent)
    if plan is not None:
        _check(run, plan)
    return plan


def finish(run) -> str | None:
    """Finishes the prune a kill left unfinished in RunDir `run`, if any; returns the line that says so. One that
    cannot be finished is said once (a UserError) and its intent removed."""
    if not os.path.lexists(run.prune_intent_path):
        return None
    with run.claim("prune"):
        try:
            plan = pending(run)  # another process may have finished it meanwhile
        except UserError as err:
            _give_up(run, err)
        if plan is None:
            return None
        _carry(run, plan, begun_here=False)
    line = f"prune: finished the prune that was interrupted in {run.root} ({_named(plan)})"
    log.warning("note: %s", line)
    return line


def _named(plan: dict) -> str:
    """The configurations a prune's intent names, as a line shows them."""
    shown = [c[:SHOWN_CHARS] for c in plan["configurations"]] + plan["damaged"]
    return f"configurations {', '.join(shown) or 'none'}"


def _carry(run, plan: dict, begun_here: bool) -> None:
    """_finish, under the prune's claim; an error said in one line (see the module's docstring), a kill
    (KeyboardInterrupt, a signal) leaving the intent for the next command."""
    changed = []
    try:
        _refuse_links(run, plan)
        _finish(run, plan, changed)
    except Exception as err:
        if isinstance(err, OSError) and is_write_refused(err) and (changed or not begun_here):
            raise  # the environment refused a write: the intent stays for a command that can write there
        if begun_here and not changed:
            run.prune_intent_path.unlink(missing_ok=True)
            if not isinstance(err, (UserError, OSError)):
                raise
            raise UserError(f"prune: {err}; nothing was removed") from None
        _give_up(run, err)


def _give_up(run, err: Exception):
    """Removes the intent of a prune that cannot be finished, so that no command tries it again, and says so in
    one line with what to do (a bug's traceback kept)."""
    path = run.prune_intent_path
    try:
        path.unlink(missing_ok=True)  # claim() refused a link at claims/: this removes a file of the run directory
        fate = "it was removed, so that no command tries it again"
    except OSError as removal:
        fate = f"remove it ({removal.strerror}), so that no command tries it again"
    if not isinstance(err, (UserError, OSError)):
        raise err
    raise UserError(f"prune: cannot finish the prune recorded in {path} ({err}); {fate}; what it named may be half "
                    f"removed: `roarfast ls --run-dir {run.root}` lists what is left, and `roarfast prune` removes "
                    f"it") from None


def _check(run, plan: dict) -> None:
    """A UserError when `plan` is not of an intent's form (PruneIntent.check: nothing named in it can reach outside
    the run directory), or when a row it names is not a results row's key."""
    where = run.prune_intent_path
    PruneIntent.check(plan, where)
    try:
        for row in plan["rows"]:
            MeasurementKey(**{k: row[k] for k in KEY_FIELDS})
    except (KeyError, TypeError, ValueError) as err:
        raise UserError(f"{where} is not a prune's intent: a row it names is not a results row's key ({err})") from None


def _records(run, plan: dict) -> list:
    """The configuration records the prune of `plan` removes, each built by the one path builder."""
    return ([run.configuration_path(c) for c in plan["configurations"]]
            + [place(run.configurations_root, name) for name in plan["damaged"]])


def _artifacts(run, plan: dict) -> list:
    """(place, name in the trash) of each rank store and base model the prune of `plan` removes."""
    doomed = [(run.rank_dir(method, rid), f"ranks-{dir_name(method)}-{rid}") for method, rid in plan["ranks"]]
    return doomed + [(run.model_dir(mid), f"model-{mid}") for mid in plan["models"]]


def _refuse_links(run, plan: dict) -> None:
    """A UserError, before anything is removed, when a place the prune removes or passes through lies behind a
    symbolic link leading out of the run directory (contained) or is a link itself, or when a hard link stands at
    results.sqlite (which SQLite writes in place); its line says which, without a repair (its caller's)."""
    stores = [path for path, _ in _artifacts(run, plan)[:len(plan["ranks"])]]
    places = [run.head_path, run.claims_dir, run.trash_dir, run.configurations_root, *_records(run, plan),
              run.ranks_root, *{s.parent for s in stores}, *(path for path, _ in _artifacts(run, plan)),
              run.models_root, *(place(run.trash_dir, name) for _, name in _artifacts(run, plan))]
    for path in places:
        if path.is_symlink():
            raise UserError(f"refusing to remove {path}: it is a symbolic link (to {os.readlink(path)}), and "
                            f"roarfast removes nothing through a link")
        try:
            contained(run.root, path)
        except UserError:
            raise UserError(f"refusing to remove {path}: it lies behind a symbolic link leading out of {run.root}, "
                            f"and roarfast removes nothing through a link") from None
    for suffix in ("", "-wal", "-shm"):
        path = run.results_path.with_name(run.results_path.name + suffix)
        try:
            status = os.lstat(path)
        except FileNotFoundError:
            continue
        if stat.S_ISLNK(status.st_mode) or (stat.S_ISREG(status.st_mode) and status.st_nlink > 1):
            raise UserError(f"refusing to write {path}: it is a link, and SQLite writes it in place")


def _finish(run, plan: dict, changed: list) -> None:
    """The removal of `plan` from its first step not done yet: HEAD, the records, the artifacts (each renamed into
    the trash, then removed there), the rows last; then the intent. Each change is appended to `changed`."""
    if plan["head"] and run.head().configuration in plan["configurations"]:
        run.update_head("roarfast.rundir.inventory.prune()", configuration=None)
        changed.append(run.head_path)
    for path in _records(run, plan):
        if os.path.lexists(path):
            path.unlink()
            changed.append(path)
    doomed = _artifacts(run, plan)
    for path, name in doomed:
        if path.is_dir():
            run.trash_dir.mkdir(parents=True, exist_ok=True)
            trashed = place(run.trash_dir, name)
            shutil.rmtree(trashed, ignore_errors=True)  # one a kill left there
            os.rename(path, trashed)
            changed.append(path)
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
            changed.append(run.results_path)
    run.prune_intent_path.unlink()
