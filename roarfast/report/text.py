"""How the report writes its numbers, written once for every section: percentages, p-values, intervals,
where a cell group sits ("ROAR 50% [road]"), what a ranking orders by, a verdict with what decided it (its
difference, interval, Hedges' g and p-values), its reading beside its mask-only control and beside a random near
chance, and the lines `roarfast report` and `roarfast run` print (also the page's "All verdicts"): what to know
first (whether the study can answer: CONCLUSIVE, or INCONCLUSIVE / UNDERPOWERED with the reasons and fix;
several configurations, what was set aside, warnings, what it could detect), then the verdicts (each marked
"not a finding" in a study that is not CONCLUSIVE), each labelled with its configuration when the run holds
several. `status_line` is one configuration's status in a line, for `compare`.
"""

from roarfast import stats
from roarfast.fills import DEFAULT_FILL
from roarfast.report.analysis import (LEAK_INCONCLUSIVE, LEAK_STANDS, LEAKY_NO_VERDICT, NO_CONTROL, UNTESTED,
                                      findings, parts_of, shown_bounds, untestable)
from roarfast.report.status import CONCLUSIVE
from roarfast.stats.learning import STATUS_WORDS


def pct(value) -> str:
    return "-" if value is None else f"{value:.1%}"


def p_text(value) -> str:
    return "-" if value is None else (f"{value:.2g}" if value >= 1e-4 else f"{value:.1e}")


def interval_text(g: dict) -> str:
    """A mean with its 95% interval as shown (within [0%, 100%]), or "(1 seed)"."""
    if g["low"] is None:
        return f"{pct(g['mean'])} (1 seed)"
    low, high = shown_bounds(g)
    return f"{pct(g['mean'])} [{low:.1%}, {high:.1%}]"


def fill_tag(summary: dict, fill: str | None) -> str:
    """" [road]": the fill, where the run holds another than the default (else "", as for a control's None)."""
    show = fill is not None and (len(summary["fills"]) > 1 or fill != DEFAULT_FILL)
    return f" [{fill}]" if show else ""


def where(summary: dict, mode: str, fill: str | None, fraction: float) -> str:
    """"ROAR 50%" (with the fill when the run holds another than the default)."""
    return f"{mode.upper()} {fraction:.0%}{fill_tag(summary, fill)}"


def title_fill(mode: str, fill) -> str:
    """A table title's mode and fill: "ROAR (fill road)", "ROAR-MASK (mask-only control)"."""
    return f"{mode.upper()} (mask-only control)" if fill is None else f"{mode.upper()} (fill {fill})"


def ranked_by(fractions: list) -> str:
    """What a ranking orders by: the AUC over the fractions run, or with one fraction its accuracy."""
    if len(fractions) == 1:
        return f"accuracy at {fractions[0]:.0%}"
    return f"AUC over {fractions[0]:.0%}-{fractions[-1]:.0%}" if fractions else "AUC"


#: what a verdict's tag says beside its verdict, per leak reading (none for a clean or uncontrolled one)
LEAK_TAG = {LEAK_STANDS: " [stands despite a leaky control]", LEAK_INCONCLUSIVE: " [a leaky control could explain it]"}


def significance(entry: dict) -> str:
    """What decided a drawn verdict, in words: "significant after Holm" (better or worse), "equivalent within +-5
    points after Holm" (no different), "neither significant nor equivalent after Holm" (undecided); "" for none."""
    if entry["p_holm"] is None:
        return ""
    if entry["verdict"] in (stats.BETTER, stats.WORSE):
        return "significant after Holm"
    within = f"within +-{stats.points(entry['margin'])} points"
    return f"equivalent {within} after Holm" if entry["verdict"] == stats.NO_DIFFERENT else \
        f"neither significant nor equivalent {within} after Holm"


def verdict_text(entry: dict) -> str:
    """The verdict with what decided it: "undecided (the study could detect 8.7 points)" (at 80% power, for the
    seeds run), "better than random, significant after Holm"; a verdict not drawn as it is."""
    if entry["p_holm"] is None:
        return entry["verdict"]
    if entry["verdict"] == stats.UNDECIDED:
        could = "any difference" if not entry["detectable"] else f"{stats.points(entry['detectable'])} points"
        return f"undecided (the study could detect {could}; {significance(entry)})"
    return f"{entry['verdict']}, {significance(entry)}"


def difference_text(entry: dict) -> str:
    """"-59.4 points [-70.1, -48.7], g -5.2": an estimator's difference from random, its 95% interval and Hedges'
    g ("" where none was drawn)."""
    if entry.get("diff") is None:
        return ""
    interval = "" if entry["diff_low"] is None else \
        f" [{100 * entry['diff_low']:+.1f}, {100 * entry['diff_high']:+.1f}]"
    g = "" if entry["g"] is None else f", g {entry['g']:+.2f}"
    return f"{100 * entry['diff']:+.1f} points{interval}{g}"


def label_prefix(summary: dict, part: dict) -> str:
    """"[epochs 2] " before what one configuration says, when the run holds several; else ""."""
    return f"[{part['configuration']['label']}] " if len(parts_of(summary)) > 1 else ""


def control_text(summary: dict, entry: dict) -> str:
    """The verdict line's reading of the cell's mask-only control."""
    control, leak = entry["control"], entry["leak"]
    if leak == NO_CONTROL:
        return "no control"
    if leak == UNTESTED and untestable(control):
        return f"control {pct(control['mean'])} untestable (the cells did not leave chance)"
    if leak == UNTESTED:
        return f"control {pct(control['mean'])} (not tested: {control['test'].removeprefix('none: ')})"
    if not control["leaky"]:
        return f"control {pct(control['mean'])}, not leaky (Holm p={p_text(control.get('p_holm'))})"
    text = (f"LEAKY: its mask-only control reaches {pct(control['mean'])} (chance {pct(summary['chance'])}, "
            f"p={p_text(control['p'])}, Holm p={p_text(control.get('p_holm'))}), so the removal pattern's shape "
            f"alone lifts this accuracy")
    if leak == LEAKY_NO_VERDICT:
        return text
    effect = "could explain" if leak == LEAK_INCONCLUSIVE else "works against"
    return f"{text}, which {effect} \"{entry['verdict']}\""


def set_aside_line(entry: dict, several: bool, lead: str = "") -> str:
    """One set-aside entry ({configuration, method, rows, why}): "[label] `lead`N row(s) of METHOD: why", the
    label only when the run has several configurations."""
    label = f"[{entry['configuration']}] " if several else ""
    what = f"{entry['rows']} row(s) of {entry['method']}" if entry["method"] else f"{entry['rows']} row(s)"
    return f"{label}{lead}{what}: {entry['why']}"


#: what marks a ranking or verdict line that is no finding (a study not CONCLUSIVE; a ranking of one method)
NOT_A_FINDING = "[not a finding] "


def not_finding(summary: dict) -> str:
    """What a ranking or verdict table's title starts with when its study is not CONCLUSIVE (report.status)."""
    return "" if findings(summary) else f"NOT A FINDING (the study is {STATUS_WORDS[summary['status']]}): "


def status_line(part: dict) -> str:
    """One configuration's status in a line: "CONCLUSIVE", "UNDERPOWERED: why; ..." (what `compare` shows)."""
    word = STATUS_WORDS[part["status"]]
    return word if part["status"] == CONCLUSIVE else f"{word}: " + "; ".join(part["reasons"])


def status_lines(summary: dict) -> list[str]:
    """The study's first answer, whether it can answer, per configuration (labelled when the run holds several):
    "CONCLUSIVE: learning shown ...", or "INCONCLUSIVE: reason" / "UNDERPOWERED: reason" lines, each "fix: ..."
    and what that makes of its rankings and verdicts."""
    lines = []
    for part in parts_of(summary):
        prefix = label_prefix(summary, part)
        word = STATUS_WORDS[part["status"]]
        lines += [f"{prefix}{word}: {reason}" for reason in part["reasons"]]
        if part["status"] == CONCLUSIVE:
            continue
        lines += [f"{prefix}fix: {fix}" for fix in part["fix"]]
        untestable_controls = any(untestable(c) for c in part["leakage"])
        lines.append(f"{prefix}so its rankings and verdicts below are not findings (each marked "
                     f"{NOT_A_FINDING.strip()})" + (", and its mask-only controls are untestable, not \"not leaky\""
                                                    if untestable_controls else ""))
    return lines


def power_lines(summary: dict) -> list[str]:
    """Per configuration, what the study as run could detect, and what `--seeds auto` saved."""
    lines = []
    for part in parts_of(summary):
        power, prefix = part["power"], label_prefix(summary, part)
        if power["detectable"] is not None:
            lines.append(f"{prefix}the study as run could detect a difference from random of "
                         f"{stats.points(power['detectable'])} points with 80% power ({power['seeds']} seeds per cell, "
                         f"seed-to-seed sd {stats.points(power['sd'])} points pooled over {power['groups']} cell "
                         f"groups)")
        if power.get("everywhere"):
            lines.append(f"{prefix}--seeds auto trained {power['trainings']} cells where max-seeds "
                         f"({part['design']['looks'][-1]}) everywhere would have trained {power['everywhere']}: "
                         f"{power['saved']} saved")
    return lines


def head_lines(summary: dict) -> list[str]:
    """What to know before the verdicts: whether the study can answer (status_lines), which configuration is
    reported and the others with the command that reports each, the configurations when several are reported,
    what was set aside and why, each configuration's warnings (random near chance, a weak or undertrained model),
    and what it could detect (power_lines)."""
    parts = parts_of(summary)
    lines = status_lines(summary)
    lines += [f"reported: {summary['answered']}"] if summary.get("answered") else []
    lines += [f"also in this run directory: [{o['label']}] {o['cells']} cells: `{o['report']}`"
              for o in summary.get("others", [])]
    if len(parts) > 1:
        counted = "; ".join(f"[{p['configuration']['label']}] {p['configuration']['cells']} cells" for p in parts)
        lines.append(f"{len(parts)} configurations of the retraining cells, reported apart (no verdict, ranking, curve "
                     f"or control test compares cells of two): {counted}")
    lines += [set_aside_line(entry, len(parts) > 1, "set aside: ") for entry in summary.get("set_aside", [])]
    common = [w for w in parts[0].get("warnings", []) if all(w in p.get("warnings", []) for p in parts)]
    lines += [f"warning: {w}" for w in common]  # the same in every configuration: said once
    for part in parts:
        lines += [f"{label_prefix(summary, part)}warning: {w}" for w in part.get("warnings", []) if w not in common]
    return lines + power_lines(summary)


def titled(text, part: dict):
    """`text` (a line or a table cell) with each Python object's recorded name (`object:partial.mix-f983f37c`)
    shown as what the object is (`mix(w=0.1)`: the title its configuration record keeps); keys stay names."""
    titles = (part.get("configuration") or {}).get("titles") or {}
    if not isinstance(text, str):
        return text
    for name, title in titles.items():  # only objects have titles (rundir.configurations._titles)
        text = text.replace(name, title)
    return text


def verdict_lines(summary: dict) -> list[str]:
    """The head lines (head_lines), then per configuration (each line labelled with it when the run holds
    several) one line per estimator x mode x fraction verdict (with what its mask-only control's leak does
    to it), a line per leaky control of random, and a ranking line per mode and fill."""
    lines = head_lines(summary)
    for part in parts_of(summary):
        prefix = label_prefix(summary, part) + ("" if findings(part) else NOT_A_FINDING)
        lines += [prefix + titled(line, part) for line in _part_lines(part)]
    return lines


def _part_lines(summary: dict) -> list[str]:
    lines = []
    for e in summary["verdicts"]:
        numbers = f"{pct(e['mean'])} vs random {pct(e['random_mean'])}"
        if e["p"] is not None:
            look = f"; look {e['look']}, level {p_text(e['level'])}" if e.get("look") else ""
            numbers += (f": {difference_text(e)}; Welch p={p_text(e['p'])}, Holm p={p_text(e['p_holm'])}; TOST "
                        f"p={p_text(e['p_equivalence'])}, Holm p={p_text(e['p_equivalence_holm'])}{look}")
        else:
            numbers += f", seeds {e['n']} vs {e['n_random']}"
        verdict = verdict_text(e)
        near = (f"; random near chance ({pct(e['random_mean'])} vs chance {pct(summary['chance'])}: the warning says "
                f"what this means)" if e.get("random_near_chance") else "")
        lines.append(f"{where(summary, e['mode'], e['fill'], e['fraction'])} {e['method']}: {verdict}"
                     f"{LEAK_TAG.get(e['leak'], '')} ({numbers}); {control_text(summary, e)}{near}")
    for leak in summary["leakage"]:
        if leak["method"] == "random" and leak["leaky"]:
            lines.append(f"{leak['mode'].upper()} {leak['fraction']:.0%} random: LEAKY control "
                         f"{pct(leak['mean'])} (chance {pct(summary['chance'])}, p={p_text(leak['p'])})")
    for r in summary["rankings"]:
        if not r["entries"]:
            continue
        order = " < " if r["lower_is_better"] else " > "
        ranked = order.join(f"{e['method']} {pct(e['mean'])}" for e in r["entries"])
        fill = fill_tag(summary, r["fill"])
        better = "lower" if r["lower_is_better"] else "higher"
        missing = f"; not ranked (a fraction or seed missing): {', '.join(r['incomplete'])}" if r["incomplete"] else ""
        alone = f"[not a finding: {r['not_a_finding']}] " if r["not_a_finding"] and findings(summary) else ""
        lines.append(f"{alone}ranking {r['mode'].upper()}{fill} ({ranked_by(r['fractions'])}, {better} is better): "
                     f"{ranked}{missing}")
    return lines
