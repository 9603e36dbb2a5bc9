"""The math of the gradient estimators on the normalized input: grad, ig (integrated gradients), gb (guided
backprop), registered in roarfast/methods/estimators/gradients.py.

`input_attribution` computes any of the three for arbitrary rows; the SmoothGrad family
(ensembles.py) calls it on noisy samples.
"""

from contextlib import contextmanager

import torch
from torch import nn

from roarfast.errors import UserError
from roarfast.methods.model_context import logits_of, selected_logits


def logit_gradient(model: nn.Module, x: torch.Tensor, target: torch.Tensor | None, params) -> torch.Tensor:
    """d logit_target / d x in one forward/backward; x (Tensor[N, C, H, W]), target int64 Tensor[N] or
    None (each row's predicted class). Returns float32 Tensor[N, C, H, W]."""
    x = x.detach().requires_grad_(True)
    logits = logits_of(model, x, params.autocast_dtype)
    (grad,) = torch.autograd.grad(selected_logits(logits, target), x)
    return grad.float()


@contextmanager
def guided_relus(model: nn.Module):
    """Guided backprop for the duration: every nn.ReLU passes back only positive gradients (the ReLU's own
    backward already zeroes them where its forward input was <= 0)."""
    relus = [module for module in model.modules() if isinstance(module, nn.ReLU)]
    if not relus:
        raise UserError(f"gb (guided backprop) needs nn.ReLU modules to hook, and {type(model).__name__} has "
                        "none (functional or other activations cannot be guided)")
    # Full backward hooks refuse in-place modules; the out-of-place ReLU computes the same values.
    inplace = [(relu, relu.inplace) for relu in relus]
    handles = []
    try:
        for relu in relus:
            relu.inplace = False
            handles.append(relu.register_full_backward_hook(_clamp_positive))
        yield
    finally:
        for handle in handles:
            handle.remove()
        for relu, flag in inplace:
            relu.inplace = flag


def _clamp_positive(module, grad_input, grad_output):
    if grad_input[0] is None:
        return None
    return (grad_input[0].clamp(min=0),)


def integrated_gradients(model: nn.Module, x: torch.Tensor, target: torch.Tensor, params) -> torch.Tensor:
    """(x - baseline) * mean over Riemann-midpoint steps of d logit / d(baseline + alpha (x - baseline)).

    x (Tensor[N, C, H, W]); steps go through the model together, chunked to params.max_chunk_elements.
    Returns float32 Tensor[N, C, H, W].
    """
    steps = params.ig_steps
    baseline = params.baseline(x)
    delta = x - baseline
    alphas = (torch.arange(steps, device=x.device, dtype=x.dtype) + 0.5) / steps
    per_step = x.numel()
    chunk = max(1, min(steps, params.max_chunk_elements // per_step))
    total = torch.zeros(x.shape, dtype=torch.float32, device=x.device)
    for start in range(0, steps, chunk):
        alpha = alphas[start:start + chunk].view(-1, 1, 1, 1, 1)
        path = (baseline + alpha * delta).flatten(0, 1)
        grads = logit_gradient(model, path, target.repeat(alpha.shape[0]), params)
        total += grads.view(alpha.shape[0], *x.shape).sum(0)
    return total * (delta.float() / steps)


def input_attribution(model: nn.Module, x: torch.Tensor, target: torch.Tensor | None, params,
                      base: str) -> torch.Tensor:
    """The `base` ("grad", "ig", "gb") attribution of x (Tensor[N, C, H, W]) as float32 Tensor[N, C, H, W].
    target: int64 Tensor[N]; None (predicted, from the same forward) is allowed for grad and gb."""
    if base == "grad":
        return logit_gradient(model, x, target, params)
    if base == "gb":
        with guided_relus(model):
            return logit_gradient(model, x, target, params)
    if base == "ig":
        if target is None:
            raise ValueError("ig needs the explained classes up front: its path points are not the input")
        return integrated_gradients(model, x, target, params)
    raise ValueError(f"base should be one of grad, ig, gb, got {base!r}")


def rows_per_input(base: str, params) -> int:
    """Forward/backward rows one input costs under `base` (IG evaluates every step)."""
    return params.ig_steps if base == "ig" else 1

