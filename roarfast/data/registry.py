"""The dataset resolver: every form --dataset (and Study's `dataset=`) takes, read by DATASETS (a
roarfast.resolver.Resolver), and load_dataset, which loads what it names.

    a built-in name         embedded, cifar10, cifar100, imagefolder: the modules of roarfast.data.builtin,
                            each registering its loader (loader_entry) with a description
    torchvision:<Class>     a torchvision classification dataset on disk under --data-dir
    package.module:factory  factory(**data options[, data_dir=]) -> (train, test[, classes])
    object:<name>           refused: a Python object a Study was given, which the command line cannot load
    a Python object         (Study) (train, test[, classes]), a factory, or a Dataset

Each split of a factory or object is a uint8/int64 tensor pair or a torch Dataset of (image, label)
(roarfast.data.convert). The fingerprint covers the spec, the options (defaults included) and the data.

Light on purpose (torch is imported with the built-ins' modules, at the first lookup): the CLI imports
DATASETS to build its --dataset help when the help is shown.
"""

import inspect
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from roarfast.errors import UserError
from roarfast.options import check_like
from roarfast.plugins import OBJECT_PREFIX, import_object, import_path_of, object_name
from roarfast.resolver import BUILTIN, IMPORT_PATH, OBJECT, RECORDED_OBJECT, Entry, Resolver, Scheme

FLAG = "--dataset"
TORCHVISION_PREFIX = "torchvision:"
_EMPTY = inspect.Parameter.empty


@dataclass(frozen=True)
class DatasetEntry(Entry):
    """A built-in dataset. `value` is its loader(**options[, data_dir]) -> (train, test) ImageSets (or
    FileSets); it takes `data_dir` when it reads files (then --data-dir is required). `options`: what
    --data-option may set, {name: default}; `read_options`: those of them that say how the data is read, not
    what it is (kept out of the fingerprint, recorded beside it). `outline`: where given, a function of the
    loader's arguments returning what it would load without reading an image ((C, H, W), train images, test
    images, classes), so that a dry run needs not load the data (outline_dataset)."""

    read_options: tuple = ()
    outline: object = None


def loader_entry(name: str, description: str, loader, *, read_options=(), order: float = 0.0,
                 outline=None) -> DatasetEntry:
    """The DatasetEntry of `loader`: its options are its keyword arguments with defaults, but data_dir and
    those a functools.partial binds (cifar10's name)."""
    bound = loader.keywords if isinstance(loader, partial) else {}
    options = {key: p.default for key, p in inspect.signature(loader).parameters.items()
               if p.default is not _EMPTY and key != "data_dir" and key not in bound}
    if not set(read_options) <= set(options):
        raise ValueError(f"dataset {name!r}: read_options {sorted(set(read_options) - set(options))} are not options")
    return DatasetEntry(name, description, value=loader, options=options, read_options=tuple(read_options),
                        order=order, outline=outline)


DATASETS = Resolver("dataset", FLAG, package="roarfast.data.builtin",
                    schemes=[Scheme(TORCHVISION_PREFIX, "roarfast.data.torchvision_sets:torchvision_loader",
                                    "MNIST, FashionMNIST, SVHN, CIFAR10, STL10, ... on disk under --data-dir")],
                    import_form="package.module:factory (returning (train, test[, classes]))")


def load_dataset(name="embedded", data_dir=None, **options):
    """Loads a dataset into memory (a roarfast.data.Dataset).

    Args:
        name: a built-in name (DATASETS: "embedded", "cifar10", "cifar100", "imagefolder"), "torchvision:<Class>",
            "package.module:factory", or (from Python) a factory, a (train, test[, classes]) object or a
            Dataset (returned as it is).
        data_dir: the files' root (not used by "embedded"; a factory gets it when it takes `data_dir`).
        options: the loader's keyword arguments (a built-in's DATASETS entry lists them; torchvision: the
            class's own; a factory: its own); `val_seed` picks the validation split (default: the option
            `seed`, else 0).

    Returns:
        Dataset whose fingerprint covers the name, every option (defaults included) and the data.
    """
    from roarfast.data.base import Dataset

    if isinstance(name, Dataset):
        return name
    val_seed = options.pop("val_seed", options.get("seed", 0))
    ds = _resolve(name, data_dir, options, val_seed)
    # recorded in the run directory (dataset.json), so later commands find the files without --data-dir
    ds.data_dir = None if data_dir is None else str(Path(data_dir).expanduser().resolve())
    return ds


def _resolve(name, data_dir, options: dict, val_seed):
    """The Dataset `name` (any form but a Dataset) names, loaded."""
    query = DATASETS.query(name)
    if query.form == OBJECT:
        return _from_object(query.obj, data_dir, options, val_seed)
    if query.form == RECORDED_OBJECT:
        raise UserError(f"{FLAG} {query.text}: this dataset was a Python object given to roarfast.Study; the command "
                        f"line cannot load it: pass the same data again, roarfast.Study(run_dir, dataset=...), or "
                        f"name a loader: {FLAG} package.module:factory")
    if query.form == BUILTIN:
        return _load_builtin(query.entry, data_dir, options, val_seed)
    if query.form == IMPORT_PATH:
        return _from_factory(query.text, import_object(query.text, FLAG), data_dir, options, val_seed)
    load, params = query.scheme.load()(query.rest, data_dir)
    resolved = _options(query.text, params, options)
    train, test = load(**resolved)
    return _make(query.text, train, test, resolved, val_seed)


def outline_dataset(name="embedded", data_dir=None, **options) -> dict | None:
    """What load_dataset(name, data_dir, **options) would load, found without reading an image: {"shape": (C,
    H, W), "train", "test", "validation" (image counts), "classes" (their number)}, for a built-in that declares
    its outline (DatasetEntry.outline); None for any other dataset, which only loading describes."""
    from roarfast.data.base import val_split

    query = DATASETS.query(name) if isinstance(name, str) else None
    if query is None or query.form != BUILTIN or query.entry.outline is None:
        return None
    entry = query.entry
    val_seed = options.pop("val_seed", options.get("seed", 0))
    _, resolved = _builtin_arguments(entry, data_dir, options)
    shape, train, test, classes = entry.outline(**resolved)
    return {"shape": tuple(shape), "train": train, "test": test, "validation": len(val_split(train, val_seed)),
            "classes": classes}


def _builtin_arguments(entry: DatasetEntry, data_dir, options: dict):
    """(loader, every keyword it is called with: its defaults, the options, data_dir where it takes one), the
    options checked against the entry's."""
    unknown = sorted(set(options) - set(entry.options))
    if unknown:
        raise UserError(f"unknown option(s) {', '.join(unknown)} for dataset {entry.name!r}; it takes "
                        f"{', '.join(sorted(entry.options))}")
    for key, value in options.items():  # the kind here; the loader checks the range
        check_like(f"--data-option {key}", value, entry.options[key])
    load = entry.load()
    params = inspect.signature(load).parameters
    # every keyword the loader is called with, defaults and bound ones included, is part of the fingerprint
    resolved = {key: p.default for key, p in params.items() if p.default is not _EMPTY}
    resolved.update(options)
    if "data_dir" in params:
        if data_dir is None:
            raise UserError(f"dataset {entry.name!r} needs --data-dir ({entry.description})")
        resolved["data_dir"] = str(data_dir)
    return load, resolved


def _load_builtin(entry: DatasetEntry, data_dir, options: dict, val_seed):
    from roarfast.data.base import make_dataset

    load, resolved = _builtin_arguments(entry, data_dir, options)
    train, test = load(**resolved)
    fingerprint_options = {key: value for key, value in resolved.items()
                           if key != "data_dir" and key not in entry.read_options}
    fingerprint_options["val_seed"] = val_seed
    read_options = {key: value for key, value in resolved.items() if key in entry.read_options}
    return make_dataset(entry.name, train, test, fingerprint_options, seed=val_seed, read_options=read_options)


def _from_factory(spec: str, factory, data_dir, options: dict, val_seed):
    """Calls a `package.module:factory` (or an importable factory object) with the data options (and data_dir
    when it takes one) and converts what it returns."""
    from roarfast.data.convert import image_sets
    from roarfast.plugins import describe_error

    if not callable(factory):
        raise UserError(f"{FLAG} {spec}: expected a factory returning (train, test), got {type(factory).__name__}")
    try:
        params = {key: p.default for key, p in inspect.signature(factory).parameters.items()
                  if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)}
    except (TypeError, ValueError):
        params = {}
    takes_dir = params.pop("data_dir", None) is not None
    if data_dir is not None and not takes_dir:
        raise UserError(f"--data-dir: {FLAG} {spec} takes no data_dir argument")
    resolved = _options(spec, params, options)
    try:
        result = factory(**resolved, **({"data_dir": str(data_dir)} if takes_dir and data_dir is not None else {}))
    except UserError:
        raise
    except Exception as err:  # noqa: BLE001  (the user's factory: any failure is theirs to fix)
        raise UserError(f"{FLAG} {spec} failed: {describe_error(err)}") from None
    train, test = image_sets(result, f"{FLAG} {spec}")
    return _make(spec, train, test, resolved, val_seed)


def _from_object(obj, data_dir, options: dict, val_seed):
    """A dataset given to Study as a Python object: a factory (by its import path when it has one) or the
    (train, test[, classes]) it would return."""
    from roarfast.data.convert import image_sets

    if callable(obj) and not isinstance(obj, (tuple, list)) and not hasattr(obj, "__getitem__"):
        return _from_factory(import_path_of(obj) or object_name(obj), obj, data_dir, options, val_seed)
    if options:
        raise UserError(f"data options {', '.join(options)}: a dataset given as data takes none")
    first = obj[0] if isinstance(obj, (tuple, list)) and obj else obj
    name = OBJECT_PREFIX + ("tensors" if isinstance(first, (tuple, list)) else type(first).__name__)
    train, test = image_sets(obj, f"dataset {name}")
    return _make(name, train, test, {}, val_seed)


def _options(spec: str, params: dict, given: dict) -> dict:
    """The options of a torchvision class or a factory: its defaults with the given ones; a UserError for
    an option it does not take or a required one not given."""
    unknown = sorted(set(given) - set(params))
    if unknown:
        raise UserError(f"--data-option {', '.join(unknown)}: {FLAG} {spec} takes "
                        f"{', '.join(sorted(params)) or 'no options'}")
    missing = sorted(key for key, default in params.items() if default is _EMPTY and key not in given)
    if missing:
        raise UserError(f"{FLAG} {spec} needs --data-option {' '.join(f'{key}=VALUE' for key in missing)}")
    return {**{key: default for key, default in params.items() if default is not _EMPTY}, **given}


def _make(name: str, train, test, options: dict, val_seed):
    from roarfast.data.base import make_dataset

    try:
        return make_dataset(name, train, test, {**options, "val_seed": val_seed}, seed=val_seed)
    except TypeError as err:  # an option the fingerprint cannot hash
        raise UserError(f"{FLAG} {name}: its options should be plain values (numbers, strings, lists): {err}") from None
