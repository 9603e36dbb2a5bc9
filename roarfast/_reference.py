"""Plain-PyTorch versions of the custom ops: the oracle for tests and the naive baseline for
benchmarks. Never a substitute for a kernel at run time.
"""

import torch


def reduce_channels(scores: torch.Tensor, reduction: str) -> torch.Tensor:
    """[B,C,H,W] -> [B,H,W] by "sum_sq" | "abs_sum" | "max" (NaN propagates), in float32."""
    s = scores.float()
    if reduction == "sum_sq":
        return (s * s).sum(1)
    if reduction == "abs_sum":
        return s.abs().sum(1)
    if reduction == "max":
        out = s.amax(1)
        return torch.where(s.isnan().any(1), torch.full_like(out, float("nan")), out)
    raise ValueError(f"unknown reduction {reduction!r}")


def rank(scores: torch.Tensor, reduction: str | None = None) -> torch.Tensor:
    """Same contract as roarfast.ops.rank, returned as int64: argsort + scatter."""
    if reduction is None:
        reduction = "sum_sq" if scores.dim() == 4 else "none"
    s = scores.float() if reduction in ("none", "value") else reduce_channels(scores, reduction)
    flat = s.flatten(1)
    nan = flat.isnan()
    # Two stable sorts: by descending score, then NaN last; ties keep the lower index first.
    order = torch.argsort(-flat.masked_fill(nan, 0.0), dim=1, stable=True)
    order = order.gather(1, torch.argsort(nan.gather(1, order).to(torch.uint8), dim=1, stable=True))
    ranks = torch.empty_like(order)
    ranks.scatter_(1, order, torch.arange(flat.shape[1], device=flat.device).expand_as(order))
    return ranks.view(s.shape)


def _replaced(ranks: torch.Tensor, k, keep: bool) -> torch.Tensor:
    """bool [B,1|C,H,W]: the units a mask replaces, for k an int, fraction or Tensor[B]."""
    from roarfast.ops import units_for_fraction

    units = ranks[0].numel()
    if isinstance(k, float):
        k = units_for_fraction(k, units)
    k = torch.as_tensor(k, dtype=torch.int64, device=ranks.device).expand(ranks.shape[0])
    r = ranks.long()
    r = r[:, None] if r.dim() == 3 else r
    kk = k.view(-1, 1, 1, 1)
    return r >= kk if keep else r < kk


def mask(images: torch.Tensor, ranks: torch.Tensor, k, fill, keep: bool = False) -> torch.Tensor:
    """Same contract as roarfast.ops.mask: torch.where over a broadcast rank comparison."""
    fill = torch.as_tensor(fill, dtype=torch.float32, device=images.device)
    fill = fill.round().clamp(0, 255).to(torch.uint8) if images.dtype == torch.uint8 else fill.to(images.dtype)
    return torch.where(_replaced(ranks, k, keep), fill.view(1, -1, 1, 1), images)


def mask_normalize(images: torch.Tensor, ranks, k=None, fill=None, keep: bool = False, *, mean, std,
                   out_dtype: torch.dtype = torch.float32, channels_last: bool = False) -> torch.Tensor:
    """Same contract as roarfast.ops.mask_normalize: normalize in float32, then torch.where."""
    mean = torch.as_tensor(mean, dtype=torch.float32, device=images.device).view(1, -1, 1, 1)
    std = torch.as_tensor(std, dtype=torch.float32, device=images.device).view(1, -1, 1, 1)
    x = (images.float() / 255.0 - mean) / std
    if ranks is not None:
        fill = torch.as_tensor(fill, dtype=torch.float32, device=images.device).view(1, -1, 1, 1)
        x = torch.where(_replaced(ranks, k, keep), fill, x)
    x = x.to(out_dtype)
    return x.contiguous(memory_format=torch.channels_last if channels_last else torch.contiguous_format)


def mask_scores(images: torch.Tensor, scores: torch.Tensor, k, fill, keep: bool = False, reduction=None):
    """Same contract as roarfast.ops.mask_scores: argsort ranks, then mask."""
    return mask(images, rank(scores, reduction), k, fill, keep)
