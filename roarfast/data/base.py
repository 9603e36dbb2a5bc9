"""The in-memory dataset every stage works on: uint8 images per split, labels, optional ground-truth
masks, the held-out validation indices, per-channel statistics and a fingerprint of it all."""

import hashlib
from dataclasses import dataclass, field

import torch

from roarfast.fingerprint import canonical_json

#: share of the train split held out for validation (model selection; never the test split)
VAL_FRACTION = 0.1
#: fixed stream for the validation split, so it depends only on the dataset's seed
_VAL_STREAM = 0x5EED_0A1


@dataclass
class ImageSet:
    """One split.

    images (Tensor[N, C, H, W]): uint8, CPU. labels (Tensor[N]): int64. masks (Tensor[N, H, W] or None):
    bool ground-truth importance. classes: class names, index = label.
    """

    images: torch.Tensor
    labels: torch.Tensor
    masks: torch.Tensor | None
    classes: list[str]

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


@dataclass
class Dataset:
    """A dataset as the pipeline sees it; `mean`/`std` are per channel in [0, 1] pixel space, computed
    on the train split; `val_index` (int64 Tensor[V]) indexes the train split."""

    name: str
    train: ImageSet
    test: ImageSet
    val_index: torch.Tensor
    mean: tuple
    std: tuple
    fingerprint: str
    options: dict = field(default_factory=dict)

    @property
    def num_classes(self) -> int:
        return len(self.train.classes)

    @property
    def channels(self) -> int:
        return self.train.images.shape[1]

    @property
    def image_size(self) -> int:
        return self.train.images.shape[-1]

    @property
    def train_index(self) -> torch.Tensor:
        """int64 Tensor[N_train - V]: the train-split indices not held out for validation, ascending."""
        keep = torch.ones(len(self.train), dtype=torch.bool)
        keep[self.val_index] = False
        return keep.nonzero().flatten()

    def split(self, name: str) -> ImageSet:
        if name == "train":
            return self.train
        if name == "test":
            return self.test
        raise ValueError(f"split should be 'train' or 'test', got {name!r}")


def channel_stats(images: torch.Tensor, chunk: int = 4096) -> tuple[tuple, tuple]:
    """Per-channel mean and (population) std in [0, 1] of uint8 Tensor[N, C, H, W], in float64 chunks."""
    c = images.shape[1]
    total = torch.zeros(c, dtype=torch.float64)
    total_sq = torch.zeros(c, dtype=torch.float64)
    for start in range(0, images.shape[0], chunk):
        block = images[start:start + chunk].to(torch.float64).div_(255.0)
        total += block.sum(dim=(0, 2, 3))
        total_sq += block.square().sum(dim=(0, 2, 3))
    count = images.shape[0] * images.shape[2] * images.shape[3]
    mean = total / count
    std = (total_sq / count - mean.square()).clamp_min(0.0).sqrt().clamp_min(1e-3)
    return tuple(float(v) for v in mean), tuple(float(v) for v in std)


def val_split(n: int, seed: int, fraction: float = VAL_FRACTION) -> torch.Tensor:
    """Seeded random held-out indices of a train split of n images (at least one), sorted."""
    count = max(1, int(round(fraction * n)))
    gen = torch.Generator().manual_seed(seed * 1_000_003 + _VAL_STREAM)
    return torch.randperm(n, generator=gen)[:count].sort().values


def fingerprint(name: str, options: dict, train: ImageSet, test: ImageSet) -> str:
    """sha256 hex of the name, the options and every image, label and mask byte of both splits."""
    digest = hashlib.sha256()
    digest.update(canonical_json({"name": name, "options": options}).encode("ascii"))
    for part in (train, test):
        digest.update(str(tuple(part.images.shape)).encode("ascii"))
        digest.update(part.images.contiguous().numpy().tobytes())
        digest.update(part.labels.contiguous().numpy().tobytes())
        if part.masks is not None:
            digest.update(part.masks.contiguous().numpy().tobytes())
        digest.update(canonical_json(part.classes).encode("utf-8"))
    return digest.hexdigest()


def make_dataset(name: str, train: ImageSet, test: ImageSet, options: dict, seed: int = 0) -> Dataset:
    """Wraps two splits: statistics from train, a seeded validation split, the fingerprint."""
    if train.images.shape[1:] != test.images.shape[1:]:
        raise ValueError(f"train and test images should have one shape, got {tuple(train.images.shape[1:])} "
                         f"and {tuple(test.images.shape[1:])}")
    if train.classes != test.classes:
        raise ValueError(f"train and test should have the same classes, got {train.classes} and {test.classes}")
    mean, std = channel_stats(train.images)
    return Dataset(name=name, train=train, test=test, val_index=val_split(len(train), seed), mean=mean, std=std,
                   fingerprint=fingerprint(name, options, train, test), options=dict(options))
