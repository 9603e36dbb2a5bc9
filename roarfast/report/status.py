"""Whether a configuration's study can answer, decided before any verdict is read (roarfast.stats.learning: only
when learning is shown): CONCLUSIVE when the base model and random's least-modified cells both left chance + the
margin beyond doubt, INCONCLUSIVE when either is at chance (the fix: train longer or on more images, the exact
command with the model the study used and what the cells would then cost), UNDERPOWERED when either cannot be told
(the fix: the seeds or test images computed to decide it, as a command). Only a CONCLUSIVE study's rankings and
verdicts are findings; the mask-only controls of cells at chance cannot show leakage (untestable, never "not leaky").
"""

import shlex

from roarfast import stats
from roarfast.common.progress import format_duration
from roarfast.stats.learning import AT_CHANCE, CANNOT_TELL, CONCLUSIVE, INCONCLUSIVE, SHOWN, UNDERPOWERED

__all__ = ["CONCLUSIVE", "INCONCLUSIVE", "UNDERPOWERED", "study_status"]

#: the fix's epochs when the base model gives no better guide: this many times the cells' epochs
MORE_EPOCHS = 4


def pct(value) -> str:
    return f"{value:.1%}"  # as report.text writes it (which imports the analysis that imports this module)


def bounds(j: dict) -> str:
    """"12.0% [6.5%, 17.5%]": a judged learner's mean and interval, shown within accuracy's range (summary.json
    keeps the raw bounds, which a t-interval near 100% passes)."""
    if j["low"] is None:
        return pct(j["mean"])
    return f"{pct(j['mean'])} [{pct(max(0.0, j['low']))}, {pct(min(1.0, j['high']))}]"


def study_status(cells: list, context, base: dict, cells_epochs, margin: float, command: str | None) -> dict:
    """{"status", "reasons": [why, a line each], "fix": [what to do, a line each], "learning": {"base", "cells":
    each learner's roarfast.stats.learning.Judgement as a dict, or None; "where": random's least-modified cells},
    "cells_at_chance": whether the cells are at chance (their controls cannot show leakage)}. `command`: what made
    the configuration (its record's), which the fixes rewrite."""
    learned = stats.study_learning(cells, base.get("test_acc"), context.chance, context.n_test, margin)
    judged = {k: None if learned[k] is None else learned[k].to_dict() for k in ("base", "cells")}
    where = learned["where"]
    threshold = "" if context.chance is None else f"chance {pct(context.chance)} + {stats.points(margin)} points"
    reasons, fix = [], []
    if context.chance is None:
        reasons.append("chance is unknown (the cells do not record it and the dataset could not be opened): "
                       "whether the learners learned cannot be told")
    who = {"base": "the base model", "cells": _cells_name(where)}
    for key in ("base", "cells"):
        j = judged[key]
        if j is None or j["state"] == SHOWN:
            continue
        if j["state"] == AT_CHANCE:
            reasons.append(f"{who[key]} did not leave chance: {bounds(j)}, the upper end at or below {threshold}; "
                           + ("the estimators explain a model that learned nothing" if key == "base" else
                              "a learner that learned nothing can rank no estimator and show no leakage"))
            fix.append(_base_fix(base, context, command) if key == "base" else
                       _cells_fix(cells, cells_epochs, base, command))
        elif j["state"] == CANNOT_TELL:
            reasons.append(f"whether {who[key]} left chance cannot be told: {bounds(j)} holds {threshold}")
            fix.append(_decide_fix(who[key], j, key == "base", context, command))
    if learned["status"] == CONCLUSIVE:
        shown = " and ".join(f"{who[k]} {bounds(judged[k])}" for k in ("base", "cells") if judged[k] is not None)
        unknown = [who[k] for k in ("base", "cells") if judged[k] is None]
        reasons.append(f"learning shown: {shown}, the lower end{'s' if ' and ' in shown else ''} above {threshold}"
                       + (f" ({' and '.join(unknown)}: not judged, its accuracy or the test split's size unknown)" if unknown else ""))
    return {"status": learned["status"], "reasons": reasons, "fix": fix,
            "learning": {**judged, "where": None if where is None else {
                "method": where[0], "mode": where[1], "fill": where[2], "fraction": where[3]}},
            "cells_at_chance": (judged["cells"] or {}).get("state") == AT_CHANCE}


def _cells_name(where) -> str:
    if where is None:
        return "the retrained cells"
    at = f"{where[1].upper()} {where[3]:.0%}"
    return f"random's least-modified cells ({at})" if where[0] == "random" else f"the best cells ({where[0]}, {at})"


def with_option(command: str | None, flag: str, value, key: str | None = None, drop: tuple = ()) -> str | None:
    """`command` (a roarfast command line) with `flag value` in place of its own (or added; `key`: only the
    flag's `key=...` values are replaced, as for --data-option) and without the flags `drop` (each with its value);
    None where it is no roarfast command line (a Study's)."""
    if not command or not command.startswith("roarfast "):
        return None
    words, out = shlex.split(command), []
    i = 0
    while i < len(words):
        word = words[i]
        given = words[i + 1] if word == flag and i + 1 < len(words) else word.partition("=")[2] \
            if word.startswith(f"{flag}=") else None
        if given is not None and (key is None or given.startswith(f"{key}=")):
            i += 2 if word == flag else 1
            continue
        if word in drop or word.partition("=")[0] in drop:
            i += 2 if word in drop else 1
            continue
        out.append(word)
        i += 1
    return shlex.join([*out, flag, str(value)])


def _data_words(meta: dict) -> list:
    """The flags that name the base model's data: --dataset, --data-dir, --data-option each."""
    words = ["--dataset", meta["dataset"]] if meta.get("dataset") else []
    words += ["--data-dir", str(meta["data_dir"])] if meta.get("data_dir") else []
    for key, value in sorted((meta.get("dataset_options") or {}).items()):
        text = str(value).lower() if isinstance(value, bool) else str(value)
        words += ["--data-option", f"{key}={text}"]
    return words


def _base_fix(base: dict, context, command: str | None) -> str:
    """Train the base model longer (MORE_EPOCHS times its epochs) on the same data, with the model it was, then
    make the configuration again; adopted weights at chance: adopt other weights."""
    meta = context.meta
    if base.get("adopted"):
        where = f"--run-dir {shlex.quote(str(context.run_dir))} " if context.run_dir else ""
        return (f"the adopted weights ({base['adopted']['file']}) are at chance on this data: adopt weights trained "
                f"on it (`roarfast train {where}--weights FILE --model {meta.get('model')}`), or train a base model "
                f"here (the same without --weights), then run the study again")
    epochs = base.get("epochs")
    target = MORE_EPOCHS * epochs if epochs else None
    words = ["roarfast", "train", *(["--run-dir", context.run_dir] if context.run_dir else []),
             *(["--model", meta["model"]] if meta.get("model") else []),
             *(["--epochs", str(target)] if target else []), *_data_words(meta)]
    if meta.get("seed"):
        words += ["--seed", str(meta["seed"])]
    again = f", then `{command}` again (it takes the new base model)" if command else ", then run the study again"
    trained = f" (it trained {epochs} epoch{'' if epochs == 1 else 's'})" if epochs else ""
    return (f"train the base model longer{trained}: `{shlex.join(words)}`{again}; or on more images (the dataset's "
            f"num_train option); check that it beats chance clearly before extracting")


def _cells_fix(cells: list, epochs, base: dict, command: str | None) -> str:
    """Train the cells longer (to the base model's epochs where it trained more, else MORE_EPOCHS times theirs) or
    on more images, with the exact command and what the cells would cost at the seconds they took."""
    base_epochs = base.get("epochs")
    target = base_epochs if epochs and base_epochs and base_epochs > epochs else (MORE_EPOCHS * epochs if epochs
                                                                                 else None)
    if target is None:
        return "train the cells longer or on more images (the command's --epochs; the dataset's num_train option)"
    rewritten = with_option(command, "--epochs", target)
    how = f"`{rewritten}`" if rewritten else f"the same request with epochs={target}"
    text = (f"train the cells longer: {how} (they trained {epochs} epochs"
            + (f", the base model {base_epochs}" if base_epochs else "") + "), or on more images")
    seconds = [c["seconds"] for c in cells if c.get("seconds") is not None]
    if seconds:
        scale = target / epochs
        text += (f"; at --epochs {target} the {len(seconds)} cells would take about "
                 f"{format_duration(sum(seconds) * scale)} of training (the {format_duration(sum(seconds))} "
                 f"they took, x{scale:g})")
    return text


def _decide_fix(who: str, j: dict, one_model: bool, context, command: str | None) -> str:
    """The seeds (the cells, at their spread) or test images (either) computed to decide a learner, as commands."""
    needs, options = j["needs"] or {}, []
    if not one_model and needs.get("seeds"):
        spread = "the prior spread of 3 points (one seed shows none)" if j["prior"] else "their observed spread"
        rewritten = with_option(command, "--seeds", needs["seeds"], drop=("--max-seeds",))  # caps --seeds auto only
        options.append(f"{needs['seeds']} seeds at {spread}" + (f": `{rewritten}`" if rewritten else ""))
    if needs.get("images"):
        meta = context.meta
        rewritten = with_option(command, "--data-option", f"num_test={needs['images']}", "num_test") \
            if "num_test" in (meta.get("dataset_options") or {}) else None
        if rewritten and meta.get("adopted"):  # on other data the sweep would train a base model: adopt them there
            data = {**meta, "dataset_options": {**meta["dataset_options"], "num_test": needs["images"]}}
            adopt = ["roarfast", "train", *(["--run-dir", context.run_dir] if context.run_dir else []),
                     "--weights", meta["adopted"]["file"], "--model", meta.get("model"), *_data_words(data)]
            rewritten = f"{shlex.join(adopt)}` (the same weights adopted on that data), then `{rewritten}"
        options.append(f"a test split of {needs['images']:,} images" + (f" (`{rewritten}`)" if rewritten else ""))
    if not options and needs.get("both"):
        seeds, images = needs["both"]
        options.append(f"{seeds} seeds and a test split of {images:,} images together (neither alone would)")
    if not options:
        return (f"no number of seeds or test images up to {stats.levels.MOST_SEEDS:,} / "
                f"{stats.levels.MOST_IMAGES:,} decides whether {who} left chance: its mean is too near the threshold")
    return f"to decide whether {who} left chance: " + ", or ".join(options)
