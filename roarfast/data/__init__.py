"""Datasets (embedded, CIFAR-10/100, JPEG trees, torchvision's, a user's factory or objects) held in memory as
uint8 or streamed from files, and loaders.

The package imports torch only when a dataset is loaded or built (the built-ins' loaders, registered by the light
modules of roarfast.data.builtin, import what reads or makes the images when called), so that the CLI can import
the resolver (roarfast.data.registry) at once.
"""

import importlib

from roarfast.data.registry import DATASETS, load_dataset, outline_dataset

#: what the package hands out from modules that need torch
_LAZY = {name: "roarfast.data.base" for name in ("Dataset", "FileSet", "ImageSet", "channel_stats", "fingerprint",
                                                 "make_dataset", "val_split")}


def __getattr__(name):
    if name not in _LAZY:
        raise AttributeError(f"module 'roarfast.data' has no attribute {name!r}")
    return getattr(importlib.import_module(_LAZY[name]), name)


__all__ = ["DATASETS", "Dataset", "FileSet", "ImageSet", "channel_stats", "fingerprint", "load_dataset", "make_dataset",
           "outline_dataset", "val_split"]
