"""ROAD's noisy linear imputation as a ROAR/KAR fill (DESIGN.md section 11): the removed pixels of
uint8 images imputed from their kept neighbours in [0, 1] pixel space, then normalized for the model.
The loaders call it instead of the constant fill of ops.mask_normalize.
"""

import torch

from roarfast import ops
from roarfast.errors import UserError
from roarfast.fills import ROAD_FILL

#: std of the imputation noise in [0, 1] pixel units (the ROAD paper's default)
ROAD_NOISE = 0.01
#: images imputed per call when a whole split is filled at once: bounds the solver's working memory
ROAD_CHUNK = 1024


def is_road(fill) -> bool:
    """True for the imputation fill ("road"); a constant fill is a sequence of numbers."""
    if not isinstance(fill, str):
        return False
    if fill != ROAD_FILL:
        raise ValueError(f"fill should be a sequence of numbers or {ROAD_FILL!r}, got {fill!r}")
    return True


def removed_pixels(ranks: torch.Tensor, fraction: float, keep: bool) -> torch.Tensor:
    """bool Tensor[B, H, W]: the pixels a ROAR (keep=False) or KAR (keep=True) fraction replaces."""
    if ranks.dim() != 3:
        raise UserError(f"--fill {ROAD_FILL} imputes whole pixels and needs pixel ranks [N, H, W], got ranks of "
                        f"shape {tuple(ranks.shape)} (extract with --granularity pixel)")
    k = ops.units_for_fraction(fraction, ranks.shape[1] * ranks.shape[2])
    ranks = ops.ranks_as_int32(ranks)
    return ranks >= k if keep else ranks < k


def road_normalize(images: torch.Tensor, ranks: torch.Tensor, fraction: float, keep: bool, *, mean, std,
                   ids: torch.Tensor, out_dtype=torch.float32, channels_last: bool = False,
                   seed: int = 0) -> torch.Tensor:
    """uint8 images (Tensor[B, C, H, W]) with the removed pixels imputed, as (x / 255 - mean) / std.

    ids (int64 Tensor[B]): each image's index in its split, the key of its noise, so an image is
    filled the same in every epoch and batch. mean, std: Tensor[C] on the images' device.
    """
    # imputed in pixel units centred on the dataset mean: the solve commutes with the shift, and an image
    # with nothing kept (no known neighbour anywhere) then takes impute's 0 = the dataset's channel mean
    x = images.float() / 255.0 - mean.view(1, -1, 1, 1)
    x = ops.impute(x, removed_pixels(ranks, fraction, keep), noise=ROAD_NOISE, seed=seed,
                    ids=ids.to(torch.int64))
    x = x / std.view(1, -1, 1, 1)
    return x.to(out_dtype).contiguous(memory_format=torch.channels_last if channels_last else torch.contiguous_format)
