"""The report's shared analysis: from the loaded measurements (roarfast.report.load) to the numbers several
sections read — whether the study can answer at all (.status: CONCLUSIVE only when its base model and cells
showed learning), per cell group the mean and 95% interval over seeds, each mask-only control tested against
chance (mask leakage; Holm-corrected over the configuration's controls, untestable where the cells learned
nothing), each estimator against random (Welch for a difference, TOST within the margin for "no different",
each Holm-corrected; replayed look by look under a sequential design) with what its control's leak does to
the verdict (the leak readings) and whether random sits near chance there, what the study could detect — and
`analyse`, which adds each section's own numbers (roarfast.report.sections) to them, one configuration of the
cells at a time. Plain data in, plain (JSON-able) data out: the summary.
"""

import math
from collections import defaultdict

from roarfast import stats
from roarfast.stats.difference import VERDICTS, classify
from roarfast.stats.intervals import welch_se_df
from roarfast.stats.power import detectable_welch
from roarfast.stats.sequential import Design, decide
from roarfast.modes import LOWER_IS_BETTER, MODES, control_mode, is_control
from roarfast.report.load import method_order, mode_order
from roarfast.report.sections import CONFIGURATION, RUN
from roarfast.report.status import CONCLUSIVE, study_status

#: random is near chance where its mean accuracy is less than this above chance: there an estimator has
#: little room below it (ROAR), or random kept too little to learn from (KAR)
NEAR_CHANCE = 0.05


def analyse(loaded, sections, margin: float | None = None) -> dict:
    """Everything the report shows, JSON-able (summary.json). Per configuration of the cells (LoadedRun's
    parts): the shared numbers (`measured`, its verdicts within `margin`: None, the one its sweep recorded, else
    roarfast.stats.MARGIN), then each section's, in page order (a section reads those placed before it). With
    one configuration, the summary is its numbers (with the run's notes first); with several,
    {"configurations": [each one's numbers], "notes": the run's}. Then the numbers of the sections about the
    whole run. A section setting a key the summary already holds is a ValueError."""
    parts = [_analyse_part(part, [s for s in sections if s.scope == CONFIGURATION], margin) for part in loaded.parts]
    if len(parts) == 1:
        summary = parts[0]
        summary["notes"] = loaded.notes + summary["notes"]
    else:
        summary = {"configurations": parts, "notes": list(loaded.notes)}
    for section in sections:
        if section.scope == RUN:
            _add(summary, section, loaded)
    return summary


def parts_of(summary: dict) -> list:
    """The summaries of each configuration: summary["configurations"] when the run holds several, else
    [summary]."""
    return summary.get("configurations") or [summary]


def _analyse_part(loaded, sections, margin: float | None) -> dict:
    summary = measured(loaded, margin)
    for section in sections:
        _add(summary, section, loaded)
    return summary


def _add(summary: dict, section, loaded) -> None:
    if section.numbers is None:
        return
    numbers = section.numbers(loaded, summary)
    taken = sorted(set(numbers) & set(summary))
    if taken:
        raise ValueError(f"report section {section.name!r} sets {taken}, which the summary already holds")
    summary.update(numbers)


def measured(loaded, margin: float | None = None) -> dict:
    """The numbers several sections read, of one configuration: its status (status, reasons, fix, learning:
    report.status), the margin and the sequential design its verdicts were read with (design_of), the
    configuration (label, config, what differs from the others, its cells), groups (mean and interval per method x
    mode x fill x fraction), the mask-only control tests (key "leakage": mask leakage), verdicts against random,
    what the study as run could detect (power), the fills, the base model, chance, and the notes (the loader's; a
    figure that cannot be drawn adds one)."""
    cells, context = loaded.cells, loaded.context
    design, recorded = design_of(loaded.configuration)
    margin = margin if margin is not None else recorded.get("margin", stats.MARGIN)
    accs, sizes = accuracies(cells)
    groups = []
    for (method, mode, fill, fraction), by_seed in accs.items():
        interval = stats.t_interval(list(by_seed.values()))
        groups.append({"method": method, "mode": mode, "fill": fill, "fraction": fraction,
                       "seeds": sorted(by_seed), **interval.to_dict()})
    meta = context.meta
    base = {**{k: meta.get(k) for k in ("model", "dataset", "test_acc", "val_acc", "seconds", "num_classes")},
            "epochs": (meta.get("recipe") or {}).get("epochs"), "adopted": meta.get("adopted")}
    record = getattr(loaded.configuration, "record", None) or {}
    status = study_status(cells, context, base, cells_epochs(loaded), margin,
                          record.get("command"))
    controls = control_tests(accs, sizes, context, untestable=status.pop("cells_at_chance"))
    configuration = {} if loaded.configuration is None else loaded.configuration.to_dict()
    return {
        **status,
        "margin": margin,
        "design": None if design is None else {**design.to_dict(), **recorded},
        "configuration": {**configuration, "cells": len(cells)},
        "fills": sorted({c["fill"] for c in cells if c["fill"] is not None}),
        "base": base,
        "chance": context.chance,
        "groups": sorted(groups, key=lambda g: (mode_order(g["mode"]), g["fill"] or "", method_order(g["method"]),
                                                g["fraction"])),
        "leakage": controls,
        "verdicts": verdicts_against_random(accs, controls, context.chance, margin, design),
        "power": study_power(accs, design, recorded),
        "notes": list(loaded.notes),
    }


def design_of(configuration) -> tuple:
    """(the sequential Design of `sweep --seeds auto`, or None for a fixed design; {margin, detect, max_seeds} as
    the requests recorded them) of a configuration: its record's latest grids that hold them."""
    grids = ((getattr(configuration, "record", None) or {}).get("grids")) or []
    recorded = {k: g[k] for g in grids for k in ("margin",) if g.get(k) is not None}
    designs = [g["design"] for g in grids if g.get("design")]
    if not designs:
        return None, recorded
    last = designs[-1]
    return Design(tuple(last["looks"]), last["alpha"]), {**recorded, **{k: last[k] for k in ("detect", "max_seeds")}}


def study_power(accs: dict, design, recorded: dict) -> dict:
    """What the finished study could detect: the seed-to-seed sd pooled over its ROAR/KAR cell groups, the seeds
    most groups have, the difference those detect at 80% power (roarfast.stats.power.DETECTABLE; None below 2
    seeds); with a sequential design, the trainings run against max-seeds everywhere."""
    groups = [list(v.values()) for k, v in accs.items() if k[1] in MODES]
    sd = stats.pooled_sd(groups)
    counts = sorted(len(g) for g in groups)
    seeds = max(set(counts), key=counts.count) if counts else 0
    out = {"sd": sd, "seeds": seeds, "groups": sum(len(g) >= 2 for g in groups),
           "detectable": stats.detectable(sd, seeds) if sd is not None and seeds >= 2 else None}
    if design is not None:
        everywhere = len(groups) * design.looks[-1]
        out.update(trainings=sum(counts), everywhere=everywhere, saved=everywhere - sum(counts))
    return out


def cells_epochs(loaded) -> int | None:
    """The epochs the configuration's cells trained: their recorded recipe's, else (rows before schema v5) the
    one value their rows record; None when unknown or several."""
    configuration = loaded.configuration
    if configuration is not None and configuration.settings is not None:
        epochs = (configuration.settings["config"].get("recipe") or {}).get("epochs")
        if epochs is not None:
            return epochs
    epochs = {c.get("epochs") for c in loaded.cells if c.get("epochs") is not None}  # a frame's cells may lack it
    return epochs.pop() if len(epochs) == 1 else None


def untestable(control: dict) -> bool:
    """Whether a control (an entry of control_tests, or a verdict's "control") is untestable."""
    return control["test"] == UNTESTABLE


def findings(summary: dict) -> bool:
    """Whether a configuration's rankings and verdicts are findings: only when its study is CONCLUSIVE (learning
    shown)."""
    return summary.get("status") == CONCLUSIVE


def accuracies(cells: list) -> tuple[dict, dict]:
    """(accs, sizes) of the cells: (method, mode, fill, fraction) -> {seed: test accuracy}, and -> the test
    split sizes its cells recorded."""
    accs = defaultdict(dict)
    sizes = defaultdict(set)
    for c in cells:
        accs[(c["method"], c["mode"], c["fill"], c["fraction"])][c["seed"]] = c["test_acc"]
        sizes[(c["method"], c["mode"], c["fill"], c["fraction"])].add(c["test_images"])
    return accs, sizes


#: a control's test when the cells learned nothing (report.status): it cannot show leakage, so none is drawn
UNTESTABLE = ("untestable: the retrained cells did not leave chance, and a learner that learned nothing cannot show "
              "leakage")


def control_tests(accs: dict, sizes: dict, context, untestable: bool = False) -> list:
    """Per mask-only control group (method, control mode, fraction): its mean, interval and mask-leakage
    test against chance, Holm-corrected over every control tested in the configuration (the controls are read
    together: "p" is each test's own, "p_holm" the corrected one that decides "leaky"). The binomial test (one
    seed) counts on the test split's size its cells recorded (sizes: group -> {test_images}), else the
    dataset's, so it needs no dataset. `untestable` (the cells did not leave chance): a control not found
    leaky is untestable (leaky None, test UNTESTABLE), never "not leaky"; one found leaky learned the pattern
    and stays leaky."""
    out, tested = [], []
    for (method, mode, fill, fraction), by_seed in sorted(accs.items(), key=lambda kv: (
            mode_order(kv[0][1]), method_order(kv[0][0]), kv[0][3])):
        if not is_control(mode):
            continue
        values = list(by_seed.values())
        interval = stats.t_interval(values)
        entry = {"method": method, "mode": mode, "fraction": fraction, **interval.to_dict(),
                 "chance": context.chance, "test": None, "p": None, "p_holm": None, "leaky": None}
        needs_n = len(values) < 2 or len(set(values)) == 1
        recorded = sizes[(method, mode, fill, fraction)]
        n_test = next(iter(recorded)) if len(recorded) == 1 and None not in recorded else context.n_test
        if context.chance is None:
            entry["test"] = "none: chance unknown"
        elif needs_n and n_test is None:
            entry["test"] = "none: one seed and the test split's size is unknown"
        else:
            result = stats.leak_test(values, context.chance, n_test or 0)
            entry.update(test=result.test, p=result.p)
            tested.append((entry, result))
        out.append(entry)
    decided = stats.leak_decisions([(e["mean"], result) for e, result in tested], context.chance or 0.0)
    for (entry, _result), (p_holm, leaky) in zip(tested, decided):
        entry.update(p_holm=p_holm, leaky=leaky)
        if untestable and not leaky:
            entry.update(leaky=None, test=UNTESTABLE)
    return out


def verdicts_against_random(accs: dict, control_entries: list, chance: float | None = None,
                             margin: float = stats.MARGIN, design: Design | None = None) -> list:
    """Each estimator against random at every (mode, fill, fraction), read together with the other estimators
    there (roarfast.stats.difference: Welch and TOST within `margin`, each Holm-corrected; a sequential `design`:
    replayed look by look, roarfast.stats.sequential), with the difference's 95% interval, Hedges' g, what the
    seeds could detect, its mask-only control's test and whether random is near `chance` there
    (random_near_chance: NEAR_CHANCE)."""
    controls = {(e["method"], e["mode"], e["fraction"]): e for e in control_entries}
    out = []
    slots = sorted({(mode, fill, fraction) for (_m, mode, fill, fraction) in accs if mode in MODES},
                   key=lambda slot: (mode_order(slot[0]), *slot[1:]))
    for mode, fill, fraction in slots:
        random = accs.get(("random", mode, fill, fraction))
        entries = []
        for (method, m, f, fr), by_seed in accs.items():
            if (m, f, fr) != (mode, fill, fraction) or method == "random":
                continue
            values = list(by_seed.values())
            entry = {"method": method, "mode": mode, "fill": fill, "fraction": fraction,
                     "mean": sum(values) / len(values), "n": len(values), "random_mean": None, "n_random": 0,
                     **dict.fromkeys(("p", "p_holm", "p_equivalence", "p_equivalence_holm", "diff", "diff_low",
                                      "diff_high", "g", "detectable", "look")), "margin": margin,
                     "random_near_chance": False}
            if random is None:
                entry["verdict"] = "no verdict drawn (random was not run here)"
            else:
                rv = list(random.values())
                entry.update(random_mean=sum(rv) / len(rv), n_random=len(rv))
                entry["random_near_chance"] = chance is not None and entry["random_mean"] < chance + NEAR_CHANCE
                if len(values) < 2 or len(rv) < 2:
                    entry["verdict"] = "no verdict drawn (one seed)"
            control = controls.get((method, control_mode(mode), fraction))
            entry["control"] = None if control is None else {k: control[k]
                                                             for k in ("mean", "n", "p", "p_holm", "leaky", "test")}
            entries.append(entry)
        tested = [e for e in entries if "verdict" not in e]
        if tested:
            estimators = {e["method"]: accs[(e["method"], mode, fill, fraction)] for e in tested}
            _decide(tested, estimators, random, LOWER_IS_BETTER[mode], margin, design)
        for e in entries:
            e["leak"] = leak_reading(e)
        out.extend(sorted(entries, key=lambda e: method_order(e["method"])))
    return out


def _decide(entries: list, estimators: dict, random: dict, lower_is_better: bool, margin: float, design) -> None:
    """Fills the verdict entries of one place ({method: {seed: accuracy}} of the estimators, random's), each with
    the seeds its verdict was read on: all of them in a fixed design, those of its last look in a sequential one
    (fewer seeds than the first look: no verdict drawn)."""
    result, read = (_fixed if design is None else _replayed)(estimators, random, lower_is_better, margin, design)
    for i, e in enumerate(entries):
        if read[i] is None:
            e["verdict"] = f"no verdict drawn (fewer seeds than the design's first look, {design.looks[0]})"
            continue
        values, rv, level, look = read[i]
        interval = stats.welch_interval(rv, values)
        e.update({k: _number(result[k][i]) for k in ("p", "p_holm", "p_equivalence", "p_equivalence_holm")})
        e.update(verdict=VERDICTS[int(result["code"][i])], diff=interval.mean, diff_low=interval.low,
                 diff_high=interval.high, g=stats.hedges_g(rv, values), level=level, look=look,
                 detectable=detectable_welch(*welch_se_df(rv, values), level))


def _fixed(estimators: dict, random: dict, lower_is_better: bool, margin: float, _design) -> tuple:
    """(the tests' p-values and verdict codes, [(values, random's, level, look None)]): every seed of each estimator
    against every seed of random, at alpha."""
    rv = list(random.values())
    read = [(list(by_seed.values()), rv, stats.ALPHA, None) for by_seed in estimators.values()]
    p = [stats.welch_p(r, v) for v, r, _level, _look in read]
    pe = [stats.tost_p(r, v, margin) for v, r, _level, _look in read]
    result = {"p": p, "p_holm": stats.holm(p), "p_equivalence": pe, "p_equivalence_holm": stats.holm(pe)}
    diffs = [sum(v) / len(v) - sum(r) / len(r) for v, r, _level, _look in read]
    result["code"] = classify(diffs, result["p_holm"], result["p_equivalence_holm"], stats.ALPHA, stats.ALPHA,
                              lower_is_better)
    return result, read


def _replayed(estimators: dict, random: dict, lower_is_better: bool, margin: float, design: Design) -> tuple:
    """(the replay's p-values, verdict codes and looks, [(values, random's, level, look) or None]): the seeds in
    order, look by look (roarfast.stats.sequential.decide), each estimator read on its last look's first seeds."""
    seeds = sorted({s for by_seed in (random, *estimators.values()) for s in by_seed})
    table = [[by_seed.get(s, math.nan) for s in seeds] for by_seed in estimators.values()]
    result = decide(table, [random.get(s, math.nan) for s in seeds], design, lower_is_better, margin)

    def first(by_seed: dict, look: int) -> list:
        return [by_seed[s] for s in sorted(by_seed)][:design.looks[look - 1]]

    read = [(first(by_seed, k), first(random, k), design.levels[k - 1], int(k)) if k else None
            for by_seed, k in zip(estimators.values(), result["look"])]
    return result, read


def _number(value):
    """A p-value as summary.json holds it: a float, None where untested (NaN)."""
    value = float(value)
    return None if math.isnan(value) else value


#: how a verdict reads beside its mask-only control (a verdict entry's "leak"): what was tested, in words
NO_CONTROL, UNTESTED, NOT_LEAKY = "no control", "control untested", "control not leaky"
LEAK_STANDS, LEAK_INCONCLUSIVE = "leaky control, verdict stands", "leaky control could explain the verdict"
LEAKY_NO_VERDICT = "leaky control"


def leak_reading(entry: dict) -> str:
    """What the leak does to a verdict entry. A leaky control means the retrained model also reads the
    removal pattern's shape, which raises its accuracy in both modes: a ROAR "better than random" (lower)
    was reached despite it and stands, while its "no different" or "worse" may be the leak's doing; a KAR
    "better than random" (higher) may be the leak's doing, while its "no different" or "worse" stand."""
    control = entry["control"]
    if control is None:
        return NO_CONTROL
    if control["leaky"] is None:
        return UNTESTED
    if not control["leaky"]:
        return NOT_LEAKY
    if entry["p_holm"] is None or entry["verdict"] == stats.UNDECIDED:
        return LEAKY_NO_VERDICT
    better = entry["verdict"] == stats.BETTER
    return LEAK_STANDS if better == LOWER_IS_BETTER[entry["mode"]] else LEAK_INCONCLUSIVE


def shown_bounds(entry: dict) -> tuple:
    """(low, high) of an accuracy (or AUC) interval as shown: clipped to [0, 1], accuracy's range, which a
    t-interval over a few seeds near 0% or 100% passes (summary.json keeps the raw bounds); (None, None)
    for one seed."""
    if entry["low"] is None:
        return None, None
    return max(0.0, entry["low"]), min(1.0, entry["high"])
