"""Run directories of format 1 (written before artifacts had ids: checkpoints/base, attributions/<method>/<split>,
dataset.json), read as they are by the commands that only read: the ids read off the records (the base model's
meta, each store's manifest), HEAD as format 1 says it, or as the plan of a migration a kill left half done
says it (roarfast.rundir.migrate migrates them in place)."""

import json
from datetime import datetime, timezone
from pathlib import Path

from roarfast.common.atomic import refuse_link
from roarfast.common.fingerprint import read_record
from roarfast.errors import UserError
from roarfast.records.checkpoint import META
from roarfast.records.claims import CLAIMS
from roarfast.records.head import Head
from roarfast.records.model import ModelRecord
from roarfast.records.ranks import MANIFEST, RankStoreRecord
from roarfast.store.layout import SPLITS

#: the command a migrated record names
MIGRATED = "recorded before run-directory format 2 (migrated)"
#: the repair of a damaged leakage.json (fill leakage before results schema v3)
LEAKAGE_REPAIR = "restore it, or remove it (`roarfast leakage` measures the fill leakage again)"
#: a leakage.json row's fields and their types
_LEAKAGE_FIELDS = {"method": str, "fill": str, "fraction": (int, float), "accuracy": (int, float),
                   "base_rate": (int, float)}


class MigrationPlan(Head):
    """A migration's plan (roarfast.rundir.migrate): HEAD as format 1 says it, written before anything moves,
    removed once everything has; a reader reads the run directory as it says meanwhile."""

    kind = "migration plan"
    what = "migration plan"
    format = None
    repair = "remove it and restore the run directory's format-1 files"

    @classmethod
    def place(cls, record_id=None, where=None) -> tuple:
        return CLAIMS, "migration.json"


def plan_path(run) -> Path:
    return run.records.path(MigrationPlan)


def needs_migration(run) -> bool:
    """Whether `run` holds format 1's places (or a migration a kill left half done)."""
    return (run.legacy_base_checkpoint.exists() or run.legacy_rank_root.exists() or run.legacy_dataset_path.exists()
            or plan_path(run).exists())


def legacy_models(run) -> dict:
    """{model id: checkpoints/base} when format 1's base model is there, complete and readable."""
    where = run.legacy_base_checkpoint
    if not (where / META).is_file():
        return {}
    try:
        return {ModelRecord.from_record(run.records.get(ModelRecord, at=where / META)).id: where}
    except UserError:
        return {}  # damaged: the migration sets it aside, a reader finds no base model there


def legacy_ranks(run) -> dict:
    """{(method, rank id): attributions/<method>} of format 1's rank stores."""
    return {(method, rank_id): directory for method, rank_id, directory, _ in legacy_stores(run)}


def legacy_stores(run) -> list:
    """(method, rank id, method directory, split) of each readable store of format 1."""
    root = run.legacy_rank_root
    found = []
    for method_dir in sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else ():
        for split_dir in sorted(p for p in method_dir.iterdir() if p.is_dir()):
            try:
                manifest = run.records.get(RankStoreRecord, at=split_dir / MANIFEST)
            except UserError:
                continue  # damaged: the migration sets it aside, a reader finds no ranks there
            if manifest is not None:  # its method is its folder's (RankStoreRecord.read)
                found.append((manifest["method"], RankStoreRecord.from_record(manifest).id, method_dir, split_dir.name))
    return found


def legacy_head(run) -> Head | None:
    """What format 1 says of the latest request (None in a run directory of format 2): its dataset record, its
    base model's id, the id of each method's ranks complete in every split; no configuration (none was recorded)."""
    plan = run.records.get(MigrationPlan)
    if plan is not None:
        return Head.from_record(plan)
    if not needs_migration(run):
        return None
    dataset = read_record(run.legacy_dataset_path, "restore it, or remove it and name the dataset again",
                          older=lambda record: "format" not in record)
    if dataset is not None:
        dataset.pop("format", None)
    splits = {}
    for method, rank_id, _, split in legacy_stores(run):
        splits.setdefault((method, rank_id), set()).add(split)
    ranks = {method: rank_id for (method, rank_id), done in splits.items() if done >= set(SPLITS)}
    return Head(dataset=dataset, base=next(iter(legacy_models(run)), None), ranks=ranks, command=MIGRATED)


def iso_time(path: Path) -> str:
    return datetime.fromtimestamp(path.stat().st_mtime, timezone.utc).isoformat(timespec="seconds")




def fill_leakage_rows(run) -> list | None:
    """The rows of RunDir `run`'s leakage.json (fill leakage before results schema v3: method, fill, fraction,
    accuracy, base_rate), or None when there is none; a UserError naming it and the repair when it is damaged."""
    path = run.legacy_fill_leakage_path
    if not path.is_file():
        return None
    refuse_link(path)
    try:
        rows = json.loads(path.read_text())
    except (ValueError, UnicodeDecodeError) as err:
        raise UserError(f"{path} is not valid JSON ({err}); {LEAKAGE_REPAIR}") from None
    if not isinstance(rows, list) or not all(
            isinstance(r, dict) and all(isinstance(r.get(k), t) and not isinstance(r.get(k), bool)
                                        for k, t in _LEAKAGE_FIELDS.items()) for r in rows):
        raise UserError(f"{path} does not hold fill-leakage rows ({', '.join(_LEAKAGE_FIELDS)} each); {LEAKAGE_REPAIR}")
    return rows
