"""The state of one model's training: everything a step updates and an epoch's end reads, built under the
model's own seed (initialization, data order, augmentation) and with its own masked loaders, so that
several states can advance side by side exactly as each would alone."""

import copy
import math
from dataclasses import dataclass, field

import torch

from roarfast.recipe import Recipe
from roarfast.train.masking import Masking, split_loaders
from roarfast.train.parallel import data_parallel


@dataclass
class Selection:
    """The epoch with the best validation accuracy so far: its accuracy, its number (0: none yet) and the
    evaluated model's weights then, on the CPU."""

    val_acc: float = -1.0
    epoch: int = 0
    weights: dict | None = None

    def offer(self, val_acc: float, epoch: int, model: torch.nn.Module) -> None:
        """Keeps `model`'s weights when `val_acc` beats the best so far (the earliest epoch wins a tie)."""
        if val_acc > self.val_acc:
            self.val_acc, self.epoch = val_acc, epoch
            self.weights = {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()}


@dataclass
class TrainState:
    """One model's training.

    net: the network (its weights are the result); model: what a step calls (net, or its DDP wrapper);
    ema: the EMA copy of net (None when the recipe has no EMA); optimizer, scheduler (per step), scaler
    (fp16 loss scaling; disabled otherwise), loss_fn; generator: this model's data order and augmentation;
    loaders: {"train", "test"} of its (masked) images; selection: the best epoch so far; history: one entry
    per epoch (epoch, lr, train_loss, train_acc, val_acc, seconds).
    """

    net: torch.nn.Module
    model: torch.nn.Module
    ema: torch.nn.Module | None
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LRScheduler
    scaler: torch.amp.GradScaler
    loss_fn: torch.nn.Module
    generator: torch.Generator
    loaders: dict
    recipe: Recipe
    device: torch.device
    selection: Selection = field(default_factory=Selection)
    history: list = field(default_factory=list)

    @property
    def evaluated(self) -> torch.nn.Module:
        """The model evaluated and selected on val: the EMA copy when there is one, else the network."""
        return self.ema if self.ema is not None else self.net


def lr_at(step: int, total: int, recipe: Recipe) -> float:
    """Learning-rate factor at `step` of `total`: linear warmup from 0.1 to 1, then cosine to 0."""
    warm = max(1, int(round(recipe.warmup * total)))
    if step < warm:
        return 0.1 + 0.9 * step / warm
    return 0.5 * (1.0 + math.cos(math.pi * (step - warm) / max(1, total - warm)))


def init_model(model, dataset, seed, device, recipe):
    """A fresh network of `model` (what resolve_model takes) for the dataset, initialized under `seed`."""
    from roarfast.models import resolve_model

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = resolve_model(model).build(dataset.num_classes, dataset.image_size, dataset.channels)
    model = model.to(device)
    if recipe.channels_last:
        model = model.to(memory_format=torch.channels_last)
    return model


def _optimizer(model, recipe):
    """SGD with Nesterov momentum; no weight decay on biases and norm parameters (1-D tensors)."""
    decay = [p for p in model.parameters() if p.dim() > 1]
    no_decay = [p for p in model.parameters() if p.dim() <= 1]
    return torch.optim.SGD([{"params": decay, "weight_decay": recipe.weight_decay},
                            {"params": no_decay, "weight_decay": 0.0}],
                           lr=recipe.lr, momentum=recipe.momentum, nesterov=True)


def new_state(dataset, architecture, recipe: Recipe, device: torch.device, seed: int, masking: Masking | None,
              total_steps: int) -> TrainState:
    """The state of a fresh `architecture` (a ModelSpec) before its first step of `total_steps`, trained on
    dataset masked by `masking`, under `seed`."""
    loaders = split_loaders(dataset, masking, device, recipe)
    net = init_model(architecture, dataset, seed, device, recipe)
    ema = copy.deepcopy(net).eval() if recipe.ema_decay is not None else None
    model = data_parallel(net, device)
    optimizer = _optimizer(model, recipe)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: lr_at(step, total_steps, recipe))
    loss_fn = torch.nn.CrossEntropyLoss(label_smoothing=recipe.label_smoothing)
    # fp16 gradients underflow without loss scaling; bf16 has fp32's range and needs none
    scaler = torch.amp.GradScaler(device.type, enabled=recipe.amp == "fp16")
    generator = torch.Generator(device=device).manual_seed(seed)
    return TrainState(net=net, model=model, ema=ema, optimizer=optimizer, scheduler=scheduler, scaler=scaler,
                      loss_fn=loss_fn, generator=generator, loaders=loaders, recipe=recipe, device=device)
