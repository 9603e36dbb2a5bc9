"""Seeds as a design decision: from the recorded spread of this model on this data (the seed-to-seed sd of the
earlier cells in results.sqlite, pooled over their cell groups; roarfast.stats.PRIOR_SD where there are none),
the smallest difference from random that the planned seeds detect at 80% power, the seeds a wanted difference
(--detect POINTS) needs, and the design of `sweep --seeds auto` (roarfast.stats.sequential). The dry run prints
`lines`; the sweep takes `auto_design`. What the planned seeds detect is solved once per seed count and kept in the
cache (`detectable`)."""

from dataclasses import dataclass

from roarfast import stats
from roarfast.common.fingerprint import config_hash
from roarfast.data import cache
from roarfast.modes import MODES
from roarfast.results import RETRAIN, open_results
from roarfast.stats.power import LEAST_SEEDS
from roarfast.stats.sequential import FIRST_LOOK, Design

#: --max-seeds's default: the most seeds per cell `--seeds auto` adds up to
MAX_SEEDS = 10
#: the cache's kind (roarfast.data.cache) of the solved effect sizes
KIND = "detectable"


@dataclass(frozen=True)
class Spread:
    """The seed-to-seed sd a plan reads: `sd`, from `groups` cell groups of `cells` cells (0: the prior)."""

    sd: float
    groups: int = 0
    cells: int = 0

    def describe(self) -> str:
        if not self.groups:
            return (f"sd {stats.points(self.sd)} points, the stated prior: results.sqlite holds no earlier cells of "
                    f"this model on this data")
        return (f"sd {stats.points(self.sd)} points, pooled over {self.groups} cell groups ({self.cells} cells) of "
                f"this model on this data in results.sqlite")


def recorded_spread(run, model: str, fingerprint: str | None) -> Spread:
    """The seed-to-seed spread of the ROAR/KAR cells of `model` on the data of `fingerprint` that results.sqlite
    holds (groups of one method, mode, fill, fraction and recipe, >= 2 seeds), else the prior."""
    groups = {}
    if fingerprint and run.results_path.exists():
        with open_results(run, readonly=True) as db:
            rows = db.rows(kind=RETRAIN, status="done")
        for r in rows:
            config = r.get("config") or {}
            if r["mode"] in MODES and r["model"] == model and config.get("dataset") == fingerprint:
                key = (r["method"], r["mode"], r["fill"], r["fraction"], str(config.get("recipe")),
                       config.get("rank_id"))
                groups.setdefault(key, []).append(r["test_acc"])
    used = [g for g in groups.values() if len(g) >= LEAST_SEEDS]
    sd = stats.pooled_sd(used)
    return Spread(sd, len(used), sum(map(len, used))) if sd is not None else Spread(stats.PRIOR_SD)


def detectable(sd: float, seeds: int) -> float:
    """stats.detectable(sd, seeds): the effect size (Cohen's d) that `seeds` per arm detect at the stated alpha and
    power, solved once and kept in the cache (statsmodels, which solves it, loads pandas: a second or more on every
    dry run otherwise), times `sd`."""
    where = config_hash({"seeds": seeds, "alpha": stats.ALPHA, "power": stats.POWER})
    kept = cache.read(KIND, where)
    if kept is None:
        kept = {"effect": stats.detectable(1.0, seeds)}
        cache.write(KIND, where, kept)
    return kept["effect"] * sd


def lines(spread: Spread, seeds: int | str, detect: float | None, max_seeds: int | None) -> list[str]:
    """What the dry run says of the seeds planned: what `seeds` (an int, or "auto" with its design) detect at 80%
    power, and what --detect needs."""
    out = []
    if seeds == "auto":
        design = auto_design(spread, detect, max_seeds)
        out.append(f"seeds auto: looks at {', '.join(map(str, design.looks))} seeds per cell, seeds added only where a "
                   f"verdict is undecided, each look at its O'Brien-Fleming nominal level (levels "
                   f"{', '.join(f'{p:.2g}' for p in design.levels)}: alpha {stats.ALPHA} overall); at most "
                   f"{design.looks[-1]} seeds detect {stats.points(detectable(spread.sd, design.looks[-1]))} "
                   f"points with 80% power ({spread.describe()})")
    elif seeds >= LEAST_SEEDS:
        out.append(f"seeds {seeds}: detect a difference from random of "
                   f"{stats.points(detectable(spread.sd, seeds))} points with 80% power at alpha {stats.ALPHA} "
                   f"({spread.describe()})")
    else:
        out.append(f"seeds {seeds}: no verdict against random can be drawn (a t-test needs {LEAST_SEEDS} seeds)")
    if detect is not None:
        needed = stats.seeds_needed(detect, spread.sd)
        out.append(f"--detect {stats.points(detect)}: " + (f"{needed} seeds per cell detect it with 80% power"
                                                            if needed else "more than 1,000 seeds per cell"))
    return out


def auto_design(spread: Spread, detect: float | None, max_seeds: int | None) -> Design:
    """The design of `--seeds auto`: looks from FIRST_LOOK up to the seeds --detect needs at this spread (at
    least the first look), capped by --max-seeds (MAX_SEEDS by default)."""
    most = max_seeds or MAX_SEEDS
    if detect is not None:
        needed = stats.seeds_needed(detect, spread.sd) or most
        most = min(most, max(needed, FIRST_LOOK))
    return Design.auto(max(most, LEAST_SEEDS))
