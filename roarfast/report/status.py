"""Whether a configuration's study can answer at all, decided before any verdict is read: it cannot when its
retrained cells did not leave chance (random's least-modified cells, the most a cell learned with nothing
informative removed, at chance: roarfast.stats.at_chance) or when its base model did not (the estimators then
explain a model that learned nothing). Then the study is INCONCLUSIVE, with each reason and the fix (train
longer or on more images, with what the cells would then cost at the times they took); its rankings and
verdicts are not findings, and its mask-only controls cannot show leakage (untestable, never "not leaky").
"""

from roarfast import stats
from roarfast.common.progress import format_duration
from roarfast.modes import MODES

CONCLUSIVE, INCONCLUSIVE = "conclusive", "inconclusive"
#: the fix's epochs when the base model gives no better guide: this many times the cells' epochs
MORE_EPOCHS = 4


def pct(value) -> str:
    return f"{value:.1%}"  # as report.text writes it (which imports the analysis that imports this module)


def cells_at_chance(accs: dict, sizes: dict, chance: float | None, n_test: int | None) -> dict | None:
    """{method, mode, fraction, mean, high} of random's least-modified cells (its group of highest mean: the
    least removed in ROAR, the most kept in KAR) when they are at chance; with no random cells, the best group
    of any estimator's; None when they left chance or chance is unknown. accs, sizes: analysis.accuracies."""
    if chance is None:
        return None
    groups = {k: v for k, v in accs.items() if k[1] in MODES}
    chosen = {k: v for k, v in groups.items() if k[0] == "random"} or groups
    if not chosen:
        return None
    key, by_seed = max(chosen.items(), key=lambda kv: sum(kv[1].values()) / len(kv[1]))
    values = list(by_seed.values())
    recorded = sizes[key]
    n = next(iter(recorded)) if len(recorded) == 1 and None not in recorded else n_test
    if not stats.at_chance(values, chance, n):
        return None
    return {"method": key[0], "mode": key[1], "fraction": key[3], "mean": sum(values) / len(values),
            "high": stats.upper_bound(values, n), "seeds": len(values)}


def base_at_chance(base: dict, chance: float | None, n_test: int | None) -> dict | None:
    """{test_acc, high} of the base model when its test accuracy is at chance (one value: the binomial interval
    over the test split); None when it left chance, or its accuracy or chance is unknown."""
    acc = base.get("test_acc")
    if acc is None or chance is None or not stats.at_chance([acc], chance, n_test):
        return None
    return {"test_acc": acc, "high": stats.upper_bound([acc], n_test)}


def study_status(accs: dict, sizes: dict, context, base: dict, cells: list, cells_epochs) -> dict:
    """{"status": CONCLUSIVE or INCONCLUSIVE, "reasons": [why, in a line each], "fix": [what to do, in a line
    each], "cells_at_chance": cells_at_chance's or None, "base_at_chance": base_at_chance's or None}."""
    chance, n_test = context.chance, context.n_test
    cells_stuck = cells_at_chance(accs, sizes, chance, n_test)
    base_stuck = base_at_chance(base, chance, n_test)
    margin = "" if chance is None else f"chance {pct(chance)} + {stats.LEARNED_MARGIN * 100:g} points"
    reasons, fix = [], []
    if base_stuck:
        reasons.append(f"the base model did not leave chance: test {pct(base_stuck['test_acc'])}, the upper end of its "
                       f"95% interval {pct(base_stuck['high'])} not above {margin}; the estimators explain a model "
                       f"that learned nothing")
        trained = base.get("epochs")
        fix.append("train the base model longer or on more images (`roarfast train --epochs N`, more images "
                   "through the dataset's num_train option)"
                   + (f": it trained {trained} epochs" if trained else "")
                   + "; check that it beats chance clearly before extracting")
    if cells_stuck:
        where = f"{cells_stuck['mode'].upper()} {cells_stuck['fraction']:.0%}"
        who = "random's least-modified cells" if cells_stuck["method"] == "random" else \
            f"the best cells ({cells_stuck['method']})"
        reasons.append(f"the retrained cells did not leave chance: {who} ({where}) reach {pct(cells_stuck['mean'])}, "
                       f"the upper end of their 95% interval {pct(cells_stuck['high'])} not above {margin}; a learner "
                       f"that learned nothing can rank no estimator and show no leakage")
        fix.append(_cells_fix(cells, cells_epochs, base))
    return {"status": INCONCLUSIVE if reasons else CONCLUSIVE, "reasons": reasons, "fix": fix,
            "cells_at_chance": cells_stuck, "base_at_chance": base_stuck}


def _cells_fix(cells: list, epochs, base: dict) -> str:
    """Train the cells longer (to the base model's epochs where it trained more and left chance, else
    MORE_EPOCHS times theirs) or on more images, with what the cells would cost at the seconds they took."""
    base_epochs = base.get("epochs")
    if epochs and base_epochs and base_epochs > epochs:
        target = base_epochs
    else:
        target = MORE_EPOCHS * epochs if epochs else None
    text = ("train the cells longer or on more images (`roarfast sweep --epochs N` sets the cells' epochs; more "
            "images through the dataset's num_train option)")
    if not epochs or target is None:
        return text
    text += f": they trained {epochs} epochs" + (f", the base model {base_epochs}" if base_epochs else "")
    seconds = [c["seconds"] for c in cells if c.get("seconds") is not None]
    if seconds:
        scale = target / epochs
        text += (f"; at --epochs {target} the {len(seconds)} cells would take about "
                 f"{format_duration(sum(seconds) * scale)} of training (the {format_duration(sum(seconds))} "
                 f"they took, x{scale:g})")
    else:
        text += f"; try --epochs {target}"
    return text
