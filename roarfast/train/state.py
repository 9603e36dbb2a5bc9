"""The state of a training: per model a `Member` (its masked loaders, its generator, its flips, its selection
and history), built under the model's own seed, and a `TrainState`, what one step updates (network, EMA,
optimizer, schedule, loss scale, lookahead) for one member, or for several fused into one network
(roarfast.train.fused); so several models advance side by side exactly as each would alone.

A network may declare two hooks, called here and by the loop: `init_from_images(images)` with its first
`init_images` training images (dataset order, masked as it trains, not augmented) before the first step (a
whitening stem fitted on the data), and `start_epoch(epoch)` before each epoch (parts frozen on a schedule).
"""

import copy
import math
from dataclasses import dataclass, field

import torch

from roarfast.recipe import Recipe
from roarfast.train.masking import Masking, split_loaders
from roarfast.train.parallel import data_parallel

#: lookahead (airbench): the weights are pulled to their slow copy every this many steps
LOOKAHEAD_EVERY = 5
#: ...with the slow copy's weight LOOKAHEAD_DECAY ** LOOKAHEAD_EVERY x (step / total) ** LOOKAHEAD_POWER: the
#: pull grows from nothing to 0.77 as training ends
LOOKAHEAD_DECAY = 0.95
LOOKAHEAD_POWER = 3
#: the "linear" schedule (airbench): from this share of lr up to lr over the warmup, then down to END of it
LINEAR_START, LINEAR_END = 0.2, 0.07


@dataclass
class Selection:
    """The epoch with the best validation accuracy so far: its accuracy, its number (0: none yet) and the
    evaluated model's weights then, on the CPU."""

    val_acc: float = -1.0
    epoch: int = 0
    weights: dict | None = None

    def offer(self, val_acc: float, epoch: int, model) -> None:
        """Keeps `model`'s weights (an nn.Module, or a function returning its state dict) when `val_acc` beats
        the best so far (the earliest epoch wins a tie)."""
        if val_acc > self.val_acc:
            state = model.state_dict() if isinstance(model, torch.nn.Module) else model()
            self.val_acc, self.epoch = val_acc, epoch
            self.weights = {k: v.detach().to("cpu", copy=True) for k, v in state.items()}


@dataclass(eq=False)
class Member:
    """One model's own part of a training: `net`, its network (the result, whose weights a fused training sets
    at the end); `loaders` {"train", "test"} of its (masked) images; `generator`, its data order and
    augmentation; `flips`, with alternating flips, whether each training image is flipped in odd epochs (None
    otherwise); the best epoch so far and one history entry per epoch (epoch, lr, train_loss, train_acc,
    val_acc, seconds)."""

    net: torch.nn.Module
    loaders: dict
    generator: torch.Generator
    flips: torch.Tensor | None = None
    selection: Selection = field(default_factory=Selection)
    history: list = field(default_factory=list)


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


def lr_at(step: int, total: int, recipe: Recipe) -> float:
    """Learning-rate factor at `step` of `total`. "cosine": linear warmup from 0.1 to 1, then cosine to 0;
    "linear": from LINEAR_START to 1 over the warmup, then linearly to LINEAR_END at the last step."""
    if recipe.schedule == "linear":
        warm = int(recipe.warmup * total)
        if step < warm:
            return LINEAR_START + (1.0 - LINEAR_START) * step / warm
        return 1.0 + (LINEAR_END - 1.0) * (step - warm) / max(1, total - warm)
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


def init_from_data(net: torch.nn.Module, loader, index: torch.Tensor) -> None:
    """Runs net's `init_from_images` hook, if it has one, on its first `init_images` samples of `index`."""
    init = getattr(net, "init_from_images", None)
    if init is not None:
        count = min(int(net.init_images), index.shape[0])
        (images, _), = loader.batches(index[:count], count)  # one batch, in memory or streamed alike
        with torch.no_grad():
            init(images)


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


def new_member(dataset, architecture, recipe: Recipe, device: torch.device, seed: int,
               masking: Masking | None) -> Member:
    """A fresh `architecture` (a ModelSpec) under `seed`, its loaders masked by `masking`, its data hook run,
    its generator seeded (and, with alternating flips, the flips of its odd epochs drawn from it)."""
    loaders = split_loaders(dataset, masking, device, recipe)
    net = init_model(architecture, dataset, seed, device, recipe)
    init_from_data(net, loaders["train"], dataset.train_index)
    generator = torch.Generator(device=device).manual_seed(seed)
    flips = None
    if recipe.flip and recipe.alternate_flips:
        flips = torch.rand(len(dataset.train), generator=generator, device=device) < 0.5
    return Member(net=net, loaders=loaders, generator=generator, flips=flips)


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
