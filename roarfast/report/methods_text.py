"""The methods paragraph of a paper built on a study (methods.tex, methods.md): per configuration, what was measured
(the benchmark's modes, the data and its size, the base model and its recipe or its adopted weights, the estimators
and their parameters, the fractions, the fill, the retraining and its seeds, the mask-only controls) and its status;
then, once, how it was tested (the tests, the corrections, alpha and the margins: roarfast.report.decisions). Written
from the report's summary, in sentences a paper can keep, citing the papers of what ran (roarfast.report.citations).

A paragraph is a list of pieces, text and citations (Cite), rendered once as LaTeX (\\cite) and once as Markdown
("(hooker2019benchmark)").
"""

from dataclasses import dataclass

from roarfast.modes import MODES, is_control
from roarfast.report.analysis import parts_of
from roarfast.report.citations import ALWAYS, estimator_cites, fill_cites
from roarfast.report.decisions import margin_sentences, status_note, test_sentences
from roarfast.report.figures import plural
from roarfast.report.latex import breakable
from roarfast.report.sections.run import TRAINING
from roarfast.version import __version__

#: the benchmark's modes, as a paper names them
MODE_WORDS = {"roar": "ROAR (RemOve And Retrain: the top fraction of an estimator's ranked pixels removed)",
              "kar": "KAR (Keep And Retrain: only the top fraction kept)"}


@dataclass(frozen=True)
class Cite:
    """A citation of `keys` (BibTeX keys) in a paragraph."""

    keys: tuple


def paragraphs(summary: dict) -> list[list]:
    """The methods paragraphs of the report's summary: one per configuration, then the statistics'."""
    parts = parts_of(summary)
    out = [_configuration(p, len(parts) > 1) for p in parts]
    return out + [_statistics(summary)]


def cited(pieces: list[list]) -> list[str]:
    """Every key the paragraphs cite, in order of first citation."""
    return list(dict.fromkeys(k for paragraph in pieces for piece in paragraph if isinstance(piece, Cite)
                              for k in piece.keys))


def to_latex(pieces: list[list]) -> str:
    return "\n\n".join("".join(f"~\\cite{{{','.join(p.keys)}}}" if isinstance(p, Cite) else breakable(p)
                               for p in paragraph) for paragraph in pieces) + "\n"


def to_markdown(pieces: list[list]) -> str:
    return "\n\n".join("".join(f" ({'; '.join(p.keys)})" if isinstance(p, Cite) else p for p in paragraph)
                       for paragraph in pieces) + "\n"


def _configuration(part: dict, several: bool) -> list:
    measured, base = part["measured"], part["base"]
    c = part.get("configuration") or {}
    cells = [g for g in part["groups"] if not is_control(g["mode"])]
    modes = [m for m in MODES if any(g["mode"] == m for g in cells)]
    out = [f"Configuration {c.get('label') or c.get('id', '')[:8]} ({c.get('id', '')[:8]}). " if several else "",
           f"We measured the estimators with {' and '.join(MODE_WORDS[m] for m in modes)}", Cite(ALWAYS[:1]),
           f", end to end with roarfast {__version__}", Cite(ALWAYS[1:]), f", {_data(part, measured['data'])}. ",
           _base(base, measured["base"], part["chance"]), " Estimators: "]
    for i, (method, params) in enumerate(measured["estimators"].items()):
        out += [("; " if i else "") + method + (f" ({_params(params)})" if params else "")]
        out += [Cite(estimator_cites(method))] if estimator_cites(method) else []
    if not measured["estimators"]:
        out.append(", ".join(sorted({g["method"] for g in cells})) + " (their parameters not recorded)")
    out.append(". ")
    out += _procedure(part, cells, modes, measured["cells"])
    return out + [f" {status_note(part)}"]


def _data(part: dict, data: dict) -> str:
    datasets = ", ".join(part.get("datasets") or ["the data"])
    canvas = f"{data['canvas']}x{data['canvas']}-pixel images" if data.get("canvas") else ""
    counts = [f"{data[k]:,} {k}" for k in ("train", "validation", "test") if data.get(k) is not None]
    classes = f"{data['classes']} classes" if data.get("classes") else ""
    options = {k: v for k, v in (data.get("options") or {}).items() if k != "val_seed"}
    shown = "; ".join(x for x in (canvas, classes, ", ".join(counts) + (" images" if counts else ""),
                                  ", ".join(f"{k}={v}" for k, v in sorted(options.items()))) if x)
    return f"on {datasets}" + (f" ({shown})" if shown else "")


def _recipe(training: dict) -> str:
    return ", ".join(words(training[key]) for key, words in TRAINING.items() if training.get(key) is not None)


def _base(base: dict, training: dict, chance) -> str:
    accuracy = (f" It reaches {100 * base['test_acc']:.1f}% test accuracy" if base.get("test_acc") is not None
                else " Its test accuracy was not recorded")
    accuracy += f" (chance {100 * chance:.1f}%)." if chance is not None else "."
    adopted = training.get("adopted") or base.get("adopted")
    model = training.get("model") or base.get("model")
    if model is None:  # its meta.json is not in the run directory (pruned, or cells copied without it)
        return ("The base model's record is not in the run directory: how it was trained, and its accuracy, are not "
                "known here.")
    if adopted:
        return (f"The base model is {model} with adopted weights "
                f"({adopted['file']}, sha256 {adopted['file_sha256'][:16]}), trained elsewhere, not here."
                + accuracy)
    recipe = _recipe(training)
    return (f"The base model, {model}, was trained on the unmodified training "
            f"images" + (f" ({recipe})" if recipe else "") + ", its validation split held out for model selection."
            + accuracy)


def _params(params: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(params.items()))


def _procedure(part: dict, cells: list, modes: list, training: dict) -> list:
    fractions = {m: sorted({g["fraction"] for g in cells if g["mode"] == m}) for m in modes}
    seeds = sorted({s for g in cells for s in g["seeds"]})
    controls = [g for g in part["groups"] if is_control(g["mode"])]
    fills = part["fills"]
    out = ["Each estimator ranked the pixels of every training and test image by its attribution; at each fraction ("
           + "; ".join(f"{m.upper()}: {', '.join(f'{f:.4g}' for f in fractions[m])}" for m in modes)
           + f") the removed pixels took the fill {' or '.join(fills)}"]
    out += [Cite(tuple(k for fill in fills for k in fill_cites(fill)))] if any(fill_cites(f) for f in fills) else []
    recipe = _recipe(training)
    out.append(f", and a fresh {training.get('model') or 'model'} was trained from scratch on the modified training "
               f"images" + (f" ({recipe})" if recipe else "") + " and tested on the equally modified test images, "
               f"once per seed ({plural(len(seeds), 'seed')}: {_seed_list(seeds)}); random scores serve as the "
               f"reference every estimator is compared with.")
    if controls:
        control_seeds = sorted({s for g in controls for s in g["seeds"]})
        out.append(f" Each cell's mask-only control (a model trained and tested on the removal pattern alone, its "
                   f"pixels' values not shown) was trained with {plural(len(control_seeds), 'seed')}; a control above "
                   f"chance marks the pattern's shape as informative.")
    return out


def _seed_list(seeds: list) -> str:
    if seeds and seeds == list(range(seeds[0], seeds[-1] + 1)) and len(seeds) > 2:
        return f"{seeds[0]}-{seeds[-1]}"
    return ", ".join(str(s) for s in seeds)


def _statistics(summary: dict) -> list:
    stated = "; ".join(margin_sentences(summary))
    return (["Statistics. "] + [f"{s} " for s in test_sentences(summary)]
            + [f"Significance level {summary['alpha']}" + (f"; {stated}." if stated else ".")])
