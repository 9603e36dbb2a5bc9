"""What was measured, first on the page: the data (canvas, image counts, classes), how the base model and the
retrained cells were trained (model, epochs, batch, learning rate, precision), the fills, chance, how many cells, and
what was tested (controls leaky or not, verdicts significant after Holm or not) — then the warnings a reader
needs before any verdict: random near chance, a base model too weak for its estimators' verdicts to mean
much, cells so much shorter-trained than the base model that the gap to it is mostly undertraining."""

from roarfast import stats
from roarfast.modes import LOWER_IS_BETTER, MODES
from roarfast.records.model import adopted_text
from roarfast.report.analysis import (LEAK_INCONCLUSIVE, LEAK_STANDS, NEAR_CHANCE, NO_CONTROL, NOT_LEAKY, UNTESTED,
                                      untestable)
from roarfast.report.sections import Lines, Table, register
from roarfast.report.text import pct

#: a base model is weak when it beats chance by less than this share of the way from chance to 100%: the
#: estimators then explain a model that learned little (34% on 10 classes is weak: 40% is a third of the way)
WEAK_BASE_SHARE = 1 / 3
#: cells trained at most this share of the base model's epochs, whose random cells stay in the lower half
#: between chance and the base model even where least modified, are "mostly undertrained"
SHORT_TRAINING_SHARE = 0.5
#: the recipe fields the table shows, with their words
TRAINING = {"epochs": lambda n: f"{n} epoch{'' if n == 1 else 's'}", "batch_size": "batch {}".format,
            "lr": "learning rate {:g}".format, "precision": lambda p: p if p == "fp32" else f"{p} autocast"}


def numbers(loaded, summary: dict) -> dict:
    context = loaded.context
    measured = {"data": _data(loaded), "base": _training(context.meta.get("recipe"), context.meta.get("model")),
                "cells": _cells_training(loaded)}
    measured["base"].update(adopted=context.meta.get("adopted"), normalization=normalization(context.meta))
    measured.update(estimators=estimators(loaded.cells), versions=versions(loaded.retrained),
                    threads=sorted({c["threads"] for c in loaded.cells if c.get("threads") is not None}))
    return {"datasets": sorted({c["dataset"] for c in loaded.cells}),
            "models": sorted({c["model"] for c in loaded.cells}),
            "chance_source": context.chance_source,
            "n_test": context.n_test,
            "measured": measured,
            "counts": counts(summary["leakage"], summary["verdicts"]),
            "warnings": warnings(summary, measured)}


def _data(loaded) -> dict:
    """The data the cells were trained on: canvas, channels, classes (the base meta's, else the dataset's) and
    the image counts (the opened dataset's; the test split's also as the cells recorded it)."""
    meta, ds = loaded.context.meta, loaded.context.dataset
    options = meta.get("dataset_options")
    out = {"canvas": meta.get("image_size"), "channels": meta.get("in_channels"),
           "classes": meta.get("num_classes"), "train": None, "validation": None, "test": loaded.context.n_test,
           "path": meta.get("data_dir"), "options": options}
    if ds is not None:
        out.update(canvas=ds.image_size, channels=ds.channels, classes=ds.num_classes,
                   train=len(ds.train) - len(ds.val_index), validation=len(ds.val_index), test=len(ds.test),
                   path=ds.data_dir or out["path"], options=ds.options)
    # the validation split and a num_train / num_test subset are drawn with val_seed (roarfast.data.registry)
    out["subset_seed"] = (out["options"] or {}).get("val_seed")
    return out


def estimators(cells: list) -> dict:
    """{method: the parameters its ranks were made with (and their seed, where they draw)}, from the cells'
    configs (none recorded before schema v5: {})."""
    out = {}
    for c in cells:
        ranks = (c.get("config") or {}).get("ranks")
        if ranks is not None and c["method"] not in out:
            out[c["method"]] = {**(ranks.get("parameters") or {}),
                                **({"seed": ranks["seed"]} if ranks.get("seed") is not None else {})}
    return dict(sorted(out.items()))


def versions(rows: list) -> list:
    """The distinct version records ({python, roarfast, torch, numpy, cuda}) of the rows, with their counts:
    [{"versions": {...}, "cells": n}], most cells first."""
    found = {}
    for r in rows:
        if r.get("versions"):
            key = tuple(sorted(r["versions"].items()))
            found[key] = found.get(key, 0) + 1
    return [{"versions": dict(k), "cells": n} for k, n in sorted(found.items(), key=lambda kv: -kv[1])]


def _training(recipe: dict | None, model) -> dict:
    """The model and the TRAINING fields of `recipe`; its precision from Recipe.amp (None there: fp32, since
    --amp auto picks bf16 on some CPUs and not others), unknown where the recipe has no amp."""
    recipe = recipe or {}
    precision = (recipe["amp"] or "fp32") if "amp" in recipe else None
    return {"model": model, **{key: recipe.get(key) for key in TRAINING}, "precision": precision}


def normalization(meta: dict) -> dict | None:
    """{mean, std, source} the base model's inputs are normalized with: its meta's record (adopted weights), else
    the dataset statistics its meta holds; None when it holds neither."""
    if meta.get("normalization"):
        return meta["normalization"]
    if meta.get("mean") is not None and meta.get("std") is not None:
        return {"mean": meta["mean"], "std": meta["std"], "source": "the training split's statistics"}
    return None


def base_text(training: dict) -> str:
    """The base model as the table says it: adopted weights by their file and sha256 (no recipe: nothing was
    trained here), else how it was trained."""
    adopted = training.get("adopted")
    if not adopted:
        return training_text(training)
    return f"{training.get('model') or 'model unknown'}, {adopted_text(adopted)}"


def _normalization_text(norm: dict | None) -> str:
    if not norm:
        return ""
    values = " and ".join(f"{k} ({', '.join(f'{v:.3g}' for v in norm[k])})" for k in ("mean", "std"))
    return f"; inputs normalized with {values}" + (f", {norm['source']}" if norm.get("source") else "")


def _cells_training(loaded) -> dict:
    """The cells' training: the recipe their config recorded, else (rows before schema v5) the epochs their
    rows record."""
    models = ", ".join(sorted({c["model"] for c in loaded.cells}))
    configuration = loaded.configuration
    if configuration is not None and configuration.settings is not None:
        return _training(configuration.settings["config"].get("recipe"), models)
    epochs = sorted({c["epochs"] for c in loaded.cells if c["epochs"] is not None})
    return {**_training(None, models), "epochs": epochs[0] if len(epochs) == 1 else None}


def training_text(training: dict) -> str:
    known = [words(training[key]) for key, words in TRAINING.items() if training.get(key) is not None]
    return ", ".join([training.get("model") or "model unknown", *known]) if known else (training.get("model") or "-")


def counts(controls: list, verdicts: list) -> dict:
    """What was tested: the controls tested and found leaky or not (an untested one is counted as such,
    never as not leaky); the verdicts drawn: significant (better or worse), equivalent within the margin (no
    different), undecided; and by their control."""
    drawn = [e for e in verdicts if e["p_holm"] is not None]
    return {"controls": {"all": len(controls), "tested": sum(c["leaky"] is not None for c in controls),
                         "leaky": sum(bool(c["leaky"]) for c in controls),
                         "untested": sum(c["leaky"] is None and not untestable(c) for c in controls),
                         "untestable": sum(untestable(c) for c in controls)},
            "verdicts": {"all": len(verdicts), "drawn": len(drawn),
                         "significant": sum(e["verdict"] in (stats.BETTER, stats.WORSE) for e in drawn),
                         "equivalent": sum(e["verdict"] == stats.NO_DIFFERENT for e in drawn),
                         "undecided": sum(e["verdict"] == stats.UNDECIDED for e in drawn),
                         "control_not_leaky": sum(e["leak"] == NOT_LEAKY for e in drawn),
                         "leaky_stands": sum(e["leak"] == LEAK_STANDS for e in drawn),
                         "leaky_could_explain": sum(e["leak"] == LEAK_INCONCLUSIVE for e in drawn),
                         "no_control": sum(e["leak"] in (NO_CONTROL, UNTESTED) for e in drawn)}}


def warnings(summary: dict, measured: dict) -> list[str]:
    """What a reader must know before the verdicts, each with what it means for them (the rules:
    analysis.NEAR_CHANCE, WEAK_BASE_SHARE, SHORT_TRAINING_SHARE)."""
    chance, base = summary["chance"], summary["base"].get("test_acc")
    if chance is None:
        return []
    out = []
    random = [g for g in summary["groups"] if g["method"] == "random" and g["mode"] in MODES]
    for mode in MODES:
        near = [g for g in random if g["mode"] == mode and g["mean"] < chance + NEAR_CHANCE]
        if near:
            where = ", ".join(f"{g['fraction']:.0%}" + (f" [{g['fill']}]" if len(summary["fills"]) > 1 else "")
                              + f" ({pct(g['mean'])})" for g in near)
            means = ("an estimator has little room below random there, so its \"no different\" says little and a "
                     "\"better than random\" needs it near chance" if LOWER_IS_BETTER[mode] else
                     "random kept too little to learn from there, so \"better than random\" is easy to reach and "
                     "says little")
            out.append(f"random is near chance (less than {100 * NEAR_CHANCE:g} points above chance {pct(chance)}) at "
                       f"{mode.upper()} {where}: {means}")
    if base is not None and base < chance + WEAK_BASE_SHARE * (1 - chance):
        out.append(f"the base model is weak: test {pct(base)} against chance {pct(chance)}, less than "
                   f"{WEAK_BASE_SHARE:.0%} of the way to 100%; the estimators explain a model that learned little, so "
                   f"the verdicts say little about them on a well-trained model")
    cells_epochs, base_epochs = measured["cells"]["epochs"], measured["base"]["epochs"]
    adopted = measured["base"].get("adopted")
    # adopted weights trained elsewhere, for epochs not known here: their accuracy alone is read
    shorter = adopted or (cells_epochs and base_epochs and cells_epochs <= SHORT_TRAINING_SHARE * base_epochs)
    if base is not None and random and cells_epochs and shorter:
        best = max(random, key=lambda g: g["mean"])
        trained = "the base model's weights were adopted (trained elsewhere)" if adopted else \
            f"the base model {base_epochs}"
        if best["mean"] < chance + (base - chance) / 2:
            out.append(f"mostly undertraining: the cells train {cells_epochs} epochs, {trained}; "
                       f"even random's least-modified cells ({best['mode'].upper()} {best['fraction']:.0%}: "
                       f"{pct(best['mean'])}) stay far below the base model ({pct(base)}), so the gap between the "
                       f"base-model line and the curves is mostly the shorter training, not the removal: read the "
                       f"curves against random's, not against the base model")
    return out


def table(summary: dict) -> list:
    base, measured = summary["base"], summary["measured"]
    data = measured["data"]
    n_cells = sum(len(g["seeds"]) for g in summary["groups"])
    rows = [["data", _data_text(summary["datasets"], data)],
            ["base model", (f"{base_text(measured['base'])}: test {pct(base['test_acc'])}, "
                            f"validation {pct(base['val_acc'])}"
                            + (_normalization_text(measured["base"].get("normalization"))
                               if measured["base"].get("adopted") else ""))],
            ["retrained cells", f"{training_text(measured['cells'])}, each from scratch"],
            ["estimators (their parameters)", _estimators_text(measured["estimators"])],
            ["fills", ", ".join(summary["fills"]) or "-"],
            ["chance", f"{pct(summary['chance'])} ({summary['chance_source']})"],
            ["finished cells (with controls)", str(n_cells)],
            ["versions", _versions_text(measured["versions"])],
            ["CPU threads per cell", ", ".join(str(t) for t in measured["threads"]) or "not recorded"],
            *_count_rows(summary["counts"])]
    out = [Table("What was measured", ["", ""], rows)]
    if summary["warnings"]:
        out.append(Lines("Warnings: read before the verdicts", summary["warnings"]))
    return out


def _data_text(datasets: list, data: dict) -> str:
    canvas = (f"{data['canvas']}x{data['canvas']} px" + (f", {data['channels']} channels" if data["channels"] else "")
              if data["canvas"] else "canvas unknown")
    counts = " / ".join(f"{'-' if data[k] is None else f'{data[k]:,}'} {k}" for k in ("train", "validation", "test"))
    classes = f"{data['classes']} classes" if data["classes"] else "classes unknown"
    text = f"{', '.join(datasets)}: {canvas}; {classes}; images {counts}"
    options = {k: v for k, v in (data.get("options") or {}).items() if k != "val_seed"}
    if options:
        text += "; options " + ", ".join(f"{k}={v}" for k, v in sorted(options.items()))
    if data.get("subset_seed") is not None:
        text += f"; validation split and subset drawn with seed {data['subset_seed']}"
    return text + (f"; read from {data['path']}" if data.get("path") else "")


def _estimators_text(found: dict) -> str:
    if not found:
        return "not recorded (rows before schema v5)"
    return "; ".join(f"{m} " + (", ".join(f"{k}={v}" for k, v in sorted(p.items())) or "(no parameters)")
                     for m, p in found.items())


def _versions_text(found: list) -> str:
    if not found:
        return "not recorded"
    texts = [", ".join(f"{k} {v}" for k, v in sorted(f["versions"].items()) if v) for f in found]
    if len(texts) == 1:
        return texts[0]
    return "; ".join(f"{t} ({f['cells']} cells)" for t, f in zip(texts, found)) + ": they DIFFER between cells"


def _count_rows(counted: dict) -> list:
    """The rows saying what was tested: the mask-only controls (leaky or not), the verdicts (significant after
    Holm, equivalent or undecided; beside a control not leaky, a leaky one, or none)."""
    controls, verdicts = counted["controls"], counted["verdicts"]
    untested = (f"; {controls['untested']} untested (chance or the test split's size unknown)"
                if controls["untested"] else "")
    untested += (f"; {controls['untestable']} untestable (the cells did not leave chance: a learner that learned "
                 f"nothing cannot show leakage)" if controls.get("untestable") else "")
    not_drawn = verdicts["all"] - verdicts["drawn"]
    tested = (f"{verdicts['drawn']} tested: {verdicts['significant']} significant after Holm, "
              f"{verdicts['equivalent']} equivalent (no different), {verdicts['undecided']} undecided; their controls: {verdicts['control_not_leaky']} not "
              f"leaky, {verdicts['leaky_stands']} leaky but the verdict stands, {verdicts['leaky_could_explain']} "
              f"leaky and could explain the verdict, {verdicts['no_control']} none tested")
    if not_drawn:
        tested += f"; {not_drawn} not drawn (one seed or no random)"
    leaky = (f"{controls['tested']} tested: {controls['leaky']} leaky, "
             f"{controls['tested'] - controls['leaky']} not leaky")
    return [["mask-only controls", leaky + untested], ["verdicts against random", tested]]


register("run", "what was measured (data, trainings, fills, chance), what was tested, and the warnings", 10,
         numbers=numbers, blocks=table)
