"""What a run directory keeps, listed (`roarfast ls`, Study.configurations()) and pruned (`roarfast prune`): its
configurations (roarfast.rundir.configurations, and the cells no record claims, from before run-directory
format 2), each with its cells done and in its grids, the bytes of its base model and ranks and when it was
requested; and the base models and rank stores no configuration uses. Pruning removes only what it is told
to: the named configurations' records, and the rows, rank stores and base models that no other configuration
nor HEAD uses."""

import shutil
from collections import Counter
from pathlib import Path

from roarfast.errors import UserError
from roarfast.rundir.configurations import claims, configurations, grid_cells
from roarfast.rundir.ids import SHOWN_CHARS
from roarfast.rundir.migrate import upgrade
from roarfast.report.configurations import assemble, named
from roarfast.results import RETRAIN, MeasurementKey, open_results
from roarfast.rundir.directory import RunDir


def _size(path: Path) -> int:
    """Bytes of the files under `path` (links not followed)."""
    return sum(p.lstat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink()) if path.is_dir() else 0


def _state(run_dir, writing: bool = False):
    """(RunDir, HEAD, configurations (report.configurations.assemble: records and the rows no record claims),
    every retraining row) of `run_dir`, read as it is (migrated first when `writing`)."""
    run = RunDir(run_dir)
    if not run.root.is_dir():
        raise UserError(f"--run-dir {run.root}: no such run directory")
    if writing:
        upgrade(run)
    rows = []
    if run.results_path.is_file():
        with open_results(run, readonly=not writing) as db:
            rows = db.rows(kind=RETRAIN)
    found = assemble(configurations(run), [r for r in rows if r["status"] == "done"])
    return run, run.head(), found, rows


def _uses(c) -> tuple:
    """(base model id or None, {(method, rank id)}) of a configuration."""
    if c.record is None:
        return None, set()
    return c.settings["config"].get("base"), set(c.record["ranks"].items())


def listing(run_dir) -> dict:
    """{"configurations": [a dict per configuration: label, id, head, cells_done, cells (in its grids; None
    before format 2), bytes (its base model and rank stores), own_bytes (those no other configuration nor HEAD
    uses: what pruning it frees), first, last, command, adopted (its base model's record of adopted weights, or
    None)], "models": [base models no configuration uses: id, bytes, model, seed, adopted], "ranks": [rank stores
    no configuration uses: method, id, bytes]}."""
    run, head, found, _ = _state(run_dir)
    stores = {(m, rid): path for m, rid, path in run.rank_stores()}
    models = run.models()
    # each artifact's bytes walked once: a base model or a rank store is shared by several configurations
    size = {artifact: _size(path) for artifact, path in {**models, **stores}.items()}
    out = {"configurations": [], "models": [], "ranks": []}
    used_models, used_ranks = {head.base}, set(head.ranks.items())
    uses = [_uses(c) for c in found]
    # an artifact's users: the configurations and HEAD; one used by a single configuration alone is its own
    users = Counter([head.base, *head.ranks.items()])
    for base, ranks in uses:
        users.update([base, *ranks])
    for c, (base, ranks) in zip(found, uses):
        used_models.add(base)
        used_ranks |= ranks
        done = {(r["method"], r["mode"], r["fraction"], r["seed"], r["fill"]) for r in c.rows}
        grid = grid_cells(c.record["grids"]) if c.record else None
        sizes = {artifact: size[artifact] for artifact in (base, *ranks) if artifact in size}
        out["configurations"].append({
            "label": c.label, "id": c.id, "head": c.id == head.configuration,
            "cells_done": len(done & grid) if grid is not None else len(done),
            "cells": len(grid) if grid is not None else None, "bytes": sum(sizes.values()),
            "own_bytes": sum(size for artifact, size in sizes.items() if users[artifact] == 1),
            "first": (c.record or {}).get("first") or c.first, "last": (c.record or {}).get("last") or c.last,
            "command": (c.record or {}).get("command"),
            "adopted": run.model_meta(base).get("adopted") if base in models else None})
    out["models"] = [{"id": mid, "bytes": size[mid], "model": run.model_meta(mid).get("model"),
                      "seed": run.model_meta(mid).get("seed"), "adopted": run.model_meta(mid).get("adopted")}
                     for mid in models if mid not in used_models]
    out["ranks"] = [{"method": m, "id": rid, "bytes": size[(m, rid)]} for m, rid in sorted(stores)
                    if (m, rid) not in used_ranks]
    return out


def ls_lines(run_dir) -> list[str]:
    """`roarfast ls`: a line per configuration (* marks the latest request's), then what no configuration uses."""
    found = listing(run_dir)
    lines = [f"configurations in {run_dir} (* the latest request's, which `roarfast report` answers for):"
             if found["configurations"] else f"no configurations in {run_dir} yet (no cells were requested)"]
    for c in found["configurations"]:
        cells = f"{c['cells_done']}/{c['cells']}" if c["cells"] is not None else f"{c['cells_done']}"
        lines.append(f"{'*' if c['head'] else ' '} {c['id'][:SHOWN_CHARS]:<10} [{c['label'] or 'the only one'}] "
                     f"cells {cells}, {_mib(c['bytes'])} ({_mib(c['own_bytes'])} its own), requested {_when(c['first'])}"
                     + (f" .. {_when(c['last'])}" if _when(c["last"]) != _when(c["first"]) else "")
                     + f": {c['command'] or 'made before run-directory format 2'}"
                     + (f"; base model {_adopted(c['adopted'])}" if c.get("adopted") else ""))
    for m in found["models"]:
        made = _adopted(m["adopted"]) if m.get("adopted") else f"seed {m['seed']}"
        lines.append(f"  base model {m['id'][:SHOWN_CHARS]} ({m['model']}, {made}, {_mib(m['bytes'])}): "
                     f"no configuration uses it")
    for r in found["ranks"]:
        lines.append(f"  ranks of {r['method']} {r['id'][:SHOWN_CHARS]} ({_mib(r['bytes'])}): no configuration uses "
                     f"them")
    return lines


def prune(run_dir, names, dry_run: bool = False) -> list[str]:
    """Removes the configurations `names` names (labels or id prefixes: report.configurations.named): their
    records, and their rows, rank stores and base models that no other configuration nor HEAD uses; with
    `dry_run`, removes nothing. Returns the lines saying what goes (or would) and what stays."""
    names = [n for n in (names or ()) if str(n).strip()]
    if not names:
        raise UserError("prune: name the configurations to remove (a label or an id: `roarfast ls` lists them)")
    run, head, found, rows = _state(run_dir, writing=not dry_run)
    targets = list({id(c): c for c in (named(found, n, "prune") for n in names)}.values())
    kept = [c for c in found if all(c is not t for t in targets)]
    used_models = {head.base} | {_uses(c)[0] for c in kept}
    used_ranks = set(head.ranks.items()).union(*(_uses(c)[1] for c in kept))

    def rows_of(c) -> set:  # a record's rows of any status (a claim in flight too); others', their done rows
        return {id(r) for r in rows if claims(c.record, r)} if c.record else {id(r) for r in c.rows}

    claimed = set().union(*(rows_of(t) for t in targets))
    shared = set().union(*(rows_of(c) for c in kept))
    gone_rows = [r for r in rows if id(r) in claimed and id(r) not in shared]
    models = run.models()
    stores = {(m, rid): path for m, rid, path in run.rank_stores()}
    gone_ranks = sorted({r for t in targets for r in _uses(t)[1] if r not in used_ranks and r in stores})
    gone_models = sorted({_uses(t)[0] for t in targets} - used_models - {None} & set(models))
    verb = "would remove" if dry_run else "removed"
    lines = [f"prune: {verb} configuration [{t.label or 'the only one'}] {t.id[:SHOWN_CHARS]}" for t in targets]
    lines.append(f"prune: {verb} {len(gone_rows)} rows (cells no other configuration shares)")
    lines += [f"prune: {verb} the ranks of {m} {rid[:SHOWN_CHARS]} ({_mib(_size(stores[(m, rid)]))})"
              for m, rid in gone_ranks]
    lines += [f"prune: {verb} base model {mid[:SHOWN_CHARS]} ({_mib(_size(models[mid]))})" for mid in gone_models]
    if not dry_run:
        fields = ("kind", "dataset", "model", "method", "mode", "fill", "fraction", "seed", "config_hash")
        with open_results(run) as db:
            db.delete([MeasurementKey(**{k: r[k] for k in fields}) for r in gone_rows])
        for key in gone_ranks:
            shutil.rmtree(stores[key])
        for mid in gone_models:
            shutil.rmtree(models[mid])
        for t in targets:
            if t.record is not None:
                run.configuration_path(t.id).unlink(missing_ok=True)
        if any(t.id == head.configuration for t in targets):
            run.update_head("roarfast.rundir.inventory.prune()", configuration=None)
    lines.append("prune: kept everything a kept configuration or HEAD uses"
                 + (" (--dry-run: nothing was removed)" if dry_run else ""))
    return lines


def _adopted(adopted: dict) -> str:
    """"adopted weights FILE (sha256 ...), not trained here": a base model of weights trained elsewhere."""
    return f"adopted weights {adopted['file']} (sha256 {adopted['file_sha256'][:12]}), not trained here"


def _mib(size: int) -> str:
    return f"{size / 2 ** 20:.1f} MiB"


def _when(stamp: str) -> str:
    return stamp[:16].replace("T", " ") if stamp else "-"
