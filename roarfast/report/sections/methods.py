"""Methods: the tests behind the intervals, verdicts, rankings and leakage, how a leaky control's direction
decides what a verdict is worth, which cells are compared, and the warnings' rules."""

from roarfast import stats
from roarfast.report.analysis import NEAR_CHANCE, parts_of
from roarfast.report.sections import RUN, Lines, register
from roarfast.report.sections.run import SHORT_TRAINING_SHARE, WEAK_BASE_SHARE
from roarfast.stats.learning import RULE
from roarfast.stats.sequential import SPENDING


def numbers(loaded, summary: dict) -> dict:
    return {"alpha": stats.ALPHA, "leak_margin": stats.LEAK_MARGIN, "power_level": stats.POWER,
            "prior_sd": stats.PRIOR_SD, "near_chance": NEAR_CHANCE,
            "weak_base_share": WEAK_BASE_SHARE, "short_training_share": SHORT_TRAINING_SHARE,
            "tests": {"interval": stats.T_INTERVAL, "verdict": stats.WELCH, "equivalence": stats.TOST,
                      "effect": stats.EFFECT, "detectable": stats.DETECTABLE, "ranking": stats.AUC_TEXT,
                      "leakage": f"{stats.LEAK_T}; with one seed or no spread: {stats.LEAK_BINOMIAL}; the p-values "
                                 f"Holm-corrected over every control of the configuration (they are read together, "
                                 f"as the verdicts are); leaky when the corrected p < {stats.ALPHA} and the control "
                                 f"beats chance by >= {stats.LEAK_MARGIN:.0%}",
                      "learning": RULE, "sequential": SPENDING,
                      "degenerate": "no spread in both groups: equal means give p = 1, different means p = 0"}}


def lines(summary: dict) -> list:
    tests = summary["tests"]
    margins = sorted({p["margin"] for p in parts_of(summary)})
    margin = " / ".join(f"{stats.points(m)} points" for m in margins)
    return [Lines("Methods", [
        (f"Intervals: {tests['interval']}, shown clipped to [0%, 100%], accuracy's range (over a few seeds near "
         f"either end the t-interval passes it; summary.json keeps the raw bounds)."),
        (f"Verdicts: {tests['verdict']} over the estimators compared at each mode and fraction, alpha "
         f"{summary['alpha']}, decides \"better than random\" or \"worse\" (ROAR: lower accuracy than random is "
         f"better, KAR: higher); else {tests['equivalence']}, margin {margin}, below alpha decides \"no "
         f"different\"; else the verdict is \"undecided\", with the difference the seeds run could detect: "
         f"{tests['detectable']}. Each verdict gives the difference from random with its 95% Welch interval and "
         f"{tests['effect']}. {tests['degenerate']}. With one seed on either side no verdict is drawn. Seeds added "
         f"where a verdict was undecided (`sweep --seeds auto`) are read look by look at nominal levels from "
         f"{tests['sequential']}, which keeps the false-positive rate at alpha."),
        (f"Ranking: {tests['ranking']}, per seed, over every fraction run in that mode (with one fraction: the "
         f"accuracy there); a method lacking one is not ranked."),
        (f"Leakage: {tests['leakage']}. A leaky cell's accuracy partly measures the removal pattern's shape "
         f"rather than the removed information, and the shape can only lift it. So the leak's direction decides "
         f"what a verdict is worth: in ROAR (lower is better) a \"better than random\" was reached despite "
         f"the lift and stands, while the leak could explain a \"no different\" or \"worse\"; in KAR (higher is "
         f"better) the leak could explain a \"better than random\", while \"no different\" or \"worse\" "
         f"stand. A control that could not be tested is counted as untested, never as not leaky."),
        (f"Whether the study can answer, decided first, with margin {margin}: {tests['learning']}. The learners "
         f"are the base model and random's least-modified cells (its group of highest accuracy; with no random "
         f"cells, the best of any estimator). Only a conclusive study's rankings and verdicts are findings, and a "
         f"ranking of fewer than two estimators besides random, or of one seed, never is; where the cells are at "
         f"chance a control not found leaky is untestable: a learner that learned nothing cannot show leakage."),
        (f"Configurations: cells are compared only with cells of their own configuration (everything their "
         f"rows record but the method's own ranks: data, model, recipe, the shared rank settings); a run "
         f"directory holding several reports each apart under its name: the one given with --name (or "
         f"Study(name=...)), else the label it got when it was made (what differs from the configuration "
         f"requested before it), which never changes; its id, its name and every label it was shown with select "
         f"it. Within one configuration only each method's newest ranks count. Warnings: random is near chance when less than "
         f"{100 * summary['near_chance']:g} points above it; the base model is weak when it beats chance by less than "
         f"{summary['weak_base_share']:.0%} of the way to 100%; the gap to the base model is called mostly "
         f"undertraining when the cells train at most {summary['short_training_share']:.0%} of its epochs and "
         f"even random's least-modified cells stay in the lower half between chance and it.")])]


register("methods", "the tests behind the numbers, and how a leak is read", 140, numbers=numbers, blocks=lines,
         scope=RUN)
