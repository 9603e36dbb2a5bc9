"""Migrating a run directory of format 1 (roarfast.rundir.legacy) in place, by the first command that writes
(`upgrade`): each artifact moved to the place of its id (a rename each), the dataset recorded in datasets/, the
results rows proven to come from the migrated base model and ranks given their ids, their configurations
recorded, HEAD written, the emptied format-1 places removed. Its plan is written first (claims/migration.json),
so a kill at any point leaves a run directory that the next command that writes finishes migrating, and that
a reader reads as the plan says meanwhile. `migrated_row`: what a dry run counts as done before it."""

import logging
import os
import shutil
from pathlib import Path

from roarfast.errors import UserError
from roarfast.fills import DEFAULT_FILL
from roarfast.measurements.row import RETRAIN, MeasurementKey
from roarfast.records.checkpoint import META
from roarfast.records.dataset import DatasetRecord
from roarfast.records.head import Head
from roarfast.records.ranks import MANIFEST, RankStoreRecord, dir_name
from roarfast.rundir.configurations import about_of, grid_of, request, settings_of
from roarfast.rundir.legacy import (MIGRATED, MigrationPlan, iso_time, legacy_head, legacy_models, legacy_stores,
                                    needs_migration, plan_path)
from roarfast.rundir.pruning import finish
from roarfast.rundir.results import open_results

log = logging.getLogger(__name__)


def upgrade(run) -> None:
    """Migrates RunDir `run` when it is of format 1 (or half migrated), and finishes a prune a kill left
    unfinished (roarfast.rundir.pruning); every command that writes calls this first; a run directory of format
    2 (or a new one) is otherwise left as it is."""
    if needs_migration(run):
        migrate(run)
    finish(run)


def migrate(run) -> None:
    """Migrates `run` from format 1 in place, under its claim (see the module's docstring)."""
    with run.claim("migrate"):
        if not needs_migration(run):
            return  # another process migrated it while this one waited
        _refuse_links(run)
        plan = plan_path(run)
        if not plan.is_file():
            run.records.put(MigrationPlan(**legacy_head(run).to_dict()))
        head = legacy_head(run)
        if head.dataset is not None:
            run.records.put(DatasetRecord(head.dataset["fingerprint"]), head.dataset)
        base_time = _move_base(run, head)
        stores = _move_stores(run)
        configuration = _attribute_rows(run, head, base_time, stores)
        run.records.put(Head(**{**head.to_dict(), "configuration": configuration}))
        run.legacy_dataset_path.unlink(missing_ok=True)
        for place in (run.legacy_base_checkpoint.parent, run.legacy_rank_root):
            if place.is_dir() and not any(p.is_file() for p in place.rglob("*")):
                shutil.rmtree(place)
        plan.unlink()
    log.warning("note: %s was of run-directory format 1: migrated in place (models/, ranks/, datasets/, HEAD.json)",
                run.root)


def _refuse_links(run) -> None:
    """A UserError, before anything moves, where a symbolic link stands at a folder the migration moves or
    removes (format 1's and format 2's): a rename or a removal through it would reach outside the run directory."""
    folders = [run.legacy_base_checkpoint.parent, run.legacy_base_checkpoint, run.legacy_rank_root, run.models_root,
               run.ranks_root, run.datasets_root]
    root = run.legacy_rank_root
    for method_dir in root.iterdir() if root.is_dir() and not root.is_symlink() else ():
        folders += [method_dir, *(method_dir.iterdir() if method_dir.is_dir() and not method_dir.is_symlink() else ())]
    for path in folders:
        if path.is_symlink():
            raise UserError(f"migrate: refusing to move {path}: it is a symbolic link (to {os.readlink(path)}), and "
                            f"roarfast moves nothing through a link; nothing was moved: put what it points to in its "
                            f"place, and rerun")


def _move(source: Path, target: Path) -> None:
    """Moves `source` to `target` (a rename; across filesystems a copy renamed into place, then the source
    removed); where `target` is there already (moved before a kill), the source is removed."""
    if target.exists():
        shutil.rmtree(source)
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.rename(source, target)
    except OSError:
        partial = target.with_name(target.name + ".moving")
        shutil.rmtree(partial, ignore_errors=True)
        shutil.copytree(source, partial, symlinks=True)
        os.rename(partial, target)
        shutil.rmtree(source)


def _move_base(run, head: Head) -> str | None:
    """Moves checkpoints/base to models/<id> (a damaged one to models/format-1-unreadable, kept, never read);
    returns when HEAD's base model's meta was written (ISO, UTC; None: no base model)."""
    for model_id, where in legacy_models(run).items():
        _move(where, run.model_dir(model_id))
    if run.legacy_base_checkpoint.is_dir() and any(run.legacy_base_checkpoint.iterdir()):
        log.warning("note: %s cannot be read: kept in models/format-1-unreadable", run.legacy_base_checkpoint)
        _move(run.legacy_base_checkpoint, run.models_root / "format-1-unreadable")
    meta = run.model_dir(head.base) / META if head.base else None
    return iso_time(meta) if meta is not None and meta.is_file() else None


def _move_stores(run) -> dict:
    """Moves each store attributions/<m>/<split> to ranks/<m>/<id>/<split> (a damaged one to
    ranks/<m>/format-1-unreadable/<split>, kept, never read); returns {(method, rank id): manifest} of those
    complete in their place."""
    for method, rank_id, method_dir, split in legacy_stores(run):
        _move(method_dir / split, run.rank_dir(method, rank_id) / split)
    root = run.legacy_rank_root
    for split_dir in (p for d in root.iterdir() if d.is_dir() for p in d.iterdir()) if root.is_dir() else ():
        if split_dir.is_dir():
            log.warning("note: %s cannot be read: kept in ranks/%s/format-1-unreadable", split_dir, split_dir.parent.name)
            _move(split_dir, run.ranks_root / dir_name(split_dir.parent.name) / "format-1-unreadable" / split_dir.name)
    stores = {}
    for method, rank_id, directory in run.rank_stores():
        manifest = run.records.get(RankStoreRecord, at=directory / "train" / MANIFEST)
        if manifest is not None and manifest["complete"]:
            stores[(method, rank_id)] = manifest
    return stores


def _attribute_rows(run, head: Head, base_time: str | None, stores: dict) -> str | None:
    """Gives the retraining rows proven to come from HEAD's base model and a migrated store their ids (the row
    finished after the base model was saved and after the store was completed, with the store's provenance and
    data), in one transaction; records the configurations they form. Returns the id of the configuration when
    they form one, else None. Rows not proven stay as they are (a configuration of before format 2)."""
    if not run.results_path.is_file() or head.base is None or base_time is None:
        return None
    proven = {}
    with open_results(run) as db:
        pairs = []
        for row in db.rows(kind=RETRAIN, status="done"):
            rid = _proven_ranks(row, stores, base_time)
            if rid is None:
                continue
            new = {**row["config"], "base": head.base, "rank_id": rid}
            fields = {k: row[k] for k in ("kind", "dataset", "model", "method", "mode", "fill", "fraction", "seed")}
            pairs.append((MeasurementKey(**fields, config_hash=row["config_hash"]),
                          MeasurementKey.of(**fields, config=new)))
            proven.setdefault(row["method"], []).append({**row, "config": new})
        db.rekey(pairs)
    return _record_migrated(run, head.base, proven)


def _proven_ranks(row: dict, stores: dict, base_time: str | None) -> str | None:
    """The id of the store `row` is proven to come from ({(method, rank id): manifest} of the complete ones):
    it finished after the base model was saved (`base_time`) and after the store was completed, with the
    store's provenance and data; None when no store, or several, are."""
    config = row["config"]
    if config is None or "base" in config or base_time is None:
        return None
    finished = row["finished"] or ""
    match = [rid for (method, rid), m in stores.items()
             if method == row["method"] and m["params"] == config.get("ranks") and finished >= base_time
             and m["dataset_fingerprint"] == config.get("dataset") and finished >= m["updated"]]
    return match[0] if len(match) == 1 else None


def migrated_row(run, db, key):
    """The row a migration of `run` (of format 1, read as it is) would give `key` (a key of format 2, its config
    naming its base model and ranks' id): its format-1 row, where that is proven to be it; else None. What a dry
    run counts as done before the migration."""
    config = key.config or {}
    if not needs_migration(run) or config.get("base") not in legacy_models(run):
        return None
    old = {k: v for k, v in config.items() if k not in ("base", "rank_id")}
    fields = {k: getattr(key, k) for k in ("kind", "dataset", "model", "method", "mode", "fill", "fraction", "seed")}
    row = db.get(MeasurementKey.of(**fields, config=old))
    if row is None:
        return None
    stores = {}
    for method, rid, directory, split in legacy_stores(run):
        manifest = run.records.get(RankStoreRecord, at=directory / split / MANIFEST)
        if split == "train" and manifest["complete"]:
            stores[(method, rid)] = manifest
    rid = _proven_ranks(row, stores, iso_time(run.legacy_base_checkpoint / META))
    return row if rid is not None and rid == config.get("rank_id") else None


def _record_migrated(run, base: str, proven: dict) -> str | None:
    """Records the configurations the rows attributed to the base model `base` form ({method: rows}); the id of
    the one they form, or None when none or several."""
    groups = {}
    for method, rows in proven.items():
        for row in rows:
            key = repr(sorted(settings_of(row).items(), key=str))
            group = groups.setdefault(key, {"settings": settings_of(row), "ranks": {}, "provenance": {}, "rows": []})
            group["ranks"][method] = row["config"]["rank_id"]
            group["provenance"][method] = row["config"]["ranks"]
            group["rows"].append(row)
    ids = []
    for group in groups.values():
        rows = group["rows"]
        controls = sorted({r["seed"] for r in rows if r["fill"] is None})
        record = None
        for fill in sorted({r["fill"] for r in rows if r["fill"] is not None}) or [DEFAULT_FILL]:
            cells = [r for r in rows if r["fill"] == fill]
            grid = grid_of(sorted(group["ranks"]), sorted({r["mode"] for r in cells}),
                           sorted({r["fraction"] for r in cells}), sorted({r["seed"] for r in cells}), controls, fill)
            record = request(run, group["settings"], group["ranks"], group["provenance"], grid, MIGRATED,
                             about_of(run.model_meta(base), run.head().dataset))
        ids.append(record["id"])
    return ids[0] if len(ids) == 1 else None
