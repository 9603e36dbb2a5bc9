"""ROAR/KAR masking of a training run's images (the settings of one retraining cell) and the loaders of
its train and test splits, masked as the settings say."""

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from roarfast.data.loader import pattern_loader, split_loader
from roarfast.recipe import amp_dtype

if TYPE_CHECKING:
    from roarfast.store import RankRecord


@dataclass
class Masking:
    """ROAR/KAR masking of every image before augmentation. Ranks cover the FULL splits (val is part of train).

    train_ranks (Tensor[N_train, H, W] or [N_train, C, H, W], or the RankRecord holding them), test_ranks
    (same for the test split),
    fraction in [0, 1] removed (keep=False) or kept (keep=True), fill: what replaces the removed units (a
    roarfast.fills Fill, a fill's name, or values per channel in the normalized space; None: 0, the
    training-split mean).
    """

    train_ranks: "torch.Tensor | RankRecord"
    test_ranks: "torch.Tensor | RankRecord"
    fraction: float
    keep: bool = False
    fill: object = None
    mask_only: bool = False  # the control: train on the removal pattern alone (data.loader.pattern_loader)


def split_loaders(dataset, masking: Masking | None, device, recipe) -> dict:
    """{"train": loader, "test": loader} of dataset on device, each image masked by `masking` (None: as it
    is; mask_only: its removal pattern alone), in the recipe's autocast dtype and memory format."""
    out_dtype = amp_dtype(recipe) or torch.float32
    loaders = {}
    for split in ("train", "test"):
        masked = {}
        if masking is not None and masking.mask_only:
            loaders[split] = pattern_loader(dataset, split, device, ranks=getattr(masking, f"{split}_ranks"),
                                            fraction=masking.fraction, keep=masking.keep, out_dtype=out_dtype,
                                            channels_last=recipe.channels_last)
            continue
        if masking is not None:
            masked = dict(ranks=getattr(masking, f"{split}_ranks"), fraction=masking.fraction, keep=masking.keep,
                          fill=masking.fill)
        loaders[split] = split_loader(dataset, split, device, out_dtype=out_dtype, channels_last=recipe.channels_last,
                                      **masked)
    return loaders
