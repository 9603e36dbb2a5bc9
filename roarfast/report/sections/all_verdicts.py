"""Every verdict as a line, the lines `roarfast report` and `roarfast run` print (roarfast.report.text)."""

from roarfast.report.sections import Lines, register
from roarfast.report.text import verdict_lines


def lines(summary: dict) -> list:
    return [Lines("All verdicts", verdict_lines(summary))]


register("all_verdicts", "every verdict, leaky control of random and ranking as a line", 130, blocks=lines)
