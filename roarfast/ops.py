"""The custom ops of roarfast._C, with shapes. Each has a CPU and a CUDA kernel (csrc/ops/) and a
fake implementation so that torch.compile can trace it. Plain-PyTorch versions of the same math,
for tests and benchmarks only, live in roarfast._reference.
"""

import torch

from roarfast import _extension

_extension.load()

#: the channel reductions of a [B,C,H,W] map to one score per pixel (DESIGN.md section 2);
#: "value" ranks every C*H*W value as a unit of its own.
CHANNEL_REDUCTIONS = ("sum_sq", "abs_sum", "max", "value")


def rank_dtype(units: int) -> torch.dtype:
    """dtype of the ranks of an image with `units` ranked units: uint16 when they fit, else int32."""
    return torch.uint16 if units <= 65536 else torch.int32


def rank(scores: torch.Tensor, reduction: str | None = None) -> torch.Tensor:
    """Ranks the units of each image by descending score: rank 0 = most important.

    Ties go to the lower flat index first (TF top_k order); NaN ranks last.

    Args:
        scores (Tensor[B, H, W] or Tensor[B, C, H, W]): float32, float16 or bfloat16
            (float64 is ranked at float32 precision).
        reduction: for [B,C,H,W] scores, how channels fold into one pixel score: "sum_sq" (default),
            "abs_sum", "max"; or "value" to rank all C*H*W values. Must be None/"none" for [B,H,W].

    Returns:
        ranks (Tensor[B, H, W], or Tensor[B, C, H, W] for "value"): uint16 when a image has at most
        65536 units, else int32.
    """
    if reduction is None:
        reduction = "sum_sq" if scores.dim() == 4 else "none"
    if scores.dtype == torch.float64:
        scores = scores.float()
    return torch.ops.roarfast.rank.default(scores, reduction)


@torch.library.register_fake("roarfast::rank")
def _rank_fake(scores, reduction="none"):
    if reduction in ("none", "value"):
        shape = scores.shape
    else:
        shape = (scores.shape[0], scores.shape[-2], scores.shape[-1])
    units = 1
    for size in shape[1:]:
        units *= size
    return scores.new_empty(shape, dtype=rank_dtype(units))
