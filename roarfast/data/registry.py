"""The dataset resolver: every form --dataset (and Study's `dataset=`) takes, read by DATASETS (a
roarfast.common.resolver.Resolver), and load_dataset, which loads what it names.

    a built-in name         embedded, cifar10, cifar100, imagefolder: one module each in roarfast.data.builtin,
                            which registers its loader (`register_dataset`: a description, the options from
                            the loader's own signature, what a dry run may know without loading)
    torchvision:<Class>     a torchvision classification dataset on disk under --data-dir
    package.module:factory  factory(**data options[, data_dir=]) -> (train, test[, classes])
    object:<name>           refused: a Python object a Study was given, which the command line cannot load
    a Python object         (Study) (train, test[, classes]), a factory, or a Dataset

Each split of a factory or object is a uint8/int64 tensor pair or a torch Dataset of (image, label)
(roarfast.data.convert). Every form takes num_train / num_test: a seeded, stratified subset
(roarfast.data.subset) made here once, unless its loader takes them itself (embedded generates that many).
The fingerprint covers the spec, the options (defaults included; the subset's counts when given) and the data.

Light on purpose (torch is imported by a built-in's loader, when it is called): the CLI builds its --dataset
help from DATASETS, whose first lookup imports the light modules of roarfast.data.builtin.
"""

import inspect
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from roarfast.errors import UserError
from roarfast.common.options import check_like
from roarfast.common.plugins import OBJECT_PREFIX, describe_error, import_object, import_path_of, object_name
from roarfast.common.resolver import (BUILTIN, IMPORT_PATH, OBJECT, RECORDED_OBJECT, Entry, Resolver, Scheme,
                                      declaring_module, load_target)

FLAG = "--dataset"
TORCHVISION_PREFIX = "torchvision:"
#: the keyword of a built-in loader that takes the stratified subset itself (roarfast.data.subset.Subset), to
#: read only the files it keeps
SUBSET = "subset"
_EMPTY = inspect.Parameter.empty


@dataclass(frozen=True)
class DatasetEntry(Entry):
    """A built-in dataset (`register_dataset` makes one). What it loads (`value`, or `target`) is its
    loader(**options[, data_dir][, subset]) -> (train, test) ImageSets (or FileSets); it takes `data_dir` when it
    reads files (then --data-dir is required). `options`: what --data-option may set, {name: default}: the
    loader's keyword arguments with their defaults, but data_dir, SUBSET and those a functools.partial binds
    (cifar10's name: fingerprinted, never set). `read_options`: those of them that say how the data is read, not
    what it is (kept out of the fingerprint, recorded beside it). `outline`: where given, a function of the
    loader's arguments (or its import path) returning what it would load without reading an image ((C, H, W),
    train images, test images, classes, whether it has ground-truth masks), so that a dry run needs not load the
    data (outline_dataset)."""

    read_options: tuple = ()
    outline: object = None

    def __post_init__(self):
        super().__post_init__()
        if not set(self.read_options) <= set(self.options):
            raise ValueError(f"dataset {self.name!r}: read_options {sorted(set(self.read_options) - set(self.options))} "
                             f"are not options")


#: the built-ins register from the modules of roarfast.data.builtin (listed by their `order`: the first is the
#: default)
DATASETS = Resolver("dataset", FLAG, package="roarfast.data.builtin",
                    schemes=[Scheme(TORCHVISION_PREFIX, "roarfast.data.torchvision_sets:torchvision_loader",
                                    "MNIST, FashionMNIST, SVHN, CIFAR10, STL10, ... on disk under --data-dir")],
                    import_form="package.module:factory (returning (train, test[, classes]))")


def register_dataset(name: str, description: str, *, outline=None, read_options=(), order: float = 0.0):
    """Decorator (or a call on a functools.partial): registers `loader` as the built-in dataset `name`, its
    options those of its signature (loader_options), so a declaration cannot disagree with its loader; `outline`,
    `read_options`: as DatasetEntry's, an outline refused (ValueError) unless it takes the loader's arguments.
    A loader (and an outline) imports torch when called: the module that registers it is imported by every
    --help."""

    def decorate(loader):
        _check_declaration(name, loader_options(loader), loader, outline)
        DATASETS.register(DatasetEntry(name, description, value=loader, options=loader_options(loader),
                                       read_options=tuple(read_options), outline=outline, order=order,
                                       module=declaring_module(loader)))
        return loader

    return decorate


def load_dataset(name="embedded", data_dir=None, **options):
    """Loads a dataset into memory (a roarfast.data.Dataset).

    Args:
        name: a built-in name (DATASETS: "embedded", "cifar10", "cifar100", "imagefolder"), "torchvision:<Class>",
            "package.module:factory", or (from Python) a factory, a (train, test[, classes]) object or a
            Dataset (returned as it is).
        data_dir: the files' root (not used by "embedded"; a factory gets it when it takes `data_dir`).
        options: the loader's keyword arguments (a built-in's DATASETS entry lists them; torchvision: the
            class's own; a factory: its own), and for every form num_train / num_test (the images of each split
            to keep: a stratified subset); `val_seed` picks the validation split and the subset (default: the
            option `seed`, else 0).

    Returns:
        Dataset whose fingerprint covers the name, every option (defaults included) and the data.
    """
    # late: loads torch, and --help imports this module
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
    if query.form == RECORDED_OBJECT:
        raise UserError(f"{FLAG} {query.text}: this dataset was a Python object given to roarfast.Study; the command "
                        f"line cannot load it: pass the same data again, roarfast.Study(run_dir, dataset=...), or "
                        f"name a loader: {FLAG} package.module:factory")
    if query.form == BUILTIN:
        source = _builtin(query.entry, data_dir)
    elif query.form == IMPORT_PATH:
        source = _factory(query.text, import_object(query.text, FLAG), data_dir)
    elif query.form == OBJECT:
        source = _object(query.obj, data_dir)
    else:
        load, params = query.scheme.load()(query.rest, data_dir)
        source = _Source(query.text, params, load)
    return source.dataset(options, val_seed)


def outline_dataset(name="embedded", data_dir=None, **options) -> dict | None:
    """What load_dataset(name, data_dir, **options) would load, found without reading an image: {"shape": (C,
    H, W), "train", "test", "validation" (image counts), "classes" (their number), "ground_truth" (whether it
    has masks)}, for a built-in that declares its outline (DatasetEntry.outline); None for any other dataset,
    which only loading describes."""
    query = DATASETS.query(name) if isinstance(name, str) else None
    if query is None or query.form != BUILTIN or query.entry.outline is None:
        return None
    val_seed = options.pop("val_seed", options.get("seed", 0))
    return _builtin(query.entry, data_dir).outline(options, val_seed)


@dataclass(frozen=True)
class _Source:
    """What a dataset form loads from: its recorded `name`, `params` (the options it takes: name -> default,
    _EMPTY when required), `load(**options)` -> (train, test) ImageSets, `fixed` keywords it is called with
    that no option sets (a built-in's bound ones: fingerprinted too), the `read_options` kept out of the
    fingerprint, whether `load` takes the SUBSET itself (a loader that reads files one by one), and `builtin`
    (its options are checked as a built-in's)."""

    name: str
    params: dict
    load: object
    fixed: dict = field(default_factory=dict)
    read_options: tuple = ()
    takes_subset: bool = False
    builtin: bool = False
    outline_of: object = None

    def dataset(self, options: dict, val_seed):
        """The Dataset of `options` (--data-option): the loader's own, and num_train / num_test (a stratified
        subset, roarfast.data.subset) where the loader does not take them itself."""
        # late: loads torch, and --help imports this module
        from roarfast.data.base import make_dataset
        from roarfast.data.subset import subset_split

        subset, resolved = self._arguments(options, val_seed)
        if self.takes_subset:
            train, test = self.load(**resolved, **{SUBSET: subset})
        else:
            train, test = self.load(**resolved)
            train, test = (subset_split(part, subset.rows(split, part.labels, len(part.classes), self.name))
                           for split, part in (("train", train), ("test", test)))
        fingerprinted = {key: value for key, value in resolved.items() if key not in self.read_options}
        try:
            return make_dataset(self.name, train, test, {**fingerprinted, **subset.recorded(), "val_seed": val_seed},
                                seed=val_seed, read_options={key: resolved[key] for key in self.read_options})
        except TypeError as err:  # an option the fingerprint cannot hash
            raise UserError(f"{FLAG} {self.name}: its options should be plain values (numbers, strings, lists): "
                            f"{err}") from None

    def outline(self, options: dict, val_seed) -> dict:
        """What dataset(options, val_seed) would load, from `outline_of` (a built-in's DatasetEntry.outline,
        called with the loader's arguments): no image read."""
        # late: loads torch, and --help imports this module
        from roarfast.data.base import val_split

        subset, resolved = self._arguments(options, val_seed)
        subset_argument = {SUBSET: subset} if self.takes_subset else {}
        shape, train, test, classes, ground_truth = self.outline_of(**resolved, **subset_argument)
        if not self.takes_subset:  # whole splits outlined: what the subset keeps of them
            train, test = (subset.count("train", train, classes, self.name), subset.count("test", test, classes,
                                                                                          self.name))
        return {"shape": tuple(shape), "train": train, "test": test, "validation": len(val_split(train, val_seed)),
                "classes": classes, "ground_truth": ground_truth}

    def _arguments(self, options: dict, val_seed):
        """(the Subset of num_train / num_test, every keyword the loader is called with but the subset)."""
        # late: loads torch, and --help imports this module
        from roarfast.data.subset import Subset

        options = dict(options)
        own = {key: options.pop(key) for key in list(options) if key in self.params}
        subset = Subset.take(options, val_seed)
        return subset, {**self.fixed, **self._resolve(own, options)}

    def _resolve(self, own: dict, rest: dict) -> dict:
        """Every option the loader is called with (its defaults with the given ones); a UserError for one it
        does not take, or a required one not given."""
        # late: loads torch, and --help imports this module
        from roarfast.data.subset import OPTIONS

        if self.builtin:
            if rest:
                raise UserError(f"unknown option(s) {', '.join(sorted(rest))} for dataset {self.name!r}; it takes "
                                f"{', '.join(sorted({*self.params, *OPTIONS.values()}))}")
            for key, value in own.items():  # the kind here; the loader checks the range
                check_like(f"--data-option {key}", value, self.params[key])
        return _options(self.name, self.params, {**own, **rest})


def loader_options(loader) -> dict:
    """What a built-in's `loader` takes as options: its keyword arguments with their defaults, but data_dir, SUBSET
    and those a functools.partial binds."""
    bound = loader.keywords if isinstance(loader, partial) else {}
    return {key: p.default for key, p in inspect.signature(loader).parameters.items()
            if p.default is not _EMPTY and key not in ("data_dir", SUBSET) and key not in bound}


def _named(obj) -> str:
    """How a declaration's error names a loader or an outline: its import path, else module:name."""
    if isinstance(obj, str):
        return obj
    function = obj.func if isinstance(obj, partial) else obj
    return f"{function.__module__}:{function.__qualname__}"


def _check_declaration(name: str, options, load, outline) -> None:
    """Refuses (ValueError) a declaration that its implementation contradicts: options other than the loader's,
    or an outline that takes other arguments than the loader."""
    if loader_options(load) != dict(options):
        raise ValueError(f"dataset {name!r} declares the options {dict(options)}, but its loader {_named(load)} "
                         f"takes {loader_options(load)}")
    arguments = inspect.signature(load).parameters
    if outline is not None and inspect.signature(outline).parameters != arguments:
        raise ValueError(f"dataset {name!r}: its outline {_named(outline)} should take the loader's arguments "
                         f"({', '.join(map(str, arguments.values()))})")


def _builtin(entry: DatasetEntry, data_dir) -> _Source:
    """A built-in's loader, called with its defaults and bound keywords (all fingerprinted) and the given
    options, with data_dir where it reads files (not fingerprinted: the files are). An entry declared by hand
    (DatasetEntry with a target) is checked against its loader here, when it is first loaded."""
    load = entry.load()
    outline = load_target(entry.outline) if isinstance(entry.outline, str) else entry.outline
    _check_declaration(entry.name, entry.options, load, outline)
    params = inspect.signature(load).parameters
    if "data_dir" in params:
        if data_dir is None:
            raise UserError(f"dataset {entry.name!r} needs --data-dir ({entry.description})")
        load = partial(load, data_dir=str(data_dir))
    fixed = {key: p.default for key, p in params.items()
             if p.default is not _EMPTY and key not in entry.options and key not in ("data_dir", SUBSET)}
    return _Source(entry.name, dict(entry.options), load, fixed=fixed, read_options=entry.read_options,
                   takes_subset=SUBSET in params, builtin=True,
                   outline_of=None if outline is None else partial(outline, **(
                       {"data_dir": str(data_dir)} if "data_dir" in params else {})))


def _factory(spec: str, factory, data_dir) -> _Source:
    """A `package.module:factory` (or an importable factory object), called with the data options (and data_dir
    when it takes one); what it returns is converted (roarfast.data.convert)."""
    # late: loads torch, and --help imports this module
    from roarfast.data.convert import image_sets

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

    def load(**options):
        try:
            result = factory(**options, **({"data_dir": str(data_dir)} if takes_dir and data_dir is not None else {}))
        except UserError:
            raise
        except Exception as err:  # noqa: BLE001  (the user's factory: any failure is theirs to fix)
            raise UserError(f"{FLAG} {spec} failed: {describe_error(err)}") from None
        return image_sets(result, f"{FLAG} {spec}")

    return _Source(spec, params, load)


def _object(obj, data_dir) -> _Source:
    """A dataset given to Study as a Python object: a factory (by its import path when it has one) or the
    (train, test[, classes]) it would return, which takes no options but num_train / num_test."""
    # late: loads torch, and --help imports this module
    from roarfast.data.convert import image_sets

    if callable(obj) and not isinstance(obj, (tuple, list)) and not hasattr(obj, "__getitem__"):
        return _factory(import_path_of(obj) or object_name(obj), obj, data_dir)
    first = obj[0] if isinstance(obj, (tuple, list)) and obj else obj
    name = OBJECT_PREFIX + ("tensors" if isinstance(first, (tuple, list)) else type(first).__name__)
    return _Source(name, {}, lambda: image_sets(obj, f"dataset {name}"))


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
