"""The estimator resolver: what --method (and Study's methods=) names -> estimator records
(roarfast.methods.declaration.Estimator), on the one resolver idiom (roarfast.common.resolver):

- a built-in (`ESTIMATORS`: one module each in roarfast/methods/estimators/; short forms sg sg-sq var; 'all');
- `captum:<ClassName>` (the record read from the class: captum_adapter.py);
- `package.module:function`, a function object (or a mapping name -> function object), or the object: name
  this process gave one (plugins.py).

`parse_methods` turns every form into canonical names, `resolve_methods` into their records (each looked up
once: roarfast.methods.selection.Selection holds them for a stage), `get` one name into its record,
`check_arguments` the --method-arg values against the records. Light on purpose: the CLI builds its --method
help from here.
"""

from collections.abc import Mapping, Sequence

from roarfast.errors import UserError
from roarfast.methods.declaration import ESTIMATORS, Estimator
from roarfast.methods.plugins import check_distinct, recorded, register_plugin
from roarfast.common.resolver import BUILTIN, OBJECT, RECORDED_OBJECT, SCHEME

#: the word for every built-in
ALL = "all"


def method_forms() -> str:
    """Every form --method takes, for its help and its errors."""
    aliases = " ".join(f"{short} (= {full})" for short, full in ESTIMATORS.aliases.items())
    return f"estimators, comma-separated: {ESTIMATORS.forms()}; short forms {aliases}; or '{ALL}' (every built-in)"


def known_methods() -> list[str]:
    """Canonical names of every built-in estimator, in listing order."""
    return ESTIMATORS.names


def get(spec) -> Estimator:
    """The record of one estimator: a canonical name (a built-in, captum:<Class>, a plug-in this process
    resolved), an import path, a short form, or a function object."""
    try:
        query = ESTIMATORS.query(spec)
    except UserError:
        raise UserError(f"unknown method {spec!r}; --method takes {method_forms()}") from None
    if query.form == BUILTIN:
        return query.entry.value
    if query.form == SCHEME:
        return query.scheme.load()(query.rest)
    if query.form == OBJECT:
        return register_plugin(query.obj)
    previous = recorded(query.text)  # resolved earlier in this process: its import or its object stands
    if previous is not None:
        return previous
    if query.form == RECORDED_OBJECT:
        raise UserError(f"--method {query.text}: this estimator was a Python function given to roarfast.Study; the "
                        f"command line cannot import it: pass the same function to roarfast.Study(run_dir, "
                        f"methods=[...]), or move it into a module and name it package.module:function")
    return register_plugin(query.text)  # an import path


def parse_methods(spec: str | Sequence | Mapping) -> list[str]:
    """Canonical method names from "sg,sg-sq,var", "all", "captum:Saliency", "package.module:function" or a
    list of such strings and estimator functions (`function(model, images, target)`, recorded as plug-ins), or
    of mappings name -> function (each recorded as object:<name>).

    "all" means every built-in; short forms (sg, sg-sq, var) mean the -grad ones; duplicates are
    dropped, order kept. Unknown names raise UserError (a ValueError) listing every form; one name given to
    two different functions, a UserError too (check_distinct).
    """
    return list(resolve_methods(spec))


def resolve_methods(spec: str | Sequence | Mapping) -> dict[str, Estimator]:
    """{canonical name: record} of what parse_methods takes, in its order: each form looked up once."""
    parts = [spec] if isinstance(spec, (str, Mapping)) or callable(spec) else list(spec)
    records, objects = {}, []
    for part in parts:
        if isinstance(part, Mapping) or callable(part):
            given = [register_plugin(obj, name) for name, obj in part.items()] if isinstance(part, Mapping) \
                else [get(part)]
            objects.extend(given)
            for record in given:
                records.setdefault(record.name, record)
            continue
        if not isinstance(part, str):
            raise UserError(f"methods should be names or estimator functions, got {type(part).__name__}")
        for item in (item.strip() for item in part.split(",")):
            for name in known_methods() if item.lower() == ALL else [item] if item else []:
                record = get(name)
                records.setdefault(record.name, record)
    if not records:
        raise UserError(f"no method given; --method takes {method_forms()}")
    check_distinct(objects)
    return records


def check_arguments(records, args) -> None:
    """Refuses (UserError, one line) a --method-arg that none of the estimator `records` takes (naming what each
    takes), and an estimator that lacks an argument it cannot run without (check_required)."""
    records = list(records)
    for arg in args:
        if not any(record.takes(arg) for record in records):
            takes = "; ".join(f"{record.name} takes {record.accepted()}" for record in records)
            raise UserError(f"--method-arg {arg}: no estimator of this run takes it ({takes})")
    check_required(records, args)


def check_required(records, args) -> None:
    """Refuses (UserError, one line) an estimator of `records` that lacks an argument it cannot run without
    among `args`, naming it and how to pass it."""
    for record in records:
        missing = [arg for arg in record.required if arg not in args]
        if missing:
            where = record.arguments[missing[0]]
            raise UserError(f"{record.name} needs {missing[0]} (an argument of {where}): pass --method-arg "
                            f"{missing[0]}=VALUE (Study: method_args={{'{missing[0]}': ...}})")
