"""What a configuration is called, and what tells it apart.

A configuration goes by the name the user gave it (`--name`, `Study(name=...)`), else by the label it got when it
was made: what differs from the configuration of the request before it (HEAD's), in readable settings
("epochs 3", "ig steps 16", "methods +mix(w=0.2) -mix(w=0.1)"), never cut short and never changed afterwards
(both stored in its record, roarfast.rundir.configurations). Every name and label a configuration was shown
with is kept in its record too, so each keeps selecting it (`select`), with its id and an id prefix.

`describe(record)` is a configuration as readable settings (display name -> value): the table of what differs
between several (`differs`) is read from it, whole; digests (the data's fingerprint, the base model's id, a
plug-in's source or code) are settings too, but a label says only that one changed, never the digest.
"""

import re

from roarfast.errors import UserError

#: the settings a label names in this order, then the rest by name
_FIRST = ("dataset", "num train", "num test", "model", "epochs", "lr", "batch size", "methods", "base seed",
          "base epochs")
#: settings whose values are digests: a label says "<name> changed", the table shows the digest cut short
DIGESTS = ("data", "model source", "base model")
#: the suffix of an object's recorded name: `-` and 8 hex of its identity (roarfast.common.plugins.object_name)
_DIGEST_SUFFIX = re.compile(r"-[0-9a-f]{8}$")
#: the characters of a digest a table shows
SHOWN = 8
#: what `select` answers for: every configuration apart
ALL = "all"
#: the fewest characters `select` reads as an id's prefix
PREFIX = 4


def title_of(method: str, titles: dict | None = None) -> str:
    """What method `method` (its recorded name) is shown as: the title its record keeps (`titles`), else its name
    without `object:` and the digest of its identity."""
    if titles and titles.get(method):
        return titles[method]
    if method.startswith("object:"):
        return _DIGEST_SUFFIX.sub("", method[len("object:"):])
    return method


def describe(record: dict) -> dict:
    """{display name: value} of a configuration record: the dataset and its options, the model, the recipe's
    fields, the ranking's settings, the base model's seed and epochs, the methods (by title), and each method's
    own ranks (parameters, code, seed): named once where every method that has it agrees, else per method."""
    settings = record.get("settings") or {}
    config = settings.get("config") or {}
    about = record.get("about") or {}
    titles = record.get("titles") or {}
    out = {"dataset": settings.get("dataset"), "model": settings.get("model")}
    options = about.get("data options") or {}
    recipe = config.get("recipe") or {}
    for key, value in options.items():
        name = _spoken(key)
        out[f"data {name}" if key in recipe or name in out else name] = value
    out.update({_spoken(k): v for k, v in recipe.items()})
    out.update({_spoken(k): v for k, v in (config.get("ranks") or {}).items()})
    out.update({"base seed": about.get("base seed"), "base epochs": about.get("base epochs")})
    out["data"], out["base model"] = config.get("dataset"), config.get("base")
    if config.get("model_source") is not None:
        out["model source"] = config["model_source"]
    for key, value in config.items():  # any other shared setting a later version records
        if key not in ("recipe", "ranks", "dataset", "base", "model_source"):
            out.setdefault(_spoken(key), value)
    methods = sorted(record.get("ranks") or {}, key=lambda m: (m != "random", m))
    out["methods"] = tuple(title_of(m, titles) for m in methods)
    own = {}  # display name -> {method title: value}
    for method in methods:
        provenance = (record.get("provenance") or {}).get(method) or {}
        title = title_of(method, titles)
        for key, value in _leaves(provenance.get("parameters") or {}).items():
            own.setdefault(_spoken(key), {})[title] = value
        code = provenance.get("code") or {}
        for key, value in code.items():
            name = f"{title} code" if key in ("code_sha256", "file_sha256") else _spoken(key)
            own.setdefault(name, {})[title] = value
        if "seed" in provenance:
            own.setdefault("ranks seed", {})[title] = provenance["seed"]
    for name, values in own.items():
        if len({repr(v) for v in values.values()}) == 1:
            out[name] = next(iter(values.values()))
        else:
            out.update({f"{title} {name}": value for title, value in values.items()})
    return out


def differs(records: list) -> list[dict]:
    """For each of `records`, {display name: value} of the settings whose values are not the same in all of them
    (every one of them: the table of what differs), in label order; [{}...] for fewer than two."""
    described = [describe(r) for r in records]
    if len(described) < 2:
        return [{} for _ in described]
    names = sorted({n for d in described for n in d}, key=_order)
    titles = {t for d in described for t in d.get("methods") or ()}

    def differing(name: str) -> bool:  # a method's own setting differs only among those that have the method
        own = any(name.startswith(f"{t} ") for t in titles)
        return len({repr(d.get(name)) for d in described if name in d or not own}) > 1

    shown = [n for n in names if differing(n)]
    return [{n: d.get(n) for n in shown} for d in described]


def label(record: dict, before: dict | None) -> str:
    """The label of configuration `record` when it is made: what differs from `before` (the configuration of the
    request before it), every readable setting that does; a digest only as "<name> changed" where nothing
    readable differs. With none before: its model on its dataset."""
    settings = record.get("settings") or {}
    if before is None:
        return f"{title_of(str(settings.get('model')))} on {title_of(str(settings.get('dataset')))}"
    new, old = describe(record), describe(before)
    methods_new, methods_old = new.get("methods") or (), old.get("methods") or ()
    shared = set(methods_new) & set(methods_old)
    pieces, digests = [], []
    for name in sorted(set(new) | set(old), key=_order):
        if repr(new.get(name)) == repr(old.get(name)):
            continue
        if name == "methods":
            change = [f"+{m}" for m in methods_new if m not in methods_old]
            change += [f"-{m}" for m in methods_old if m not in methods_new]
            pieces.append("methods " + " ".join(change))
        elif (_of_method(name, set(methods_new) | set(methods_old), shared)
              or ((name in new) != (name in old) and methods_new != methods_old)):
            continue  # read only by a method one of them has: its settings come with it
        elif name in DIGESTS or name.endswith(" code") or _digest(new.get(name)):
            digests.append(f"{name} changed")
        else:
            pieces.append(f"{name} {value_text(new.get(name))}")
    return ", ".join(pieces or digests) or "same settings"


def value_text(value) -> str:
    """A setting's value as a label or a table shows it: a number as written, a digest cut to SHOWN characters,
    a list as its items, None as "-"."""
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:g}"
    if _digest(value):
        return value[:SHOWN]
    if isinstance(value, (list, tuple)):
        return ", ".join(value_text(v) for v in value)
    if isinstance(value, dict):
        return ", ".join(f"{k} {value_text(v)}" for k, v in value.items())
    return str(value)


def unique(text: str, taken: set, number: int) -> str:
    """`text`, or `text #number` where another configuration already goes by it."""
    return text if text not in taken else f"{text} #{number}"


def shown(record: dict) -> str:
    """What a configuration goes by: its name, else its label ("" where it has neither: a record made before
    labels were stored, shown by one computed for it: roarfast.rundir.configurations.labelled)."""
    return record.get("name") or record.get("label") or ""


def known_as(record: dict) -> list[str]:
    """Every text that selects configuration `record` besides its id: its name, its label and every name or label
    it was shown with before."""
    return [t for t in dict.fromkeys([record.get("name"), record.get("label"), *(record.get("aliases") or ())]) if t]


def check_name(name) -> str:
    """A configuration's name as given (--name, Study(name=)), refused in one line (name_refusal) where it could be
    read as something else."""
    text = name.strip() if isinstance(name, str) else name
    why = name_refusal(name)
    if why is not None:
        raise UserError(f"--name {text if isinstance(text, str) and text.isprintable() else repr(name)}: {why}")
    return text


def name_refusal(name) -> str | None:
    """Why `name` cannot name a configuration (None: it can): empty; `all`; hex of `select`'s id prefix length or
    more, in either case (select reads a prefix case-blind: 7DCCF27C is an id's start); a character that is not
    printable (a newline would make a line of its own in `roarfast ls`, a tab or a bidirectional override garble it)."""
    text = name.strip() if isinstance(name, str) else name
    if not isinstance(text, str) or not text:
        return "give a configuration a name of some text"
    if not text.isprintable():
        odd = next(c for c in text if not c.isprintable())
        return f"holds the unprintable character {odd!r}; a name is one line of printable text"
    if text == ALL:
        return "reads as every configuration; choose another name"
    if re.fullmatch(rf"[0-9a-fA-F]{{{PREFIX},}}", text):
        return "reads as an id (hex, in any case); choose another name"
    return None


def select(configurations: list, text: str, flag: str = "--config"):
    """The one of `configurations` (objects with `id` and `known` (known_as)) that `text` names: its id, a name
    or label it goes or went by, else an id prefix of 4 characters or more; a UserError naming `flag` and listing
    them where none or several match."""
    text = str(text).strip()
    found = ([c for c in configurations if text == c.id or text in c.known]
             or [c for c in configurations if len(text) >= PREFIX and c.id.startswith(text.lower())])
    if len(found) == 1:
        return found[0]
    listing = "; ".join(f"{c.id[:SHOWN]} [{c.known[0] if c.known else 'the only one'}]" for c in configurations)
    if not found:
        raise UserError(f"{flag} {text}: no such configuration in this run directory; its configurations: "
                        f"{listing or 'none'} (`roarfast ls` lists them)")
    raise UserError(f"{flag} {text}: names {len(found)} configurations; give more of the id ({listing})")


def _of_method(name: str, methods: set, shared: set) -> bool:
    """Whether setting `name` is a method's own ("<title> ...") of a method not in both configurations."""
    return any(name.startswith(f"{m} ") for m in methods - shared)


def _leaves(value: dict, prefix: str = "") -> dict:
    out = {}
    for key, item in value.items():
        if isinstance(item, dict) and item:
            out.update(_leaves(item, f"{prefix}{key} "))
        else:
            out[f"{prefix}{key}"] = item
    return out


def _spoken(key: str) -> str:
    return str(key).replace("_", " ")


def _digest(value) -> bool:
    return isinstance(value, str) and bool(re.fullmatch(r"[0-9a-f]{16,}", value))


def _order(name: str) -> tuple:
    return (_FIRST.index(name) if name in _FIRST else len(_FIRST), name in DIGESTS or name.endswith(" code"), name)
