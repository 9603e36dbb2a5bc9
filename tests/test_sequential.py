"""`sweep --seeds auto` keeps its stated error rates, shown by simulation: many null studies (an estimator with
random's true mean, normal or binomial noise) run through the very decision function the sweep calls
(roarfast.stats.sequential.replay, which `decide` and roarfast.orchestration.seeds_auto wrap), whose false-positive rate
stays at most alpha; a naive rule that tests after every seed at alpha exceeds it, in the same simulation, so the
test can fail. Also the boundaries against the spending function, and what the sweep's next look asks for."""

import numpy as np
import pytest
from scipy import stats as sps

from roarfast.planning.grid import Grid
from roarfast.orchestration.seeds_auto import _next_look
from roarfast.stats.difference import BETTER_CODE, NO_DIFFERENT_CODE, UNDECIDED_CODE, WORSE_CODE
from roarfast.stats.levels import ALPHA
from roarfast.stats.sequential import Design, boundaries, decide, replay, spent, undecided

STUDIES = 10_000
#: three Monte Carlo standard errors of a rate near alpha over STUDIES studies
TOLERANCE = 3 * (ALPHA * (1 - ALPHA) / STUDIES) ** 0.5
DESIGN = Design.auto(10)  # looks at 3, 5, 7, 9, 10 seeds
NAIVE = tuple(range(2, 11))  # a test after every seed from the second on


def positives(result: dict) -> float:
    """The share of studies in which any estimator was called better or worse than random."""
    code = result["code"]
    return float(((code == BETTER_CODE) | (code == WORSE_CODE)).any(-1).mean())


def null_studies(rng, noise: str, shift: float = 0.0, estimators: int = 1, seeds: int = 10):
    """(estimators (S, m, seeds), random (S, seeds)) accuracies: normal (sd 3 points) or binomial (1,000 test
    images) noise, the estimators' true mean random's + shift."""
    if noise == "normal":
        return (rng.normal(0.5 + shift, 0.03, (STUDIES, estimators, seeds)), rng.normal(0.5, 0.03, (STUDIES, seeds)))
    return (rng.binomial(1000, 0.7 + shift, (STUDIES, estimators, seeds)) / 1000,
            rng.binomial(1000, 0.7, (STUDIES, seeds)) / 1000)


@pytest.mark.parametrize("noise", ["normal", "binomial"])
def test_the_sequential_rule_keeps_the_false_positive_rate_and_testing_after_every_seed_does_not(noise):
    rng = np.random.default_rng(7)
    estimators, random = null_studies(rng, noise)
    # a margin too small to stop any study for equivalence: every study runs to the end unless it rejects
    kept = positives(replay(estimators, random, DESIGN.looks, DESIGN.levels, DESIGN.equivalence_levels, True, 1e-4))
    naive = positives(replay(estimators, random, NAIVE, [ALPHA] * len(NAIVE), [ALPHA] * len(NAIVE), True, 1e-4))
    assert kept <= ALPHA + TOLERANCE
    assert naive > ALPHA + 0.04  # 0.16 with normal noise: three times the rate stated
    assert kept > ALPHA / 2  # the design spends its alpha: not a rule that never rejects


def test_equivalence_is_declared_falsely_at_most_at_alpha_at_the_margin():
    # the true difference sits on the margin (5 points): "no different" there is a false equivalence
    rng = np.random.default_rng(8)
    estimators, random = null_studies(rng, "normal", shift=0.05)
    sequential = replay(estimators, random, DESIGN.looks, DESIGN.levels, DESIGN.equivalence_levels, True, 0.05)
    naive = replay(estimators, random, NAIVE, [ALPHA] * len(NAIVE), [ALPHA] * len(NAIVE), True, 0.05)
    assert (sequential["code"] == NO_DIFFERENT_CODE).mean() <= ALPHA + TOLERANCE
    assert (naive["code"] == NO_DIFFERENT_CODE).mean() > ALPHA + 0.03


@pytest.mark.slow
def test_several_estimators_read_together_keep_the_familywise_rate():
    rng = np.random.default_rng(9)
    for margin in (1e-4, 0.05):  # equivalence stops too: an estimator found no different stays in Holm's family
        estimators, random = null_studies(rng, "normal", estimators=3)
        assert positives(replay(estimators, random, DESIGN.looks, DESIGN.levels, DESIGN.equivalence_levels, True,
                                margin)) <= ALPHA + TOLERANCE


def test_the_boundaries_spend_alpha_as_the_spending_function_says():
    # one look: the fixed design's 1.96; the first look of several: the spending function's own quantile
    assert boundaries((1.0,), ALPHA)[0] == pytest.approx(sps.norm.isf(ALPHA / 2), abs=2e-3)
    first = boundaries((0.5, 1.0), ALPHA)[0]
    assert first == pytest.approx(sps.norm.isf(spent(0.5, ALPHA) / 2), abs=1e-3)
    # the crossing probabilities of two looks add up to alpha: P(|Z1| >= c1 or |Z2| >= c2), corr(Z1, Z2) = sqrt(1/2)
    c1, c2 = boundaries((0.5, 1.0), ALPHA)
    inside = sps.multivariate_normal([0, 0], [[1, 0.5 ** 0.5], [0.5 ** 0.5, 1]]).cdf(
        [c1, c2], lower_limit=[-c1, -c2], rng=np.random.default_rng(0))
    assert 1 - inside == pytest.approx(ALPHA, abs=1e-3)
    assert DESIGN.looks == (3, 5, 7, 9, 10) and list(DESIGN.levels) == sorted(DESIGN.levels)


def test_a_fixed_design_is_the_one_look_case_at_alpha():
    fixed = Design((4,))
    assert fixed.levels[0] == pytest.approx(ALPHA, abs=1e-3)
    assert fixed.equivalence_levels[0] == pytest.approx(ALPHA, abs=1e-3)  # TOST's one-sided tests at alpha


def test_a_study_stops_where_decided_and_the_next_look_asks_only_for_the_undecided():
    # oracle far below random (ROAR: better), grad on random's level with a spread too wide to decide
    design = Design((3, 5))
    grid = Grid(methods="oracle,grad", modes=("roar",), fractions=(0.5,), seeds=3, control=True, control_seeds=1)
    accs = {"random": [0.80, 0.82, 0.81], "oracle": [0.10, 0.11, 0.12], "grad": [0.60, 0.95, 0.75]}
    cells = [{"method": m, "mode": "roar", "fill": grid.fill, "fraction": 0.5, "seed": s, "test_acc": a}
             for m, values in accs.items() for s, a in enumerate(values)]
    result = decide([accs["oracle"] + [np.nan] * 2, accs["grad"] + [np.nan] * 2], accs["random"] + [np.nan] * 2,
                    design, lower_is_better=True)
    assert list(result["code"]) == [BETTER_CODE, UNDECIDED_CODE] and list(undecided(result, design)) == [False, True]
    (asked,) = _next_look(cells, grid, design, 1, 0.05)
    assert asked["methods"] == ["random", "grad"] and asked["seeds"] == [3, 4] and asked["control_seeds"] == []


def test_the_report_reads_a_sequential_study_look_by_look_as_the_sweep_did():
    from roarfast.report.analysis import verdicts_against_random

    design = Design((3, 5))
    place = ("roar", "dataset-mean", 0.5)
    accs = {("random", *place): dict(enumerate([0.80, 0.82, 0.81, 0.79, 0.83])),
            ("oracle", *place): dict(enumerate([0.10, 0.11, 0.12])),  # decided at look 1: no more seeds
            ("grad", *place): dict(enumerate([0.60, 0.95, 0.75, 0.90, 0.70]))}
    entries = {e["method"]: e for e in verdicts_against_random(accs, [], 0.1, 0.05, design)}
    oracle, grad = entries["oracle"], entries["grad"]
    assert (oracle["verdict"], oracle["look"], oracle["level"]) == ("better than random", 1, design.levels[0])
    assert (grad["verdict"], grad["look"], grad["level"]) == ("undecided", 2, design.levels[1])
    # grad read on its 5 seeds against random's 5, at look 2's level
    assert grad["p"] == pytest.approx(sps.ttest_ind([0.60, 0.95, 0.75, 0.90, 0.70], [0.80, 0.82, 0.81, 0.79, 0.83],
                                                    equal_var=False).pvalue)
    assert oracle["n"] == 3 and oracle["diff"] == pytest.approx(0.11 - 0.81)  # random's first 3 seeds
