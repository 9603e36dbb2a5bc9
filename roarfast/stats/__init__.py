"""The statistics of the benchmark (README, "From numbers to a conclusion"; docs/concepts/verdicts.md), plain
numbers in, plain numbers out (no run directory, no model), one module per job:

- .levels: the stated levels (alpha, power, the margin, the prior spread);
- .intervals: means and 95% intervals (t over seeds, Clopper-Pearson over test images, Welch's of a difference,
  a learner's accuracy over both);
- .learning: whether a study shows learning (CONCLUSIVE, INCONCLUSIVE: at chance, UNDERPOWERED: cannot tell);
- .difference: an estimator against random (Welch, TOST, Holm, Hedges' g, the verdict);
- .power: what the seeds run detect, what a wanted difference or a learner's doubt needs;
- .sequential: seeds added in stages where a verdict is undecided, at the stated error rates;
- .leakage: the mask-leakage test of a mask-only control;
- .rankings: the area under a curve, estimator scores and the Kendall tau between rankings.

The names most callers read are handed out here.
"""

from roarfast.chance import chance_rate
from roarfast.stats.difference import (BETTER, EFFECT, NO_DIFFERENT, TOST, UNDECIDED, WELCH, WORSE, hedges_g, holm,
                                       tost_p, welch_p)
from roarfast.stats.intervals import (ACCURACY_INTERVAL, T_INTERVAL, Interval, accuracy_interval, binomial_interval,
                                      t_interval, welch_interval)
from roarfast.stats.leakage import LEAK_BINOMIAL, LEAK_T, LeakTest, leak_decisions, leak_test
from roarfast.stats.learning import CONCLUSIVE, INCONCLUSIVE, UNDERPOWERED, study_learning
from roarfast.stats.levels import ALPHA, CONFIDENCE, LEAK_MARGIN, MARGIN, POWER, PRIOR_SD, points
from roarfast.stats.power import DETECTABLE, detectable, pooled_sd, seeds_needed
from roarfast.stats.rankings import (AUC_TEXT, BENCHMARKS, MIN_AGREEMENT_METHODS, accuracy_over_seeds,
                                     agreement_methods, curve_auc, estimator_scores, kendall_tau, rank_agreement)

__all__ = ["ACCURACY_INTERVAL", "ALPHA", "AUC_TEXT", "BENCHMARKS", "BETTER", "CONCLUSIVE", "CONFIDENCE",
           "DETECTABLE", "EFFECT", "INCONCLUSIVE", "Interval", "LEAK_BINOMIAL", "LEAK_MARGIN", "LEAK_T", "LeakTest",
           "MARGIN", "MIN_AGREEMENT_METHODS", "NO_DIFFERENT", "POWER", "PRIOR_SD", "TOST", "T_INTERVAL",
           "UNDECIDED", "UNDERPOWERED", "WELCH", "WORSE", "accuracy_interval", "accuracy_over_seeds",
           "agreement_methods", "binomial_interval", "chance_rate", "curve_auc", "detectable", "estimator_scores",
           "hedges_g", "holm", "kendall_tau", "leak_decisions", "leak_test", "points", "pooled_sd", "rank_agreement",
           "seeds_needed", "study_learning", "t_interval", "tost_p", "welch_interval", "welch_p"]
