"""How a model runs while it is explained: eval mode, parameters frozen (gradients flow to the input
only), optional autocast on CUDA; and which class is explained."""

from contextlib import contextmanager, nullcontext

import torch
from torch import nn

from roarfast.errors import UserError


@contextmanager
def attribution_mode(model: nn.Module | None):
    """Puts every module in eval mode and every parameter at requires_grad=False; restores both after.
    None (model-free methods only) passes through."""
    if model is None:
        yield None
        return
    modes = [(module, module.training) for module in model.modules()]
    flags = [(param, param.requires_grad) for param in model.parameters()]
    model.eval()
    for param, _ in flags:
        param.requires_grad_(False)
    try:
        yield model
    finally:
        for module, training in modes:
            module.training = training
        for param, flag in flags:
            param.requires_grad_(flag)


def autocast(device: torch.device, dtype: torch.dtype | None):
    """bf16/fp16 autocast on CUDA when asked; fp32 otherwise (CPU autocast is slower than fp32)."""
    if dtype is None or device.type != "cuda":
        return nullcontext()
    return torch.autocast("cuda", dtype=dtype)


def logits_of(model: nn.Module, x: torch.Tensor, autocast_dtype: torch.dtype | None) -> torch.Tensor:
    """model(x) checked to be Tensor[N, K] logits."""
    with autocast(x.device, autocast_dtype):
        logits = model(x)
    if not isinstance(logits, torch.Tensor) or logits.dim() != 2 or logits.shape[0] != x.shape[0]:
        got = list(logits.shape) if isinstance(logits, torch.Tensor) else type(logits).__name__
        raise UserError(f"the model should return logits Tensor[{x.shape[0]}, num_classes], got {got}")
    return logits


def predicted_class(model: nn.Module, x: torch.Tensor, autocast_dtype: torch.dtype | None) -> torch.Tensor:
    """argmax of the logits, int64 Tensor[B], for x (Tensor[B, C, H, W])."""
    with torch.no_grad():
        return logits_of(model, x, autocast_dtype).argmax(1)


def selected_logits(logits: torch.Tensor, target: torch.Tensor | None) -> torch.Tensor:
    """Sum over rows of each row's explained logit; target None = the row's argmax. Summing is exact for
    per-row gradients because rows do not interact in eval mode."""
    if target is None:
        target = logits.detach().argmax(1)
    return logits.gather(1, target[:, None]).sum()


def cam_layer_name(model: nn.Module, name: str | None) -> tuple[str, str]:
    """(dotted name of the Grad-CAM layer, where it came from): `name` (--cam-layer) when given, else the
    model's `cam_layer` attribute, else its last nn.Conv2d; a UserError when there is none of them."""
    if name is not None:
        return name, "--cam-layer"
    attribute = getattr(model, "cam_layer", None)
    if isinstance(attribute, str):
        return attribute, "the model's cam_layer"
    convs = [n for n, module in model.named_modules() if isinstance(module, nn.Conv2d)]
    if not convs:
        raise UserError(f"--cam-layer: Grad-CAM needs a conv layer, and {type(model).__name__} has no cam_layer "
                        "attribute and no nn.Conv2d; name a module with a Tensor[B, K, h, w] output")
    return convs[-1], "its last Conv2d"


def cam_layer(model: nn.Module, name: str | None) -> nn.Module:
    """The module cam_layer_name picks."""
    name, _ = cam_layer_name(model, name)
    try:
        return model.get_submodule(name)
    except AttributeError:
        names = ", ".join(n for n, _ in model.named_modules() if n)
        raise UserError(f"--cam-layer {name!r} is not a module of {type(model).__name__}; modules: {names}") from None
