"""load_dataset, the dataset resolver: every form --dataset (and Study's `dataset=`) takes.

    embedded | cifar10 | cifar100 | imagefolder   the built-in loaders (DATASETS)
    torchvision:<Class>                           a torchvision classification dataset on disk under --data-dir
    package.module:factory                        factory(**data options[, data_dir=]) -> (train, test[, classes])
    a Python object                               (Study) (train, test[, classes]), a factory, or a Dataset

Each split of a factory or object is a uint8/int64 tensor pair or a torch Dataset of (image, label)
(roarfast.data.convert). The fingerprint covers the spec, the options (defaults included) and the data.

Light on purpose (torch is imported when a dataset is loaded): the CLI builds its --dataset help from here.
"""

import inspect
from pathlib import Path

from roarfast.errors import UserError
from roarfast.options import check_like
from roarfast.plugins import OBJECT_PREFIX, import_object, import_path_of, is_import_path, object_name

#: dataset names and what they are
DATASETS = {
    "embedded": "procedural 32x32 images with ground-truth masks (no files needed)",
    "cifar10": "CIFAR-10 in torchvision's on-disk format under --data-dir",
    "cifar100": "CIFAR-100 in torchvision's on-disk format under --data-dir",
    "imagefolder": "JPEG tree --data-dir/{train,val|test}/<class>/*.jpg, decoded by DALI to a center-cropped canvas",
}
TORCHVISION_PREFIX = "torchvision:"
FLAG = "--dataset"
#: the forms --dataset takes, for its help and its errors
DATASET_FORMS = (f"{' | '.join(DATASETS)}, torchvision:<Class> (MNIST, FashionMNIST, SVHN, CIFAR10, STL10, ... on disk "
                 f"under --data-dir), or package.module:factory (returning (train, test[, classes]))")
#: options that change how data is read, not what it is (the data bytes are hashed anyway)
_NOT_IN_FINGERPRINT = ("data_dir", "device", "batch_size", "stream")
_EMPTY = inspect.Parameter.empty


def _loader(name: str):
    if name == "embedded":
        from roarfast.data.embedded import load_embedded

        return load_embedded
    if name in ("cifar10", "cifar100"):
        from roarfast.data.cifar import load_cifar

        return load_cifar
    from roarfast.data.imagefolder import load_imagefolder

    return load_imagefolder


def load_dataset(name="embedded", data_dir=None, **options):
    """Loads a dataset into memory (a roarfast.data.Dataset).

    Args:
        name: a built-in name ("embedded", "cifar10", "cifar100", "imagefolder"), "torchvision:<Class>",
            "package.module:factory", or (from Python) a factory, a (train, test[, classes]) object or a
            Dataset (returned as it is).
        data_dir: the files' root (not used by "embedded"; a factory gets it when it takes `data_dir`).
        options: the loader's keyword arguments (embedded: num_train, num_test, seed, copies; cifar: download;
            imagefolder: resize, crop, skip_bad, device, stream; torchvision: the class's own; a factory: its
            own); `val_seed` picks the validation split (default: the option `seed`, else 0).

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
    if not isinstance(name, str):
        return _from_object(name, data_dir, options, val_seed)
    spec = name.strip()
    if spec.startswith(OBJECT_PREFIX):
        raise UserError(f"{FLAG} {spec}: this dataset was a Python object given to roarfast.Study; the command line "
                        f"cannot load it: pass the same data again, roarfast.Study(run_dir, dataset=...), or name a "
                        f"loader: {FLAG} package.module:factory")
    if spec in DATASETS:
        return _load_builtin(spec, data_dir, options, val_seed)
    if spec.startswith(TORCHVISION_PREFIX):
        from roarfast.data.torchvision_sets import load_torchvision, options_of

        class_name = spec[len(TORCHVISION_PREFIX):]
        if data_dir is None:
            raise UserError(f"{FLAG} {spec} needs --data-dir (torchvision's files are read from there; nothing is "
                            f"downloaded)")
        resolved = _options(spec, options_of(class_name), options)
        train, test = load_torchvision(class_name, data_dir, **resolved)
        return _make(spec, train, test, resolved, val_seed)
    if is_import_path(spec):
        return _from_factory(spec, import_object(spec, FLAG), data_dir, options, val_seed)
    raise UserError(f"{FLAG} should be {DATASET_FORMS}, got {spec!r}")


def _load_builtin(name: str, data_dir, options: dict, val_seed):
    from roarfast.data.base import make_dataset

    load = _loader(name)
    params = inspect.signature(load).parameters
    unknown = sorted(set(options) - set(params) - {"data_dir"})
    if unknown:
        known = sorted(set(params) - {"data_dir", "name"})
        raise UserError(f"unknown option(s) {', '.join(unknown)} for dataset {name!r}; it takes {', '.join(known)}")
    for key, value in options.items():  # the kind here; the loader checks the range
        check_like(f"--data-option {key}", value, params[key].default)
    if name != "embedded":
        if data_dir is None:
            raise UserError(f"dataset {name!r} needs --data-dir ({DATASETS[name]})")
        options["data_dir"] = str(data_dir)
    if name in ("cifar10", "cifar100"):
        options["name"] = name
    resolved = {key: p.default for key, p in params.items() if p.default is not inspect.Parameter.empty}
    resolved.update(options)
    train, test = load(**resolved)
    fingerprint_options = {key: value for key, value in resolved.items() if key not in _NOT_IN_FINGERPRINT}
    fingerprint_options["val_seed"] = val_seed
    read_options = {key: value for key, value in resolved.items() if key in _NOT_IN_FINGERPRINT and key != "data_dir"}
    return make_dataset(name, train, test, fingerprint_options, seed=val_seed, read_options=read_options)


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
