"""`roarfast list`: every name the commands take, read from the registries (the estimators' ESTIMATORS, the
models' MODELS, the datasets' DATASETS, the fills' FILLS, the no-retrain metrics of roarfast.modes), each with
its one-line description and its parameters, so a new entry appears here by itself. The installed Captum's
attribution classes are listed among the estimators as --method takes them (captum:<Class>), outlined from
captum's source files (methods/captum_source.py) and made records as extraction makes them from the classes
(methods/captum_outline.py): nothing loads torch (the classes are imported only where that source cannot be read).
"""

import importlib.util
import inspect

from roarfast.data.registry import DATASETS
from roarfast.errors import UserError
from roarfast.fills import FILLS, ConstantFill
from roarfast.methods.captum_outline import PREFIX, captum_record, refusal
from roarfast.methods.captum_source import source_outlines
from roarfast.methods.declaration import ALIASES, ESTIMATORS
from roarfast.models.registry import MODELS
from roarfast.modes import NO_RETRAIN_METRICS

#: what `roarfast list` lists, in its order
KINDS = ("estimators", "models", "datasets", "fills", "metrics")


def listing(kinds=KINDS, captum: bool = True) -> dict:
    """{kind: [{name, description, parameters: {name: default}, ...}]} of `kinds`; `captum`: list the installed
    Captum's classes among the estimators (where captum is installed)."""
    unknown = [k for k in kinds if k not in KINDS]
    if unknown:
        raise UserError(f"roarfast list {' '.join(unknown)}: lists {', '.join(KINDS)}")
    makers = {"estimators": lambda: _estimators(captum), "models": _models, "datasets": _datasets,
              "fills": _fills, "metrics": _metrics}
    return {kind: makers[kind]() for kind in kinds}


def _plain(value):
    """A default as JSON writes it: a tuple as a list, an object as its repr."""
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return value if value is None or isinstance(value, (bool, int, float, str)) else repr(value)


def _estimator(record) -> dict:
    aliases = [short for short, full in ALIASES.items() if full == record.name]
    return {"name": record.name, "description": record.description,
            "parameters": {p.name: _plain(p.default) for p in record.parameters},
            "arguments": sorted(record.arguments), "required": list(record.required), "aliases": aliases,
            "uses_model": record.uses_model, "seeded": record.seeded}


def _estimators(captum: bool) -> list:
    out = [_estimator(entry.value) for entry in ESTIMATORS]
    if captum and importlib.util.find_spec("captum") is not None:
        outlines = source_outlines()
        out += captum_estimators() if outlines is None else [
            {**_estimator(captum_record(o)), "form": PREFIX.rstrip(":")} for o in outlines if refusal(o) is None]
    return out


def captum_estimators() -> list:
    """The installed captum.attr's attribution classes --method accepts, as captum:<Class> entries, read from the
    imported classes: where its source cannot be read without importing it (captum_source.source_outlines)."""
    # late: captum and the adapter load torch, which the other kinds and --help never need
    import captum.attr

    from roarfast.methods.captum_adapter import captum_estimator

    out = []
    for name in sorted(dir(captum.attr)):
        if not inspect.isclass(getattr(captum.attr, name)):
            continue
        try:
            out.append({**_estimator(captum_estimator(name)), "form": PREFIX.rstrip(":")})
        except UserError:  # not an attribution class, or one roarfast refuses (it says why when named)
            continue
    return out


def _models() -> list:
    out = [{"name": e.name, "description": e.description, "parameters": _plain(dict(e.recipe or {}))}
           for e in MODELS]
    return out + _schemes(MODELS)


def _datasets() -> list:
    out = [{"name": e.name, "description": e.description, "parameters": _plain(dict(e.options)),
            "read_options": list(e.read_options)} for e in DATASETS]
    return out + _schemes(DATASETS)


def _schemes(resolver) -> list:
    """A resolver's prefixed families (timm:<name>) and its import-path form, as entries of their own."""
    out = [{"name": f"{s.prefix}<name>", "description": s.description, "parameters": {}, "form": "scheme"}
           for s in resolver.schemes]
    if resolver.import_form:
        out.append({"name": resolver.import_form.split(" ", 1)[0], "description": f"a plug-in: {resolver.import_form}",
                    "parameters": {}, "form": "import path"})
    return out


def _fills() -> list:
    return [{"name": e.name, "description": e.description, "parameters": {},
             "constant": isinstance(e.value, ConstantFill), "needs": e.value.pixel_ranks} for e in FILLS]


def _metrics() -> list:
    out = []
    for metric, modes in NO_RETRAIN_METRICS.items():
        parts = [f"{mode}: the base model's test accuracy with the {'least' if least else 'most'} relevant pixels "
                 f"replaced (fill {fill})" for mode, least, fill in modes]
        out.append({"name": metric, "description": "; ".join(parts), "parameters": {},
                    "modes": [mode for mode, _, _ in modes]})
    return out


def listing_lines(listed: dict) -> list[str]:
    """The listing as text: per kind a heading, then per entry its name and description, and its parameters
    indented below it."""
    lines = []
    for kind, entries in listed.items():
        lines += [f"{kind}:" if not lines else f"\n{kind}:"]
        width = min(28, max((len(e["name"]) for e in entries), default=0))
        for e in entries:
            short = f" (short form: {', '.join(e['aliases'])})" if e.get("aliases") else ""
            lines.append(f"  {e['name']:<{width}}  {e['description']}{short}")
            if e["parameters"]:
                shown = ", ".join(f"{k}={v}" for k, v in e["parameters"].items())
                lines.append(f"  {'':<{width}}    parameters: {shown}")
            if e.get("arguments"):
                lines.append(f"  {'':<{width}}    --method-arg: {', '.join(e['arguments'])}")
    return lines
