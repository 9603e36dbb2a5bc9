"""load_dataset: one entry point for every dataset name the CLI accepts."""

import inspect
from pathlib import Path

from roarfast.data.base import Dataset, make_dataset
from roarfast.errors import UserError
from roarfast.options import check_like

#: dataset names and what they are
DATASETS = {
    "embedded": "procedural 32x32 images with ground-truth masks (no files needed)",
    "cifar10": "CIFAR-10 in torchvision's on-disk format under --data-dir",
    "cifar100": "CIFAR-100 in torchvision's on-disk format under --data-dir",
    "imagefolder": "JPEG tree --data-dir/{train,val|test}/<class>/*.jpg, decoded by DALI to a center-cropped canvas",
}
#: options that change how data is read, not what it is (the data bytes are hashed anyway)
_NOT_IN_FINGERPRINT = ("data_dir", "device", "batch_size", "stream")


def _loader(name: str):
    if name == "embedded":
        from roarfast.data.embedded import load_embedded

        return load_embedded
    if name in ("cifar10", "cifar100"):
        from roarfast.data.cifar import load_cifar

        return load_cifar
    from roarfast.data.imagefolder import load_imagefolder

    return load_imagefolder


def load_dataset(name: str = "embedded", data_dir=None, **options) -> Dataset:
    """Loads a dataset into memory.

    Args:
        name: "embedded", "cifar10", "cifar100" or "imagefolder".
        data_dir: the files' root (not used by "embedded").
        options: the loader's keyword arguments (embedded: num_train, num_test, seed, copies; cifar: download;
            imagefolder: resize, crop, skip_bad, device, stream); `val_seed` picks the validation split (default: the
            embedded dataset's seed, else 0).

    Returns:
        Dataset whose fingerprint covers the name, every option (defaults included) and the data.
    """
    if name not in DATASETS:
        raise UserError(f"dataset should be one of {', '.join(DATASETS)}, got {name!r}")
    load = _loader(name)
    params = inspect.signature(load).parameters
    val_seed = options.pop("val_seed", options.get("seed", 0))
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
    ds = make_dataset(name, train, test, fingerprint_options, seed=val_seed, read_options=read_options)
    ds.data_dir = None if data_dir is None else str(Path(data_dir).expanduser().resolve())
    return ds
