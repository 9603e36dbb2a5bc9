"""Methods: the tests behind the intervals, verdicts, rankings and leakage, and how a leaky control's
direction decides what a verdict is worth."""

from roarfast import stats
from roarfast.report.sections import Lines, register


def numbers(loaded, summary: dict) -> dict:
    return {"alpha": stats.ALPHA, "leak_margin": stats.LEAK_MARGIN,
            "tests": {"interval": stats.T_INTERVAL, "verdict": stats.WELCH, "ranking": stats.AUC_TEXT,
                      "leakage": f"{stats.LEAK_T}; with one seed or no spread: {stats.LEAK_BINOMIAL}; leaky when "
                                 f"p < {stats.ALPHA} and the control beats chance by >= {stats.LEAK_MARGIN:.0%}",
                      "degenerate": "no spread in both groups: equal means give p = 1, different means p = 0"}}


def lines(summary: dict) -> list:
    tests = summary["tests"]
    return [Lines("Methods", [
        (f"Intervals: {tests['interval']}, shown clipped to [0%, 100%], accuracy's range (over a few seeds near "
         f"either end the t-interval passes it; summary.json keeps the raw bounds)."),
        (f"Verdicts: {tests['verdict']} over the estimators compared at each mode and fraction, alpha "
         f"{summary['alpha']}; ROAR: lower accuracy than random is better, KAR: higher. {tests['degenerate']}. "
         f"With one seed on either side no verdict is drawn."),
        (f"Ranking: {tests['ranking']}, per seed, over every fraction run in that mode (with one fraction: the "
         f"accuracy there); a method lacking one is not ranked."),
        (f"Leakage: {tests['leakage']}. A leaky cell's accuracy partly measures the removal pattern's shape "
         f"rather than the removed information, and the shape can only lift it. So the leak's direction decides "
         f"what a verdict is worth: in ROAR (lower is better) a \"better than random\" was reached despite "
         f"the lift and stands, while \"no different\" or \"worse\" may be the lift's doing and is "
         f"inconclusive; in KAR (higher is better) a \"better than random\" may be the lift's doing and is "
         f"inconclusive, while \"no different\" or \"worse\" stand. A control that could not be tested is "
         f"counted as untested, never as not leaky.")])]


register("methods", "the tests behind the numbers, and how a leak is read", 140, numbers=numbers, blocks=lines)
