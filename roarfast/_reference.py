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
