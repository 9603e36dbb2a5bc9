"""What a run directory keeps, listed (`roarfast ls`, Study.configurations()) and pruned (`roarfast prune`): its
configurations (roarfast.rundir.configurations, and the cells no record claims, from before run-directory
format 2), each with its cells done and in its grids, the bytes of its base model and ranks and when it was
requested; and the base models and rank stores no configuration uses. Pruning removes only what it is told
to: the named configurations' records, and the rows, rank stores and base models that no other configuration
nor HEAD uses."""

import logging
from pathlib import Path

from roarfast.errors import UserError
from roarfast.rundir.configurations import claims, configurations, grid_cells
from roarfast.records.ids import SHOWN_CHARS
from roarfast.rundir.pruning import carry_out, finish, intent
from roarfast.rundir.catalog import assemble, named
from roarfast.measurements.row import RETRAIN
from roarfast.rundir.results import open_results
from roarfast.records.claims import owner_alive
from roarfast.rundir.directory import RunDir
from roarfast.records.head import Head
from roarfast.records.model import adopted_text
from roarfast.rundir.writing import forget, open_for_writing

log = logging.getLogger(__name__)


def _size(path: Path) -> int:
    """Bytes of the files under `path` (links not followed: a link at `path` itself has none)."""
    if not path.is_dir() or path.is_symlink():
        return 0
    return sum(p.lstat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


def _state(run_dir, writing: bool = False, unreadable: list | None = None):
    """(RunDir, HEAD, configurations (rundir.catalog.assemble: records and the rows no record claims),
    every retraining row, the damaged configuration records [(path, why)]) of `run_dir`, read as it is (migrated
    first when `writing`); a prune a kill left unfinished is finished first. With `unreadable` (a list: `roarfast
    ls`), a prune's intent that cannot be finished, a damaged HEAD.json, leakage.json, results.sqlite or results row is appended there (its one line) and the
    rest is read without it; otherwise it is refused in that line."""
    run = RunDir(run_dir)
    if not run.root.is_dir():
        raise UserError(f"--run-dir {run.root}: no such run directory")
    if writing:
        run = open_for_writing(run_dir)  # finishes an interrupted prune too
    else:
        try:
            finish(run)
        except OSError as err:  # a run directory this process cannot write: read as it is
            log.warning("note: an interrupted prune in %s cannot be finished here (%s)", run.root, err)
        except UserError as err:  # said once (its intent removed): `ls` lists it and goes on
            if unreadable is None:
                raise
            unreadable.append(str(err))
    rows = []
    if run.results_path.is_file():
        try:
            with open_results(run, readonly=not writing, damaged=unreadable) as db:
                rows = db.rows(damaged_rows=unreadable, kind=RETRAIN)
        except UserError as err:  # the file itself damaged
            if unreadable is None:
                raise
            unreadable.append(str(err))
    damaged = []
    found = assemble(configurations(run, damaged), [r for r in rows if r["status"] == "done"])
    return run, _head(run, unreadable), found, rows, damaged


def _head(run, unreadable: list | None) -> Head:
    """HEAD of `run`; where it is damaged and `unreadable` is a list, an empty one (its line appended there)."""
    try:
        return run.head()
    except UserError as err:
        if unreadable is None:
            raise
        unreadable.append(str(err))
        return Head()


def _uses(c) -> tuple:
    """(base model id or None, {(method, rank id)}) of a configuration."""
    if c.record is None:
        return None, set()
    return c.settings["config"].get("base"), set(c.record["ranks"].items())


def reachable(head, kept) -> tuple[set, set]:
    """What HEAD and the configurations `kept` use: (base model ids, {(method, rank id)}). What `roarfast ls` counts
    as used, and what `prune` keeps."""
    uses = [_uses(c) for c in kept]
    models = {head.base, *(base for base, _ in uses)} - {None}
    return models, set(head.ranks.items()).union(*(ranks for _, ranks in uses))


def listing(run_dir) -> dict:
    """{"configurations": [a dict per configuration: label (what it goes by: its name, else its label), name (the
    user's, or None), id, differs (the settings whose values differ between the configurations: display name ->
    value), known (every text that selects it besides its id), head, cells_done, cells (in its grids; None
    before format 2), bytes (its base model and rank stores), own_bytes (those no other configuration nor HEAD
    uses: what pruning it frees), first, last, command, adopted (its base model's record of adopted weights, or
    None)], "damaged": [configuration records that cannot be read: file, why], "unreadable": [the one line of each
    other record that cannot be read (HEAD.json, leakage.json, results.sqlite or a row of it), listed without it],
    "models": [base models no
    configuration uses: id, bytes, model, seed (None where its meta is damaged), adopted, head (the latest
    request's: a base model trained or adopted before any cell was requested)], "ranks": [rank stores no
    configuration uses: method, id, bytes, head]}."""
    unreadable = []
    run, head, found, _, damaged = _state(run_dir, unreadable=unreadable)
    stores = {(m, rid): path for m, rid, path in run.rank_stores()}
    models = run.models()
    # each artifact's bytes walked once: a base model or a rank store is shared by several configurations
    size = {artifact: _size(path) for artifact, path in {**models, **stores}.items()}
    out = {"configurations": [], "damaged": [{"file": path.name, "why": why} for path, why in damaged],
           "unreadable": list(dict.fromkeys(unreadable)), "models": [], "ranks": []}
    # what no configuration uses is listed, HEAD's too (marked): a directory holding only a base model trained or
    # adopted, or its ranks, shows them rather than nothing
    used_models, used_ranks = reachable(Head(), found)
    for c in found:
        base, ranks = _uses(c)
        done = {(r["method"], r["mode"], r["fraction"], r["seed"], r["fill"]) for r in c.rows}
        grid = grid_cells(c.record["grids"]) if c.record else None
        sizes = {artifact: size[artifact] for artifact in (base, *ranks) if artifact in size}
        # its own: what neither HEAD nor another configuration reaches (what pruning it frees)
        others_models, others_ranks = reachable(head, [o for o in found if o is not c])
        out["configurations"].append({
            "label": c.label, "name": c.name, "id": c.id, "differs": c.differs, "known": c.known,
            "head": c.id == head.configuration,
            "cells_done": len(done & grid) if grid is not None else len(done),
            "cells": len(grid) if grid is not None else None, "bytes": sum(sizes.values()),
            "own_bytes": sum(n for artifact, n in sizes.items() if artifact not in others_models | others_ranks),
            "first": (c.record or {}).get("first") or c.first, "last": (c.record or {}).get("last") or c.last,
            "command": (c.record or {}).get("command"),
            "adopted": _meta(run, base).get("adopted") if base in models else None})
    for mid in models:
        if mid not in used_models:
            meta = _meta(run, mid)
            out["models"].append({"id": mid, "bytes": size[mid], "model": meta.get("model"), "seed": meta.get("seed"),
                                  "adopted": meta.get("adopted"), "head": mid == head.base})
    out["ranks"] = [{"method": m, "id": rid, "bytes": size[(m, rid)], "head": head.ranks.get(m) == rid}
                    for m, rid in sorted(stores) if (m, rid) not in used_ranks]
    return out


def _meta(run, model_id: str) -> dict:
    """A kept base model's meta.json, or {} where it is damaged (listed all the same, so that it can be pruned)."""
    try:
        return run.model_meta(model_id)
    except UserError:
        return {}


def ls_lines(run_dir, found: dict | None = None) -> list[str]:
    """`roarfast ls`: a line per configuration (* marks the latest request's), then the damaged configuration
    records, then what no configuration uses; `found`: listing(run_dir), where the caller has it."""
    found = listing(run_dir) if found is None else found
    lines = [f"configurations in {run_dir} (* the latest request's, which `roarfast report` answers for):"
             if found["configurations"] else f"no configurations in {run_dir} yet (no cells were requested)"]
    for c in found["configurations"]:
        cells = f"{c['cells_done']}/{c['cells']}" if c["cells"] is not None else f"{c['cells_done']}"
        lines.append(f"{'*' if c['head'] else ' '} {c['id'][:SHOWN_CHARS]:<10} [{c['label'] or 'the only one'}] "
                     f"cells {cells}, {_mib(c['bytes'])} ({_mib(c['own_bytes'])} its own), requested {_when(c['first'])}"
                     + (f" .. {_when(c['last'])}" if _when(c["last"]) != _when(c["first"]) else "")
                     + f": {c['command'] or 'made before run-directory format 2'}"
                     + (f"; base model {adopted_text(c['adopted'], 12)}" if c.get("adopted") else ""))
    for d in found["damaged"]:
        lines.append(f"! damaged configuration record {d['file']} (`roarfast prune {d['file']}` removes it): {d['why']}")
    lines += [f"! damaged, listed without it: {why}" for why in found.get("unreadable", [])]
    for m in found["models"]:
        made = adopted_text(m["adopted"], 12) if m.get("adopted") else f"seed {m['seed']}"
        lines.append(f"{_unused(m)}base model {m['id'][:SHOWN_CHARS]} ({m['model'] or 'its meta.json is damaged'}, "
                     f"{made}, {_mib(m['bytes'])}): no configuration uses it{_yet(m)}")
    for r in found["ranks"]:
        lines.append(f"{_unused(r)}ranks of {r['method']} {r['id'][:SHOWN_CHARS]} ({_mib(r['bytes'])}): no "
                     f"configuration uses them{_yet(r)}")
    return lines


def prune(run_dir, names, dry_run: bool = False) -> list[str]:
    """Removes the configurations `names` names (labels or id prefixes: rundir.catalog.named; a damaged
    record by its file's name): their records, and their rows, rank stores and base models that no other
    configuration nor HEAD uses; with `dry_run`, removes nothing. A configuration whose cells a live process
    has claimed is refused (one line naming it), and so is a link on the way, before anything is removed; the
    removal cannot half-finish (roarfast.rundir.pruning). Returns the lines saying what goes (or would) and what
    stays."""
    names = [str(n) for n in (names or ()) if str(n).strip()]
    if not names:
        raise UserError("prune: name the configurations to remove (a label or an id: `roarfast ls` lists them)")
    run, head, found, rows, damaged = _state(run_dir, writing=not dry_run)
    bad = {name: path.name for path, _ in damaged for name in (path.name, path.stem)}
    targets = list({id(c): c for c in (named(found, n, "prune") for n in names if n not in bad)}.values())
    broken = sorted({bad[n] for n in names if n in bad})
    kept = [c for c in found if all(c is not t for t in targets)]
    used_models, used_ranks = reachable(head, kept)

    def rows_of(c) -> list:  # a record's rows of any status (a claim in flight too); others', their done rows
        return [r for r in rows if claims(c.record, r)] if c.record else list(c.rows)

    for t in targets:
        live = [r for r in rows_of(t) if r["status"] == "running" and owner_alive(r["owner"], r["heartbeat"])]
        if live:
            owner = live[0]["owner"]
            raise UserError(f"prune: configuration [{t.label or 'the only one'}] {t.id[:SHOWN_CHARS]} has {len(live)} "
                            f"cells being trained now (claimed by pid {owner.get('pid')} on {owner.get('host')}): "
                            f"nothing was removed; prune it once that process has finished or been stopped")
    shared = {id(r) for c in kept for r in rows_of(c)}
    gone_rows = [r for r in {id(r): r for t in targets for r in rows_of(t)}.values() if id(r) not in shared]
    models = run.models()
    stores = {(m, rid): path for m, rid, path in run.rank_stores()}
    gone_ranks = sorted({r for t in targets for r in _uses(t)[1] if r not in used_ranks and r in stores})
    gone_models = sorted({_uses(t)[0] for t in targets} - used_models - {None} & set(models))
    verb = "would remove" if dry_run else "removed"
    lines = [f"prune: {verb} configuration [{t.label or 'the only one'}] {t.id[:SHOWN_CHARS]}" for t in targets]
    lines += [f"prune: {verb} the damaged configuration record {name}" for name in broken]
    lines.append(f"prune: {verb} {len(gone_rows)} rows (cells no other configuration shares)")
    lines += [f"prune: {verb} the ranks of {m} {rid[:SHOWN_CHARS]} ({_mib(_size(stores[(m, rid)]))})"
              for m, rid in gone_ranks]
    lines += [f"prune: {verb} base model {mid[:SHOWN_CHARS]} ({_mib(_size(models[mid]))})" for mid in gone_models]
    if not dry_run:
        try:
            carry_out(run, intent([t.id for t in targets if t.record is not None], broken, gone_ranks, gone_models,
                                  gone_rows, head=any(t.id == head.configuration for t in targets)))
        except BaseException:
            forget(run)  # interrupted here: the next writer in this process finishes it, as a new process would
            raise
    lines.append("prune: kept everything a kept configuration or HEAD uses"
                 + (" (--dry-run: nothing was removed)" if dry_run else ""))
    return lines


def _unused(artifact: dict) -> str:
    """The mark of a line of what no configuration uses: * for the latest request's (as a configuration's)."""
    return "* " if artifact.get("head") else "  "


def _yet(artifact: dict) -> str:
    return " yet (the latest request's: prune keeps it)" if artifact.get("head") else ""


def _mib(size: int) -> str:
    return f"{size / 2 ** 20:.1f} MiB"


def _when(stamp: str) -> str:
    return stamp[:16].replace("T", " ") if stamp else "-"
