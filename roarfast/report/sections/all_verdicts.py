"""Every verdict as a line, the lines `roarfast report` and `roarfast run` print (roarfast.report.text): what
to know first, then each configuration's verdicts, labelled when the run holds several."""

from roarfast.report.sections import RUN, Lines, register
from roarfast.report.text import verdict_lines


def lines(summary: dict) -> list:
    return [Lines("All verdicts", verdict_lines(summary))]


register("all_verdicts", "every verdict, leaky control of random and ranking as a line", 130, blocks=lines,
         scope=RUN)
