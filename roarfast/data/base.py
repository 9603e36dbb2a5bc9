"""The dataset every stage works on: per split either uint8 images in memory (ImageSet) or the image
files of a tree too large for memory (FileSet, decoded batch by batch), labels, optional ground-truth
masks, the held-out validation indices, per-channel statistics and a fingerprint of it all."""

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

import torch

from roarfast.common.fingerprint import canonical_json

#: share of the train split held out for validation (model selection; never the test split)
VAL_FRACTION = 0.1
#: fixed stream for the validation split, so it depends only on the dataset's seed
_VAL_STREAM = 0x5EED_0A1


@dataclass
class ImageSet:
    """One split.

    images (Tensor[N, C, H, W]): uint8, CPU. labels (Tensor[N]): int64. masks (Tensor[N, H, W] or None):
    bool ground-truth importance. classes: class names, index = label. digest: sha256 of the source
    files the images were decoded from (FileSet.digest), or None; when set the fingerprint hashes it
    instead of the pixels, so a tree loaded into memory and the same tree streamed are one dataset. stats:
    channel_stats(images) where the loader has it already (a tree's cached canvases), else None (measured).
    """

    images: torch.Tensor
    labels: torch.Tensor
    masks: torch.Tensor | None
    classes: list[str]
    digest: str | None = None
    stats: tuple | None = None

    def __post_init__(self):
        if self.images.dtype != torch.uint8 or self.images.dim() != 4:
            raise ValueError(f"images should be a uint8 Tensor[N, C, H, W], got {self.images.dtype} "
                             f"{tuple(self.images.shape)}")
        n = self.images.shape[0]
        if self.labels.dtype != torch.int64 or tuple(self.labels.shape) != (n,):
            raise ValueError(f"labels should be an int64 Tensor[{n}], got {self.labels.dtype} "
                             f"{tuple(self.labels.shape)}")
        if self.masks is not None and (self.masks.dtype != torch.bool
                                       or tuple(self.masks.shape) != (n, *self.images.shape[2:])):
            raise ValueError(f"masks should be a bool Tensor[{n}, H, W] matching the images, got "
                             f"{self.masks.dtype} {tuple(self.masks.shape)}")

    def __len__(self) -> int:
        return self.images.shape[0]

    @property
    def shape(self) -> tuple:
        """(C, H, W) of one image."""
        return tuple(self.images.shape[1:])

    def channel_stats(self) -> tuple[tuple, tuple]:
        return self.stats if self.stats is not None else channel_stats(self.images)


@dataclass
class FileSet:
    """One split kept on disk: image files decoded to a (C, H, W) canvas batch by batch (streaming).

    root: the split's folder; files: paths relative to root, row i = files[i]; labels (Tensor[N]): int64;
    classes: class names; shape: (C, H, W) of the decoded canvas; canvas: the loader's decoding options
    (e.g. resize and crop); digest: sha256 hex of the files' names and bytes in row order; stats: per-channel
    (mean, std) in [0, 1] of the decoded canvases (measured on the train split only, else None).
    """

    root: Path
    files: list[str]
    labels: torch.Tensor
    classes: list[str]
    shape: tuple
    canvas: dict
    digest: str
    stats: tuple | None = None
    masks = None  # no ground truth in file trees

    def __post_init__(self):
        if self.labels.dtype != torch.int64 or tuple(self.labels.shape) != (len(self.files),):
            raise ValueError(f"labels should be an int64 Tensor[{len(self.files)}], got {self.labels.dtype} "
                             f"{tuple(self.labels.shape)}")

    def __len__(self) -> int:
        return len(self.files)

    def channel_stats(self) -> tuple[tuple, tuple]:
        if self.stats is None:
            raise ValueError(f"no channel statistics were measured for the files of {self.root}")
        return self.stats


class Canvas:
    """The canvas of anything whose `train` split has a shape (C, H, W): a Dataset, or a dry run's outline of
    one (roarfast.planning.preview.DataOutline)."""

    @property
    def channels(self) -> int:
        return self.train.shape[0]

    @property
    def image_size(self) -> int:
        return self.train.shape[-1]


@dataclass
class Dataset(Canvas):
    """A dataset as the pipeline sees it; `mean`/`std` are per channel in [0, 1] pixel space, computed
    on the train split; `val_index` (int64 Tensor[V]) indexes the train split."""

    name: str
    train: ImageSet
    test: ImageSet
    val_index: torch.Tensor
    mean: tuple
    std: tuple
    fingerprint: str
    options: dict = field(default_factory=dict)  # what the data is: part of the fingerprint
    read_options: dict = field(default_factory=dict)  # how it is read (decoder, streaming): not hashed
    data_dir: str | None = None  # the absolute folder the files were read from (None: nothing read from files)

    @property
    def num_classes(self) -> int:
        return len(self.train.classes)

    @property
    def streamed(self) -> bool:
        """Whether the splits stay on disk and are decoded batch by batch."""
        return isinstance(self.train, FileSet)

    @property
    def train_index(self) -> torch.Tensor:
        """int64 Tensor[N_train - V]: the train-split indices not held out for validation, ascending."""
        keep = torch.ones(len(self.train), dtype=torch.bool)
        keep[self.val_index] = False
        return keep.nonzero().flatten()

    def split(self, name: str) -> "ImageSet | FileSet":
        if name == "train":
            return self.train
        if name == "test":
            return self.test
        raise ValueError(f"split should be 'train' or 'test', got {name!r}")


class ChannelSums:
    """Running per-channel sums of [0, 1] pixel values and their squares (float64), batch by batch."""

    def __init__(self, channels: int):
        self.total = torch.zeros(channels, dtype=torch.float64)
        self.total_sq = torch.zeros(channels, dtype=torch.float64)
        self.count = 0

    def add(self, images: torch.Tensor) -> None:
        """Adds uint8 Tensor[B, C, H, W] (on any device)."""
        block = images.to(torch.float64).div_(255.0)
        self.total += block.sum(dim=(0, 2, 3)).cpu()
        self.total_sq += block.square().sum(dim=(0, 2, 3)).cpu()
        self.count += images.shape[0] * images.shape[2] * images.shape[3]

    def to_dict(self) -> dict:
        return {"total": self.total.tolist(), "total_sq": self.total_sq.tolist(), "count": self.count}

    @classmethod
    def from_dict(cls, data: dict) -> "ChannelSums":
        sums = cls(len(data["total"]))
        sums.total = torch.tensor(data["total"], dtype=torch.float64)
        sums.total_sq = torch.tensor(data["total_sq"], dtype=torch.float64)
        sums.count = int(data["count"])
        return sums

    def stats(self) -> tuple[tuple, tuple]:
        """Per-channel mean and population std (at least 1e-3, so a flat channel still normalizes)."""
        mean = self.total / max(1, self.count)
        std = (self.total_sq / max(1, self.count) - mean.square()).clamp_min(0.0).sqrt().clamp_min(1e-3)
        return tuple(float(v) for v in mean), tuple(float(v) for v in std)


def channel_stats(images: torch.Tensor, chunk: int = 4096) -> tuple[tuple, tuple]:
    """Per-channel mean and (population) std in [0, 1] of uint8 Tensor[N, C, H, W], in float64 chunks."""
    sums = ChannelSums(images.shape[1])
    for start in range(0, images.shape[0], chunk):
        sums.add(images[start:start + chunk])
    return sums.stats()


def val_split(n: int, seed: int, fraction: float = VAL_FRACTION) -> torch.Tensor:
    """Seeded random held-out indices of a train split of n images (at least one), sorted."""
    count = max(1, int(round(fraction * n)))
    gen = torch.Generator().manual_seed(seed * 1_000_003 + _VAL_STREAM)
    return torch.randperm(n, generator=gen)[:count].sort().values


def fingerprint(name: str, options: dict, train, test) -> str:
    """sha256 hex of the name, the options, and per split its shape, labels, classes and either the source
    files' digest (a FileSet, or an ImageSet decoded from files) or every image and mask byte."""
    digest = hashlib.sha256()
    digest.update(canonical_json({"name": name, "options": options}).encode("ascii"))
    for part in (train, test):
        digest.update(str((len(part), *part.shape)).encode("ascii"))
        if part.digest is not None:
            digest.update(bytes.fromhex(part.digest))
        else:
            digest.update(part.images.contiguous().numpy().tobytes())
        digest.update(part.labels.contiguous().numpy().tobytes())
        if part.masks is not None:
            digest.update(part.masks.contiguous().numpy().tobytes())
        digest.update(canonical_json(part.classes).encode("utf-8"))
    return digest.hexdigest()


def make_dataset(name: str, train, test, options: dict, seed: int = 0, read_options: dict | None = None) -> Dataset:
    """Wraps two splits (both ImageSet or both FileSet): statistics from train, a seeded validation split,
    the fingerprint."""
    if type(train) is not type(test):
        raise ValueError(f"train and test should both be ImageSet or both FileSet, got {type(train).__name__} "
                         f"and {type(test).__name__}")
    if train.shape != test.shape:
        raise ValueError(f"train and test images should have one shape, got {train.shape} and {test.shape}")
    if train.classes != test.classes:
        raise ValueError(f"train and test should have the same classes, got {train.classes} and {test.classes}")
    mean, std = train.channel_stats()
    return Dataset(name=name, train=train, test=test, val_index=val_split(len(train), seed), mean=mean, std=std,
                   fingerprint=fingerprint(name, options, train, test), options=dict(options),
                   read_options=dict(read_options or {}))
