"""What a study decided, in the words a paper prints: a configuration's status (whether its study may answer at
all) with its reasons, and the rules behind its status and its verdicts. The tables' notes, the methods paragraph
and the figure captions say them through here.

The one seam to the decision rules: they are decided by roarfast.report.status (the status) and roarfast.stats (the
tests), and this module only reads what those put in the summary ("status", "reasons"; the methods section's
"tests", "alpha" and margins: "margin", "<what>_margin"), never restating a rule of its own, so a new status or a new test shows here as the
summary carries it.
"""

from roarfast.report.analysis import findings
from roarfast.report.status import CONCLUSIVE

#: the summary's "tests" entries the methods paragraph says in this order, each with its lead words; an entry
#: it does not know (a test the rules add) follows them, under its own name
TEST_WORDS = {"interval": "Intervals", "verdict": "Each estimator against random", "ranking": "Rankings",
              "leakage": "Mask-only controls", "at_chance": "Whether a learner left chance",
              "degenerate": "With no spread"}


def status_word(summary: dict) -> str:
    """"CONCLUSIVE", "INCONCLUSIVE", ...: a configuration's status as the tables and captions print it."""
    return str(summary["status"]).upper()


def conclusive(summary: dict) -> bool:
    return summary["status"] == CONCLUSIVE


def status_note(summary: dict) -> str:
    """One sentence (or a few): the status, why where the study cannot answer as it stands, and what that makes
    of its rankings and verdicts."""
    if conclusive(summary):
        return f"Study status: {status_word(summary)}."
    reasons = "; ".join(summary.get("reasons") or [])
    verdicts = "" if findings(summary) else " Its rankings and verdicts are not findings."
    return f"Study status: {status_word(summary)}" + (f": {reasons}." if reasons else ".") + verdicts


def test_sentences(summary: dict) -> list[str]:
    """The tests behind the numbers, a sentence each, from the summary's "tests" (the methods section's): those
    TEST_WORDS names first, in its order, then any other the rules add."""
    tests = summary.get("tests") or {}
    known = [key for key in TEST_WORDS if key in tests]
    return ([f"{TEST_WORDS[key]}: {tests[key]}." for key in known]
            + [f"{key.replace('_', ' ').capitalize()}: {text}." for key, text in tests.items()
               if key not in TEST_WORDS])


#: what each margin the rules state decides, in words (a margin the rules add is named by its key)
MARGIN_WORDS = {"margin": "a learner has left chance only above chance plus, and an estimator is no different from "
                          "random (two one-sided tests) only within,",
                "leak_margin": "a leaky control beats chance by at least"}


def margin_sentences(summary: dict) -> list[str]:
    """A sentence per margin the summary's rules state (its keys "<what>_margin", in accuracy): the learned margin
    (the status), the leak margin, and any the rules add."""
    return [f"{MARGIN_WORDS.get(key, key.replace('_', ' '))} {100 * value:g} points" for key, value in summary.items()
            if (key == "margin" or key.endswith("_margin")) and isinstance(value, (int, float))]
