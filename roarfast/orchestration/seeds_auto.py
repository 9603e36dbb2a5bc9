"""`roarfast sweep --seeds auto --detect POINTS [--max-seeds N]`: a sweep whose seeds are added in stages only where
a verdict against random is still undecided, by a group-sequential design that keeps the stated error rates
(roarfast.stats.sequential: O'Brien-Fleming alpha spending).

The design is fixed before the first cell trains (roarfast.planning.seeds.auto_design: its most seeds are what
--detect needs at the recorded spread of this model on this data, capped by --max-seeds) and recorded with the
configuration, so the report reads the verdicts look by look as the sweep did. Look 1 runs the whole grid at the
first look's seeds; each later look runs, at each mode and fraction, the next seeds of the estimators still
undecided there and of random. It stops early when nothing is undecided, or when the study is INCONCLUSIVE (its
learners at chance: more seeds cannot make it answer), and says how many trainings that saved against max-seeds
everywhere.
"""

import math
from dataclasses import replace

from roarfast import stats
from roarfast.modes import LOWER_IS_BETTER, MODES
from roarfast.planning.grid import Grid
from roarfast.planning.seeds import auto_design, recorded_spread
from roarfast.results import RETRAIN, open_results
from roarfast.rundir.configurations import claims, configurations, grid_of
from roarfast.rundir.directory import RunDir
from roarfast.orchestration.sweep import run_sweep
from roarfast.stats.sequential import decide, undecided


def run_seeds_auto(run_dir, grid: Grid, *, detect: float | None = None, max_seeds: int | None = None,
                   margin: float | None = None, dry_run: bool = False, echo=print, **sweep) -> dict:
    """The sweep of `grid` (its seeds set by the design's looks) with seeds added where verdicts are undecided;
    `detect`, `margin`: accuracy fractions (None: no target, roarfast.stats.MARGIN); `sweep`: run_sweep's other
    arguments. Returns {"configuration": its id, "design": the Design, "rows": the configuration's done cells,
    "trainings": cells trained in ROAR/KAR, "everywhere": those max-seeds everywhere would take}; a dry run prints
    the first look's plan with the seeds' lines and returns {"plan": ...}."""
    margin = stats.MARGIN if margin is None else margin
    run = RunDir(run_dir)
    spread = recorded_spread(run, _cells_model(run, grid), run.head().dataset and run.head().dataset["fingerprint"])
    design = auto_design(spread, detect, max_seeds)
    reading = {"margin": margin, "design": {**design.to_dict(), "detect": detect, "max_seeds": design.looks[-1]}}
    first = replace(grid, seeds=design.looks[0])
    plan = {"seeds_auto": True, "detect": detect, "max_seeds": max_seeds}
    if dry_run:
        return run_sweep(run_dir, first, dry_run=True, echo=echo, seeds_plan=plan, **sweep)
    echo(f"[sweep] seeds auto: looks at {', '.join(map(str, design.looks))} seeds per cell ({spread.describe()})")
    swept = run_sweep(run_dir, first, reading=reading, echo=echo, **sweep)
    cid = swept["configuration"]
    for k in range(1, len(design.looks)):
        cells, base_acc = _cells(run, cid)
        learned = stats.study_learning(cells, base_acc, _agreed(cells, "test_chance"), _agreed(cells, "test_images"),
                                       margin)
        if learned["status"] == stats.INCONCLUSIVE:
            echo("[sweep] seeds auto: stopped, the study is INCONCLUSIVE (its learners at chance: `roarfast report` "
                 "says why and the fix); more seeds cannot make it answer")
            break
        grids = _next_look(cells, grid, design, k, margin)
        if not grids:
            echo(f"[sweep] seeds auto: every verdict decided at look {k} ({design.looks[k - 1]} seeds)")
            break
        asked = sum(len(g["methods"]) - 1 for g in grids)  # each grid: random and the estimators undecided there
        echo(f"[sweep] seeds auto: look {k + 1} ({design.looks[k]} seeds) for {asked} undecided verdict(s) at "
             f"{len(grids)} mode and fraction(s), with random's")
        run_sweep(run_dir, replace(grid, seeds=design.looks[k]), grids=grids, reading=reading, echo=echo, **sweep)
    cells, _base = _cells(run, cid)
    retrained = [c for c in cells if c["mode"] in MODES]
    everywhere = len({_slot(c) + (c["method"],) for c in retrained}) * design.looks[-1]
    echo(f"[sweep] seeds auto: {len(retrained)} cells trained where max-seeds ({design.looks[-1]}) everywhere would "
         f"train {everywhere}: {everywhere - len(retrained)} saved")
    return {"configuration": cid, "design": design, "rows": cells, "trainings": len(retrained),
            "everywhere": everywhere}


def _cells_model(run, grid: Grid) -> str | None:
    """The name of the model the cells train (the grid's, else HEAD's base model's), as results rows record it."""
    if grid.model is not None:
        return getattr(grid.model, "name", None) or str(grid.model)
    return run.base_meta().get("model")


def _cells(run, cid: str) -> tuple:
    """(the done retraining rows of configuration `cid`, its base model's test accuracy)."""
    record = next(r for r in configurations(run) if r["id"] == cid)
    with open_results(run, readonly=True) as db:
        rows = [r for r in db.rows(kind=RETRAIN, status="done") if claims(record, r)]
    cells = [{**r, **(r.get("extra") or {})} for r in rows]
    return cells, run.model_meta(record["settings"]["config"].get("base")).get("test_acc")


def _agreed(cells: list, key: str):
    values = {c.get(key) for c in cells}
    return values.pop() if len(values) == 1 else None


def _slot(cell: dict) -> tuple:
    return cell["mode"], cell["fill"], round(cell["fraction"], 9)


def _next_look(cells: list, grid: Grid, design, k: int, margin: float) -> list:
    """The grid records of look k+1 (0-based k): at each mode and fraction, the seeds of looks[k-1]..looks[k]-1
    of the estimators undecided at look k and of random (none where every estimator there is decided)."""
    seeds = [grid.first_seed + i for i in range(design.looks[-1])]
    by_slot = {}
    for c in cells:
        if c["mode"] in MODES:
            by_slot.setdefault(_slot(c), {}).setdefault(c["method"], {})[c["seed"]] = c["test_acc"]
    new = list(range(grid.first_seed + design.looks[k - 1], grid.first_seed + design.looks[k]))
    limit = grid.first_seed + (grid.control_seeds or len(seeds))
    controls = [s for s in new if grid.control and s < limit]
    out = []
    for (mode, fill, fraction), methods in sorted(by_slot.items()):
        estimators = [m for m in methods if m != "random"]
        if "random" not in methods or not estimators:
            continue
        table = [[methods[m].get(s, math.nan) for s in seeds] for m in estimators]
        result = decide(table, [methods["random"].get(s, math.nan) for s in seeds], design, LOWER_IS_BETTER[mode],
                        margin)
        left = [m for m, more in zip(estimators, undecided(result, design)) if more]
        if left:
            out.append(grid_of(["random", *left], [mode], [fraction], new, controls, fill))
    return out
