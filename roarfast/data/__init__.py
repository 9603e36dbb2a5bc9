"""Datasets (embedded, CIFAR-10/100, JPEG trees) held in memory as uint8, and the device loader."""

from roarfast.data.base import Dataset, ImageSet, channel_stats, fingerprint, make_dataset, val_split
from roarfast.data.registry import DATASETS, load_dataset

__all__ = ["DATASETS", "Dataset", "ImageSet", "channel_stats", "fingerprint", "load_dataset", "make_dataset",
           "val_split"]
