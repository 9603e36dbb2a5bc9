"""A seeded, stratified subset of a dataset's splits: `--data-option num_train=N` / `num_test=N` for every
dataset form (built-ins, torchvision:, factories, objects), applied once by the dataset resolver
(roarfast.data.registry) to what a loader returns, or handed to a loader that reads files one by one
(imagefolder) so that it decodes only the chosen files; the same rows either way.

Each class keeps its share of the split (largest remainders, ties to the lower class index); within a class
the rows are drawn by a generator seeded from the dataset's seed and the split, and kept in their order. A
loader that takes num_train / num_test itself (embedded: it generates that many) keeps its own meaning.
"""

from dataclasses import dataclass, replace

import numpy as np
import torch

from roarfast.errors import UserError

#: the option of each split
OPTIONS = {"train": "num_train", "test": "num_test"}
#: separates the subset's random stream from the other draws keyed by the dataset's seed
_STREAM = 0x5B5E7


@dataclass(frozen=True)
class Subset:
    """How many rows of each split to keep (None: all) and the seed they are drawn with."""

    num_train: int | None = None
    num_test: int | None = None
    seed: int = 0

    @classmethod
    def take(cls, options: dict, seed: int) -> "Subset":
        """The subset options popped from `options` (a copy of what --data-option gave), each checked to be a
        positive int."""
        counts = {}
        for split, option in OPTIONS.items():
            value = options.pop(option, None)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise UserError(f"--data-option {option} should be a positive int (images of the {split} split to "
                                f"keep), got {value!r}")
            counts[option] = value
        return cls(**counts, seed=seed)

    def __bool__(self) -> bool:
        return self.num_train is not None or self.num_test is not None

    def recorded(self) -> dict:
        """What the fingerprint adds: the counts given (none when no subset is asked, so that the datasets
        loaded whole keep their fingerprints)."""
        return {option: getattr(self, option) for option in OPTIONS.values() if getattr(self, option) is not None}

    def rows(self, split: str, labels, classes: int, where: str) -> np.ndarray | None:
        """Sorted indices of the rows of `split` (labels: int per row) to keep, or None to keep all; a
        UserError naming the option and its limits when the split has fewer rows, or the count is smaller
        than the number of classes."""
        if getattr(self, OPTIONS[split]) is None:
            return None
        labels = np.asarray(labels, dtype=np.int64)
        count = self.count(split, len(labels), classes, where)
        return stratified(labels, count, np.random.default_rng([self.seed, _STREAM, list(OPTIONS).index(split)]))

    def count(self, split: str, total: int, classes: int, where: str) -> int:
        """The rows of `split` (`total` of them) kept; a UserError naming the option and its limits when the
        split has fewer rows, or the count is smaller than the number of classes."""
        option = OPTIONS[split]
        count = getattr(self, option)
        if count is None:
            return total
        if count > total:
            raise UserError(f"--data-option {option}={count}: the {split} split of {where} holds {total} images; "
                            f"at most {total}")
        if count < classes:
            raise UserError(f"--data-option {option}={count}: {where} has {classes} classes, so a stratified "
                            f"subset needs at least {classes} images (one per class)")
        return count


def stratified(labels: np.ndarray, count: int, rng: np.random.Generator) -> np.ndarray:
    """Sorted indices of `count` rows, each class's share of them proportional to its rows (largest
    remainders, ties to the lower class), drawn within each class by `rng`."""
    values, sizes = np.unique(labels, return_counts=True)
    quotas = count * sizes / len(labels)
    take = np.floor(quotas).astype(np.int64)
    order = np.lexsort((values, -(quotas - take)))  # largest remainder first, then the lower class
    take[order[:count - int(take.sum())]] += 1
    chosen = [rng.permutation(np.flatnonzero(labels == value))[:n] for value, n in zip(values, take)]
    return np.sort(np.concatenate(chosen))


def subset_split(split, rows: np.ndarray | None):
    """The rows `rows` (None: all) of an ImageSet, in order. One decoded from files keeps its files' digest:
    with the subset options in the fingerprint, it still names the data."""
    if rows is None:
        return split
    index = torch.from_numpy(rows)
    return replace(split, images=split.images[index], labels=split.labels[index],
                   masks=None if split.masks is None else split.masks[index], stats=None)
