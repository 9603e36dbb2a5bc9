"""compute_maps: every requested estimator's maps for one batch, shared work done once."""

from collections.abc import Sequence

import torch
from torch import nn

from roarfast.methods import registry
from roarfast.methods.captum_adapter import captum_maps
from roarfast.methods.model_context import attribution_mode, predicted_class
from roarfast.methods.params import ExplainBatch, MethodParams


def compute_maps(model: nn.Module, batch: ExplainBatch, methods: str | Sequence[str],
                 params: MethodParams | None = None) -> dict[str, torch.Tensor]:
    """Attribution maps of `batch` for each method (names as parse_methods accepts them).

    Returns {canonical name: float32 Tensor[B, C, H, W] or Tensor[B, 1, H, W]} (unreduced; ops.rank
    reduces them), on batch.x's device. The model runs in eval mode with frozen parameters; both are
    restored after. The explained class is found once and shared; sg/sg-sq/var of one base come from
    one set of noisy samples.
    """
    params = params or MethodParams()
    names = registry.parse_methods(methods)
    builtin = [registry.get(name) for name in names if not name.startswith(registry.CAPTUM_PREFIX)]
    maps = {}
    with attribution_mode(model):
        modes = {estimator.target for estimator in builtin} | ({"given"} if len(builtin) < len(names) else set())
        target = _explained_class(model, batch, params, modes)
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


def _explained_class(model, batch, params, modes: set[str]) -> torch.Tensor | None:
    """Labels, or the predicted classes; None when no method needs them up front (registry.TARGET_MODES)."""
    if params.target == "label":
        return batch.target.to(batch.x.device)
    return predicted_class(model, batch.x, params.autocast_dtype) if "given" in modes else None
