"""The benchmark's statistics against hand-worked values and scipy called directly: intervals, tests,
Holm, AUC, the mask-leakage test, means over seeds, estimator scores and the Kendall tau between rankings."""

import math

import numpy as np
import pytest
from scipy import stats as sps

from statsmodels.stats.multitest import multipletests
from statsmodels.stats.weightstats import ttost_ind

from roarfast import stats
from roarfast.stats.difference import VERDICTS, classify
from roarfast.stats.intervals import accuracy_bounds
from roarfast.stats.learning import AT_CHANCE, CANNOT_TELL, SHOWN, judge
from roarfast.stats.levels import ALPHA
from roarfast.stats.power import detectable_welch


def test_t_interval_by_hand():
    # mean 2, sd 1, n 3: half width = t(0.975, 2) * 1 / sqrt(3) = 4.302653 / 1.732051 = 2.484138
    interval = stats.t_interval([1.0, 2.0, 3.0])
    assert interval.mean == 2.0 and interval.n == 3
    assert interval.low == pytest.approx(2.0 - 2.484138, abs=1e-6)
    assert interval.high == pytest.approx(2.0 + 2.484138, abs=1e-6)


def test_t_interval_of_one_value_has_no_bounds():
    interval = stats.t_interval([0.7])
    assert (interval.mean, interval.low, interval.high, interval.n) == (0.7, None, None, 1)


def test_welch_by_hand_and_against_scipy():
    a, b = [0.80, 0.82, 0.84], [0.50, 0.55, 0.60]
    # var_a = 0.0004, var_b = 0.0025; se^2 = (0.0004 + 0.0025) / 3; t = 0.27 / se
    se2 = (0.0004 + 0.0025) / 3
    t = 0.27 / math.sqrt(se2)
    df = se2 ** 2 / ((0.0004 / 3) ** 2 / 2 + (0.0025 / 3) ** 2 / 2)
    expected = 2 * sps.t.sf(t, df)
    assert stats.welch_p(a, b) == pytest.approx(expected, rel=1e-9)
    assert stats.welch_p(a, b) == pytest.approx(sps.ttest_ind(a, b, equal_var=False).pvalue, rel=1e-9)
    # one group without spread: df = n_b - 1 and the test still runs
    c = [0.5, 0.5, 0.5]
    assert stats.welch_p(c, b) == pytest.approx(2 * sps.t.sf(abs(0.5 - 0.55) / math.sqrt(0.0025 / 3), 2), rel=1e-9)


def test_welch_degenerate_cases_are_decided():
    assert stats.welch_p([0.5, 0.5, 0.5], [0.5, 0.5]) == 1.0
    assert stats.welch_p([0.1, 0.1], [0.9, 0.9, 0.9]) == 0.0
    with pytest.raises(ValueError, match=">= 2 values"):
        stats.welch_p([0.5], [0.4, 0.6])


def test_holm_on_a_known_vector():
    # sorted 0.01, 0.02, 0.03, 0.04 times 4, 3, 2, 1 -> 0.04, 0.06, 0.06, 0.04 -> running max 0.04 0.06 0.06 0.06
    assert stats.holm([0.03, 0.01, 0.04, 0.02]) == pytest.approx([0.06, 0.04, 0.06, 0.06])
    assert stats.holm([0.5, 0.6]) == pytest.approx([1.0, 1.0])  # capped at 1
    assert stats.holm([]) == []


def test_verdict_direction_per_mode_and_what_decides_it():
    # (diff, Holm p of the difference, Holm p of TOST): a difference decides first, then equivalence
    codes = classify([-0.5, 0.1, 0.1, -0.5, 0.01], [0.01, 0.01, 0.01, 0.2, 0.3], [1, 1, 1, 0.01, 0.2],
                     ALPHA, ALPHA, lower_is_better=True)
    assert [VERDICTS[c] for c in codes] == ["better than random", "worse", "worse", "no different", "undecided"]
    assert VERDICTS[classify(0.1, 0.01, 1, ALPHA, ALPHA, lower_is_better=False)] == "better than random"


def test_tost_is_two_one_sided_welch_tests_as_statsmodels_computes_them():
    a, b = [0.80, 0.82, 0.84, 0.81], [0.79, 0.80, 0.85, 0.83, 0.82]
    p_low = sps.ttest_ind(np.add(b, 0.05), a, equal_var=False, alternative="greater").pvalue
    p_high = sps.ttest_ind(np.subtract(b, 0.05), a, equal_var=False, alternative="less").pvalue
    assert stats.tost_p(a, b, 0.05) == pytest.approx(max(p_low, p_high), rel=1e-9)
    assert stats.tost_p(a, b, 0.05) == pytest.approx(ttost_ind(b, a, -0.05, 0.05, usevar="unequal")[0], rel=1e-9)
    assert stats.tost_p(a, b, 0.05) < 0.05 < stats.tost_p(a, b, 0.02)  # equivalent within 5 points, not 2
    assert stats.tost_p([0.5, 0.5], [0.52, 0.52], 0.05) == 0.0 and stats.tost_p([0.5, 0.5], [0.6, 0.6], 0.05) == 1.0


def test_holm_over_many_studies_is_statsmodels_holm_with_untested_left_out():
    rng = np.random.default_rng(3)
    p = rng.uniform(0, 0.2, (50, 4))
    p[::3, 1] = np.nan  # not tested in these studies: out of m
    adjusted = stats.holm(p)
    for row, out in zip(p, adjusted):
        tested = np.isfinite(row)
        assert out[tested] == pytest.approx(multipletests(row[tested], method="holm")[1])
        assert np.isnan(out[~tested]).all()


def test_hedges_g_and_the_welch_interval_by_hand():
    a, b = [0.80, 0.82, 0.84], [0.50, 0.55, 0.60]
    pooled = math.sqrt((0.0004 * 2 + 0.0025 * 2) / 4)
    assert stats.hedges_g(a, b) == pytest.approx((0.55 - 0.82) / pooled * (1 - 3 / (4 * 6 - 9)))
    assert stats.hedges_g([0.5, 0.5], [0.6, 0.6]) is None
    se = math.sqrt((0.0004 + 0.0025) / 3)
    df = se ** 4 / ((0.0004 / 3) ** 2 / 2 + (0.0025 / 3) ** 2 / 2)
    interval = stats.welch_interval(a, b)
    assert interval.high - interval.mean == pytest.approx(sps.t.ppf(0.975, df) * se)


def test_the_detectable_difference_has_80_percent_power_by_the_noncentral_t():
    sd, n = 0.03, 5
    d = stats.detectable(sd, n) / sd
    df, crit = 2 * n - 2, sps.t.ppf(0.975, 2 * n - 2)
    noncentral = d * math.sqrt(n / 2)
    power = sps.nct.sf(crit, df, noncentral) + sps.nct.cdf(-crit, df, noncentral)
    assert power == pytest.approx(0.8, abs=1e-3)
    # a verdict's: Welch's test at its own standard error and degrees of freedom
    se, df_welch = 0.012, 3.4
    found = detectable_welch(se, df_welch)
    crit = sps.t.ppf(0.975, df_welch)
    assert sps.nct.sf(crit, df_welch, found / se) + sps.nct.cdf(-crit, df_welch, found / se) == pytest.approx(0.8)
    assert detectable_welch(se, 50) < found  # more degrees of freedom, less to detect
    needed = stats.seeds_needed(0.05, sd)  # the fewest seeds that detect 5 points at sd 3
    assert stats.detectable(sd, needed) <= 0.05 < stats.detectable(sd, needed - 1)


def test_a_learners_interval_is_exact_for_one_value_and_adds_the_test_splits_error_over_seeds():
    exact = sps.binomtest(248, 2000).proportion_ci(0.95, method="exact")
    one = stats.accuracy_interval([0.124], 2000)
    assert (one.low, one.high) == (pytest.approx(exact.low), pytest.approx(exact.high))
    values = [0.60, 0.62, 0.64]
    many = stats.accuracy_interval(values, 500)
    variance = np.var(values, ddof=1) / 3 + 0.62 * 0.38 / 500
    df = variance ** 2 / ((np.var(values, ddof=1) / 3) ** 2 / 2)
    assert many.high - many.mean == pytest.approx(sps.t.ppf(0.975, df) * math.sqrt(variance))
    same = stats.accuracy_interval([0.1, 0.1, 0.1], 500)  # no spread: the test split's error remains, whole
    wald = sps.norm.ppf(0.975) * math.sqrt(0.1 * 0.9 / 500)
    exact_low, exact_high = stats.binomial_interval(0.1, 500)
    assert (same.low, same.high) == pytest.approx((min(exact_low, 0.1 - wald), max(exact_high, 0.1 + wald)))


@pytest.mark.parametrize("correct,n", [(0, 1), (1, 1), (0, 500), (500, 500), (1, 500), (499, 500), (248, 2000),
                                       (3, 7), (9_999, 20_000)])
def test_the_binomial_interval_is_scipys_exact_one(correct, n):
    exact = sps.binomtest(correct, n).proportion_ci(0.95, method="exact")  # found by root search in scipy.stats
    assert stats.binomial_interval(correct / n, n) == (pytest.approx(exact.low, abs=1e-9),
                                                       pytest.approx(exact.high, abs=1e-9))


def test_learning_is_shown_at_chance_or_cannot_be_told_with_what_would_decide_it():
    assert judge([0.9], 500, 0.1).state == SHOWN
    assert judge([0.1], 500, 0.1).state == AT_CHANCE  # the upper end 12.8% <= 15%
    doubt = judge([0.1], 100, 0.1)  # 100 images: the upper end 17.6%
    assert doubt.state == CANNOT_TELL and doubt.prior  # one value: its seeds at the prior spread
    images = doubt.needs["images"]
    assert accuracy_bounds(0.1, None, 1, images)[1] <= 0.15 < accuracy_bounds(0.1, None, 1, images - 1)[1]
    spread = judge([0.12, 0.30], 1000, 0.1)  # 21% +- a wide t-interval over 2 seeds
    seeds = spread.needs["seeds"]
    sd = float(np.std([0.12, 0.30], ddof=1))
    assert spread.state == CANNOT_TELL
    assert accuracy_bounds(0.21, sd, seeds, 1000)[0] > 0.15 >= accuracy_bounds(0.21, sd, seeds - 1, 1000)[0]
    # 12.7% over 2 close seeds on 500 images: more seeds leave the test split's error, more images the t of 1 df
    both = judge([0.1234, 0.1306], 500, 0.1)
    assert both.needs["seeds"] is None and both.needs["images"] is None
    seeds, images = both.needs["both"]
    sd = float(np.std([0.1234, 0.1306], ddof=1))
    assert accuracy_bounds(0.127, sd, seeds, images)[1] <= 0.15 < accuracy_bounds(0.127, sd, seeds, images - 1)[1]


def test_auc_trapezoid_by_hand():
    # (0.1..0.5: (0.9 + 0.5)/2 * 0.4 = 0.28) + (0.5..0.9: (0.5 + 0.3)/2 * 0.4 = 0.16) = 0.44 over span 0.8
    assert stats.curve_auc([0.9, 0.1, 0.5], [0.3, 0.9, 0.5]) == pytest.approx(0.55)
    assert stats.curve_auc([0.1, 0.9], [0.4, 0.4]) == pytest.approx(0.4)
    assert stats.curve_auc([0.5], [0.7]) == 0.7
    area = np.trapezoid([0.9, 0.5, 0.3], [0.1, 0.5, 0.9])
    assert stats.curve_auc([0.1, 0.5, 0.9], [0.9, 0.5, 0.3]) == pytest.approx(area / 0.8)


def test_leak_t_test_across_seeds():
    values = [0.40, 0.45, 0.50]
    result = stats.leak_test(values, chance=0.1, n_test=200)
    assert result.test == stats.LEAK_T and result.leaky
    assert result.p == pytest.approx(sps.ttest_1samp(values, 0.1, alternative="greater").pvalue)
    at_chance = stats.leak_test([0.09, 0.11, 0.10], chance=0.1, n_test=200)
    assert not at_chance.leaky and at_chance.p > 0.05


def test_leak_binomial_with_one_seed_and_the_practical_margin():
    # 30 of 200 right at chance 0.1: P(X >= 30), X ~ Bin(200, 0.1), is small, and 15% beats chance by 5 points
    result = stats.leak_test([0.15], chance=0.1, n_test=200)
    assert result.test == stats.LEAK_BINOMIAL
    assert result.p == pytest.approx(sps.binom.sf(29, 200, 0.1))
    assert result.leaky
    # 11.5% of 10,000 is significant (p ~ 1e-6) but within the 2-point margin: the class prior, not leakage
    prior = stats.leak_test([0.115, 0.115], chance=0.1, n_test=10_000)
    assert prior.test == stats.LEAK_BINOMIAL and prior.p < 1e-4 and not prior.leaky


def test_kendall_tau_hand_worked():
    a = {"x": 1.0, "y": 2.0, "z": 3.0}
    assert stats.kendall_tau(a, a) == 1.0
    assert stats.kendall_tau(a, {"x": 3.0, "y": 2.0, "z": 1.0}) == -1.0
    # pairs (x,y) concordant, (x,z) concordant, (y,z) discordant: (2 - 1) / 3
    assert stats.kendall_tau(a, {"x": 0.0, "y": 2.0, "z": 1.0}) == pytest.approx(1 / 3)
    # a tie in b: tau-b = (2 - 0) / sqrt(3 * 2)
    assert stats.kendall_tau(a, {"x": 0.0, "y": 1.0, "z": 1.0}) == pytest.approx(2 / math.sqrt(6))
    assert math.isnan(stats.kendall_tau({"x": 1.0}, {"x": 2.0}))


def row(method, mode, fraction, acc):
    return {"method": method, "mode": mode, "fraction": fraction, "test_acc": acc, "status": "done"}


def test_estimator_scores_and_agreement_from_rows():
    rows = [row("oracle", "roar", 0.5, 0.1), row("random", "roar", 0.5, 0.8), row("grad", "roar", 0.5, 0.5),
            row("oracle", "morf", 0.3, 0.2), row("oracle", "morf", 0.7, 0.0), row("random", "morf", 0.5, 0.9),
            row("grad", "morf", 0.5, 0.95),
            row("oracle", "road-lerf", 0.5, 0.9), row("oracle", "road-morf", 0.5, 0.2),
            row("random", "road-lerf", 0.5, 0.6), row("random", "road-morf", 0.5, 0.6),
            row("grad", "road-lerf", 0.5, 0.7), row("grad", "road-morf", 0.5, 0.5)]
    scores = stats.estimator_scores(rows)
    assert scores["morf"] == {"oracle": -0.1, "random": -0.9, "grad": -0.95}
    assert scores["road"] == pytest.approx({"oracle": 0.7, "random": 0.0, "grad": 0.2})
    assert set(scores) == {"roar", "morf", "road"}
    tau = stats.rank_agreement(rows)
    assert set(tau) == {("roar", "morf"), ("roar", "road"), ("morf", "road")}
    assert tau[("roar", "road")] == 1.0  # oracle > grad > random in both
    assert tau[("roar", "morf")] == pytest.approx(1 / 3)  # morf: oracle > random > grad


def test_accuracy_over_seeds_by_hand():
    rows = [{"method": "a", "mode": "roar", "fraction": 0.5, "test_acc": acc} for acc in (0.2, 0.4, 0.9)]
    rows.append({"method": "a", "mode": "kar", "fraction": 0.5, "test_acc": 0.7})
    summary = stats.accuracy_over_seeds(rows)
    mean, std, n = summary[("a", "roar", 0.5)]
    # population std of 0.2, 0.4, 0.9 around 0.5: sqrt((0.09 + 0.01 + 0.16) / 3)
    assert (mean, n) == (pytest.approx(0.5), 3) and std == pytest.approx(math.sqrt(0.26 / 3))
    assert summary[("a", "kar", 0.5)] == (0.7, 0.0, 1)
