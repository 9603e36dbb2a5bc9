"""An image tree whose listing is ImageNet's size, for dry runs that plan the paper's grid without ImageNet (the
tests and benchmarks/plan_imagenet.py): 1,281,167 train and 50,000 val images in 1000 classes, of which the first
two files of each split are real JPEGs of ImageNet's common sizes (500x375, 500x333: they differ, so the tree
takes ImageNet's 256/224 canvas, read from their headers), the rest names that no reader opens. `listing` stands
in for roarfast.data.imagefolder.scan_tree."""

import numpy as np
from PIL import Image

from roarfast.data import cache

#: ImageNet's splits: the train split (of which roarfast holds a tenth out for validation) and the 50,000
#: validation images, the test split
IMAGENET = {"train": 1_281_167, "val": 50_000}
CLASSES = 1000
SIZES = [(500, 375), (500, 333)]


def write_first_files(root) -> None:
    """The real JPEGs at the head of each split of the tree at `root`."""
    for split in IMAGENET:
        for i, (width, height) in enumerate(SIZES):
            (root / split / "n00000").mkdir(parents=True, exist_ok=True)
            Image.fromarray(np.full((height, width, 3), 90, np.uint8)).save(root / split / "n00000" / f"{i}.JPEG")


def listing(split_dir, classes=None):
    """scan_tree's answer for an ImageNet-sized split: (classes, its Listing, labels), classes in equal shares."""
    n = IMAGENET[split_dir.name]
    names = [f"n{c:05d}" for c in range(CLASSES)]
    labels = [i * CLASSES // n for i in range(n)]
    files = [f"{names[label]}/{i}.JPEG" for i, label in enumerate(labels)]
    return names, cache.Listing(split_dir, files, [(110_000, 1, 1)] * n), labels
