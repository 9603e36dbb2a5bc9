"""compute_maps: every requested estimator's maps for one batch, shared work done once; rank_maps: maps as
ops.rank orders them."""

from collections.abc import Sequence
from dataclasses import replace

import torch
from torch import nn

from roarfast import ops
from roarfast.errors import UserError
from roarfast.methods import registry
from roarfast.methods.model_context import attribution_mode, predicted_class
from roarfast.methods.params import ExplainBatch, MethodParams
from roarfast.methods.selection import Selection


def compute_maps(model: nn.Module | None, batch: ExplainBatch, methods: str | Sequence[str] | Selection,
                 params: MethodParams | None = None) -> dict[str, torch.Tensor]:
    """Attribution maps of `batch` for each method (names as parse_methods accepts them, or a Selection: records
    a stage resolved once).

    Returns {canonical name: float32 Tensor[B, C, H, W] or Tensor[B, 1, H, W]} (unreduced; ops.rank
    reduces them), on batch.x's device. `model` may be None when no method uses it (random, sobel,
    oracle). The model runs in eval mode with frozen parameters, both restored after. The explained class
    is found once (or inside the one forward of the estimators that find it themselves); estimators that
    share work (sg/sg-sq/var of one base: one set of noisy samples) are computed by one call. Each
    estimator gets, as params.args, the arguments it takes among params.args.
    """
    params = params or MethodParams()
    records = methods.records if isinstance(methods, Selection) else registry.resolve_methods(methods)
    need = [name for name, record in records.items() if record.uses_model]
    if model is None and need:
        raise UserError(f"methods {', '.join(need)} explain a model, and model is None")
    maps = {}
    with attribution_mode(model):
        given = any(record.target_mode == "given" for record in records.values())
        target = _explained_class(model, batch, params, needed=given)
        for name, record in records.items():
            if name in maps:
                continue
            own = replace(params, args=record.call_arguments(params.args))
            if record.shared is None:
                maps[name] = record.compute(model, batch, target, own)
            else:
                wanted = [other for other in record.shared if other in records]
                maps.update(record.compute(model, batch, target, own, wanted))
    return {name: maps[name].float() for name in records}


def rank_maps(maps: torch.Tensor, reduction: str) -> torch.Tensor:
    """float maps [B,C,H,W] (or [B,1,H,W]) -> ranks (ops.rank, `reduction` folding the channels, or "value");
    single-channel maps rank their pixels directly."""
    if reduction == "value" or maps.shape[1] != 1:
        return ops.rank(maps.float().contiguous(), reduction)
    return ops.rank(maps[:, 0].float().contiguous(), "none")


def _explained_class(model, batch, params, needed: bool) -> torch.Tensor | None:
    """Labels, or the predicted classes when some method needs them up front; else None (each method that
    explains the prediction finds it in its own forward)."""
    if params.target == "label":
        return batch.target.to(batch.x.device)
    return predicted_class(model, batch.x, params.autocast_dtype) if needed else None
