"""Datasets (embedded, CIFAR-10/100, JPEG trees) held in memory as uint8 or streamed from files, and loaders."""

from roarfast.data.base import Dataset, FileSet, ImageSet, channel_stats, fingerprint, make_dataset, val_split
from roarfast.data.registry import DATASETS, load_dataset

__all__ = ["DATASETS", "Dataset", "FileSet", "ImageSet", "channel_stats", "fingerprint", "load_dataset", "make_dataset",
           "val_split"]
