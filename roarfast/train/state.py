"""What one training step updates (`TrainState`, made by `new_state` before the first step): the network, its EMA
copy or lookahead's slow copy, the optimizer (SGD with Nesterov momentum; airbench's bias learning rate) and its
schedule per step (`lr_at`: warmup then cosine decay, or airbench's piecewise-linear), the fp16 loss scaler and
the loss. Every setting is the Recipe's; what is fixed is named here with its reason.
"""

import copy
import math
from dataclasses import dataclass

import torch

from roarfast.recipe import Recipe
from roarfast.train.parallel import data_parallel

#: the "cosine" schedule's warmup ramps up from this share of lr: small first steps while a fresh network's
#: gradients are at their largest
COSINE_START = 0.1
#: the "linear" schedule (airbench): from this share of lr up to lr over the warmup, then down to END of it
LINEAR_START, LINEAR_END = 0.2, 0.07


def _optimizer(model, recipe):
    """SGD with Nesterov momentum. 1-D tensors (biases, norm parameters): no weight decay, or with
    recipe.bias_lr_scale that much more learning rate and as much decay per step as the weights."""
    decay = [p for p in model.parameters() if p.dim() > 1]
    no_decay = [p for p in model.parameters() if p.dim() <= 1]
    biases = {"params": no_decay, "weight_decay": 0.0}
    if recipe.bias_lr_scale is not None:
        scale = recipe.bias_lr_scale
        biases = {"params": no_decay, "lr": recipe.lr * scale, "weight_decay": recipe.weight_decay / scale}
    return torch.optim.SGD([{"params": decay, "weight_decay": recipe.weight_decay}, biases],
                           lr=recipe.lr, momentum=recipe.momentum, nesterov=True)


def lr_at(step: int, total: int, recipe: Recipe) -> float:
    """Learning-rate factor at `step` of `total`. "cosine": linear warmup from COSINE_START to 1, then cosine to
    0; "linear": from LINEAR_START to 1 over the warmup, then linearly to LINEAR_END at the last step."""
    if recipe.schedule == "linear":
        warm = int(recipe.warmup * total)
        if step < warm:
            return LINEAR_START + (1.0 - LINEAR_START) * step / warm
        return 1.0 + (LINEAR_END - 1.0) * (step - warm) / max(1, total - warm)
    warm = max(1, int(round(recipe.warmup * total)))
    if step < warm:
        return COSINE_START + (1.0 - COSINE_START) * step / warm
    return 0.5 * (1.0 + math.cos(math.pi * (step - warm) / max(1, total - warm)))


@dataclass(eq=False)
class TrainState:
    """What one step updates, for `members` (one, or several fused into `net`).

    net: the network stepped; model: what a step calls (net, its DDP wrapper or its compiled form); ema: the
    EMA copy of net (None when the recipe has no EMA); optimizer, scheduler (per step), scaler (fp16 loss
    scaling; disabled otherwise), loss_fn; lookahead: the slow copy of net's float state (None without
    lookahead); total_steps: the steps of the whole training; stream: the CUDA stream its steps run on (None:
    the current one).
    """

    net: torch.nn.Module
    model: torch.nn.Module
    ema: torch.nn.Module | None
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LRScheduler
    scaler: torch.amp.GradScaler
    loss_fn: torch.nn.Module
    recipe: Recipe
    device: torch.device
    members: list
    total_steps: int
    lookahead: dict | None = None
    stream: object = None

    @property
    def evaluated(self) -> torch.nn.Module:
        """The model evaluated and selected on val: the EMA copy when there is one, else the network."""
        return self.ema if self.ema is not None else self.net


def new_state(net: torch.nn.Module, members: list, recipe: Recipe, device: torch.device, total_steps: int,
              compile_mode: str | None = None) -> TrainState:
    """The state that steps `net` (the member's network, or the members fused) before its first step of
    `total_steps`; `compile_mode`: torch.compile's mode for the step's forward and backward (None: eager)."""
    ema = copy.deepcopy(net).eval() if recipe.ema_decay is not None else None
    model = data_parallel(net, device)
    optimizer = _optimizer(model, recipe)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: lr_at(step, total_steps, recipe))
    loss_fn = torch.nn.CrossEntropyLoss(label_smoothing=recipe.label_smoothing)
    # fp16 gradients underflow without loss scaling; bf16 has fp32's range and needs none
    scaler = torch.amp.GradScaler(device.type, enabled=recipe.amp == "fp16")
    lookahead = None
    if recipe.lookahead:
        lookahead = {k: v.detach().clone() for k, v in net.state_dict().items() if v.is_floating_point()}
    if compile_mode is not None:
        model = torch.compile(model, mode=None if compile_mode == "default" else compile_mode)
    return TrainState(net=net, model=model, ema=ema, optimizer=optimizer, scheduler=scheduler, scaler=scaler,
                      loss_fn=loss_fn, recipe=recipe, device=device, members=members, total_steps=total_steps,
                      lookahead=lookahead)
