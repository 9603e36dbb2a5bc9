"""Whether a study may answer at all: only when learning is *shown*. Two learners are judged, the base model
(one accuracy over the test images) and random's least-modified cells (its cell group of highest mean accuracy:
what the retrained cells learn with nothing informative removed; with no random cells, the best group of any
estimator), each by the interval of its accuracy (roarfast.stats.intervals.accuracy_interval) against chance
plus the margin:

- SHOWN when the interval's lower end is above chance + margin;
- AT_CHANCE when its upper end is at or below chance + margin;
- CANNOT_TELL otherwise (the interval straddles it), with the seeds or test images that would decide it.

The study is CONCLUSIVE when every learner judged is SHOWN, INCONCLUSIVE (at chance) when any is AT_CHANCE,
UNDERPOWERED (cannot tell) otherwise. A learner without an interval is not judged (its accuracy unknown, or one
value on a test split of unknown size: rows before the cells recorded it); with none judged, the study cannot tell.
"""

from dataclasses import dataclass

import numpy as np

from roarfast.modes import MODES
from roarfast.stats.intervals import ACCURACY_INTERVAL, accuracy_interval, binomial_interval
from roarfast.stats.levels import MARGIN, PRIOR_SD
from roarfast.stats.power import to_decide

CONCLUSIVE, INCONCLUSIVE, UNDERPOWERED = "conclusive", "inconclusive", "underpowered"
SHOWN, AT_CHANCE, CANNOT_TELL = "shown", "at chance", "cannot tell"
#: the statuses in the words the report's first line uses
STATUS_WORDS = {CONCLUSIVE: "CONCLUSIVE", INCONCLUSIVE: "INCONCLUSIVE", UNDERPOWERED: "UNDERPOWERED"}
RULE = (f"a learner has learned when the lower end of its accuracy's 95% interval ({ACCURACY_INTERVAL}) is above "
        f"chance + margin, is at chance when the upper end is at or below it, and cannot be told otherwise; the study "
        f"is conclusive when the base model and random's least-modified cells have both learned, inconclusive when "
        f"either is at chance, underpowered otherwise")


@dataclass(frozen=True)
class Judgement:
    """One learner judged: its accuracies' mean and interval over `seeds` values on `n_test` images, the
    threshold (chance + margin), the state, and what would decide a CANNOT_TELL ({"seeds", "images"}: None
    where that alone would not; seeds at the prior spread where one value gives none: `prior`)."""

    mean: float
    low: float | None
    high: float | None
    seeds: int
    n_test: int | None
    threshold: float
    state: str
    needs: dict | None = None
    prior: bool = False

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def judge(values, n_test: int | None, chance: float, margin: float = MARGIN) -> Judgement:
    """The Judgement of a learner's accuracies (one per seed) on n_test test images against chance + margin."""
    interval = accuracy_interval(values, n_test)
    threshold = chance + margin
    if interval.low is not None and interval.low > threshold:
        state = SHOWN
    elif interval.high is not None and interval.high <= threshold:
        state = AT_CHANCE
    else:
        state = CANNOT_TELL
    needs, prior = None, False
    if state == CANNOT_TELL:
        x = np.asarray(values, dtype=np.float64)
        prior = x.size < 2
        needs = to_decide(interval.mean, PRIOR_SD if prior else float(x.std(ddof=1)), int(x.size), n_test, threshold)
    return Judgement(interval.mean, interval.low, interval.high, interval.n, n_test, threshold, state, needs, prior)


def least_modified(cells: list) -> tuple | None:
    """(method, mode, fill, fraction) of random's least-modified cells among `cells` (dicts with method, mode,
    fill, fraction, test_acc: its group of highest mean, the least removed in ROAR, the most kept in KAR); with no
    random cell, the best group of any estimator; None without cells of ROAR or KAR."""
    groups = {}
    for c in cells:
        if c["mode"] in MODES and c.get("test_acc") is not None:
            groups.setdefault((c["method"], c["mode"], c["fill"], c["fraction"]), []).append(c["test_acc"])
    chosen = {k: v for k, v in groups.items() if k[0] == "random"} or groups
    if not chosen:
        return None
    return max(chosen, key=lambda k: sum(chosen[k]) / len(chosen[k]))


def status_of(judgements: list) -> str:
    """CONCLUSIVE, INCONCLUSIVE or UNDERPOWERED from the learners judged (the module's rule)."""
    states = [j.state for j in judgements if j is not None]
    if any(s == AT_CHANCE for s in states):
        return INCONCLUSIVE
    return CONCLUSIVE if states and all(s == SHOWN for s in states) else UNDERPOWERED


def study_learning(cells: list, base_acc: float | None, chance: float | None, n_test: int | None,
                   margin: float = MARGIN) -> dict:
    """{"status", "base": Judgement or None, "cells": Judgement or None, "where": least_modified's key or None} of
    one configuration's cells (dicts with method, mode, fill, fraction, seed, test_acc) and base model, both
    tested on n_test images with chance `chance`: the one rule the report, roarfast.results.load and the sweep
    read."""
    where = least_modified(cells)
    if chance is None:
        return {"status": UNDERPOWERED, "base": None, "cells": None, "where": where}
    base = None if base_acc is None or not n_test else judge([base_acc], n_test, chance, margin)
    judged = None
    if where is not None:
        values = [c["test_acc"] for c in cells if (c["method"], c["mode"], c["fill"], c["fraction"]) == where
                  and c.get("test_acc") is not None]
        judged = judge(values, n_test, chance, margin) if len(values) >= 2 or n_test else None
    return {"status": status_of([base, judged]), "base": base, "cells": judged, "where": where}


def clearly_above_chance(accuracy: float, chance: float, n: int) -> bool:
    """Whether one accuracy over n images has left chance beyond doubt: the lower end of its exact
    (Clopper-Pearson) interval is above chance (the dry run reads a base model's epochs by it)."""
    return binomial_interval(accuracy, n)[0] > chance
