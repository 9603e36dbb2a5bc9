"""compute_maps: every requested estimator's maps for one batch, shared work done once."""

from collections.abc import Sequence

import torch
from torch import nn

from roarfast.errors import UserError
from roarfast.methods import registry
from roarfast.methods.captum_adapter import captum_maps
from roarfast.methods.model_context import attribution_mode, predicted_class
from roarfast.methods.params import ExplainBatch, MethodParams


def compute_maps(model: nn.Module | None, batch: ExplainBatch, methods: str | Sequence[str],
                 params: MethodParams | None = None) -> dict[str, torch.Tensor]:
    """Attribution maps of `batch` for each method (names as parse_methods accepts them).

    Returns {canonical name: float32 Tensor[B, C, H, W] or Tensor[B, 1, H, W]} (unreduced; ops.rank
    reduces them), on batch.x's device. `model` may be None when every method is model-free (random,
    sobel, oracle). The model runs in eval mode with frozen parameters, both restored after. The
    explained class is found once (or inside the one forward of grad/gb/gradcam); sg/sg-sq/var of one
    base come from one set of noisy samples.
    """
    params = params or MethodParams()
    names = registry.parse_methods(methods)
    modes = {name: _target_mode(name) for name in names}
    if model is None and any(mode != "none" for mode in modes.values()):
        need = [name for name, mode in modes.items() if mode != "none"]
        raise UserError(f"methods {', '.join(need)} explain a model, and model is None")
    maps = {}
    with attribution_mode(model):
        target = _explained_class(model, batch, params, needed="given" in modes.values())
        for name in names:
            if name in maps:
                continue
            if name.startswith(registry.CAPTUM_PREFIX):
                maps[name] = captum_maps(model, batch, target, params, name[len(registry.CAPTUM_PREFIX):])
                continue
            estimator = registry.get(name)
            if estimator.shared is None:
                maps[name] = estimator.compute(model, batch, target, params)
            else:
                wanted = [other for other in estimator.shared if other in names]
                maps.update(estimator.compute(model, batch, target, params, wanted))
    return {name: maps[name].float() for name in names}


def _target_mode(name: str) -> str:
    """registry.TARGET_MODES entry of a method; Captum methods take the classes up front."""
    return "given" if name.startswith(registry.CAPTUM_PREFIX) else registry.get(name).target


def _explained_class(model, batch, params, needed: bool) -> torch.Tensor | None:
    """Labels, or the predicted classes when some method needs them up front; else None (each method that
    explains the prediction finds it in its own forward)."""
    if params.target == "label":
        return batch.target.to(batch.x.device)
    return predicted_class(model, batch.x, params.autocast_dtype) if needed else None
