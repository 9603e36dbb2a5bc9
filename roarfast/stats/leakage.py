"""The mask-leakage test of a mask-only control (a cell trained and tested on its removal pattern alone): is it
above chance? One-sided, Holm-corrected over the controls of a configuration read together."""

from dataclasses import dataclass

import numpy as np

from roarfast.stats.difference import holm
from roarfast.stats.levels import ALPHA, LEAK_MARGIN

LEAK_T = "one-sided one-sample t-test across seeds (control accuracy > chance)"
LEAK_BINOMIAL = "one-sided exact binomial test of the control's correct test predictions (> chance)"


@dataclass(frozen=True)
class LeakTest:
    """Whether a mask-only control is above chance: its test, one-sided p-value and the decision."""

    test: str
    p: float
    leaky: bool


def leak_test(accuracies, chance: float, n_test: int, alpha: float = ALPHA, margin: float = LEAK_MARGIN) -> LeakTest:
    """Tests control accuracies (one per seed) against chance, one-sided (greater).

    >= 2 seeds with spread: one-sample t-test across seeds. One seed, or no spread: exact binomial test
    of round(mean accuracy x n_test) correct predictions out of n_test against chance. Leaky when
    p < alpha AND the mean beats chance by at least `margin` (a control that learned only the class
    prior is not flagged).
    """
    # late: scipy.stats loads in a second or more, and a dry run imports this module without calling this
    from scipy import stats as sps

    x = np.asarray(accuracies, dtype=np.float64)
    if x.size == 0:
        raise ValueError("leak_test needs at least one accuracy")
    mean = float(x.mean())
    if x.size >= 2 and x.var(ddof=1) > 0:
        test, p = LEAK_T, float(sps.ttest_1samp(x, chance, alternative="greater").pvalue)
    else:
        if n_test < 1:
            raise ValueError(f"n_test must be >= 1 for the binomial test, got {n_test}")
        correct = round(mean * n_test)
        test, p = LEAK_BINOMIAL, float(sps.binomtest(correct, n_test, chance, alternative="greater").pvalue)
    return LeakTest(test, p, bool(p < alpha and mean - chance >= margin))


def leak_decisions(tests: list, chance: float, alpha: float = ALPHA, margin: float = LEAK_MARGIN) -> list:
    """Holm-corrects the leak tests read together: `tests` is [(mean accuracy, LeakTest)], the result
    [(Holm-adjusted p, leaky)] in the same order, leaky when the adjusted p < alpha and the mean beats chance
    by at least `margin`."""
    adjusted = holm([t.p for _mean, t in tests]) if tests else []
    return [(p, bool(p < alpha and mean - chance >= margin)) for (mean, _t), p in zip(tests, adjusted)]
