"""One training run of a classifier, top to bottom, as airbench's `main` reads: `train_classifier` runs the
parts in order, and the sections below it hold them in that order. Data: the splits on the device as uint8,
masked there for a cell (roarfast.train.masking), batches drawn by index, shuffled, flipped and shifted with
the run's own generator. Model: built under the run's seed, fitted to its first training images where it asks
(below). Optimizer and schedule: SGD with Nesterov momentum, warmup then cosine decay (or airbench's
piecewise-linear schedule and bias learning rate). The loop: autocast, fp16 loss scaling, an EMA of the
weights or airbench's lookahead. Evaluation and selection: each epoch's validation accuracy, the best epoch's
weights (or, recipe.select "last", the last epoch's) kept and tested at the end, with the recipe's test-time
views (roarfast.train.views).

Every setting is the Recipe's (roarfast.recipe.effective_recipe); what is fixed is named here with its reason.
A model's part of a run is a `Member` and what a step updates a `TrainState`, so the one loop `train_states`
advances one model or several: roarfast.train.group trains cells together through these same parts, fused
into one network (roarfast.train.fused) or on CUDA streams (roarfast.train.streams); under torchrun each rank
trains its share of every batch (roarfast.train.parallel).

A network may declare two hooks: `init_from_images(images)`, called with its first `init_images` training
images (dataset order, masked as it trains, not augmented) before the first step (a whitening stem fitted on
the data), and `start_epoch(epoch)` before each epoch (parts frozen on a schedule).
"""

import copy
import math
import time
from contextlib import nullcontext
from dataclasses import dataclass, field

import torch

from roarfast.data.augment import Augment
from roarfast.errors import UserError
from roarfast.models import resolve_model
from roarfast.modes import mode_of
from roarfast.common.memory import release_after_batch, release_freed_memory
from roarfast.common.progress import progress_bar
from roarfast.recipe import Recipe, autocast
from roarfast.train.fused import fused_forward_loss, member_logits, member_weights, stack_weights
from roarfast.train.masking import Masking, split_loaders
from roarfast.train.parallel import all_reduce_sum, average_buffers, data_parallel, distributed
from roarfast.train.streams import join_streams, on_stream
from roarfast.train.views import alternate_flips, tta_logits

#: the "cosine" schedule's warmup ramps up from this share of lr: small first steps while a fresh network's
#: gradients are at their largest
COSINE_START = 0.1
#: the "linear" schedule (airbench): from this share of lr up to lr over the warmup, then down to END of it
LINEAR_START, LINEAR_END = 0.2, 0.07
#: lookahead (airbench): the weights are pulled to their slow copy every this many steps
LOOKAHEAD_EVERY = 5
#: ...with the slow copy's weight LOOKAHEAD_DECAY ** LOOKAHEAD_EVERY x (step / total) ** LOOKAHEAD_POWER: the
#: pull grows from nothing to 0.77 as training ends
LOOKAHEAD_DECAY = 0.95
LOOKAHEAD_POWER = 3


@dataclass
class TrainResult:
    """The model selected on val (eval mode, on the training device) and its accuracies."""

    model: torch.nn.Module
    val_acc: float
    test_acc: float
    epochs: int  # epochs run
    seconds: float
    best_epoch: int = 0
    history: list = field(default_factory=list)  # per epoch: epoch, lr, train_loss, train_acc, val_acc, seconds
    trained_as: str = "alone"  # or with others (roarfast.train.group): "loop", "fused", "streams" (+ compile mode)


def train_classifier(dataset, model, recipe: Recipe, device, seed: int = 0, masking: Masking | None = None,
                     progress: bool = True) -> TrainResult:
    """Trains `model` (what roarfast.models.resolve_model takes: a name, an import path, a ModelSpec) from
    scratch on dataset's train split minus val, selects the epoch with the best val accuracy (recipe.select
    "last": the last epoch; an empty val split is then allowed, and never evaluated), and reports
    that model's test accuracy. With `masking`, every train, val and test image is masked
    (ops.mask_normalize) before augmentation.

    Deterministic on CPU for a given seed (model init, shuffling and augmentation are seeded).
    """
    architecture = resolve_model(model)
    device = torch.device(device)
    started = time.perf_counter()
    rank, world = distributed()
    steps = Steps.of(dataset, recipe, world)  # data: the batches of an epoch
    member = new_member(dataset, architecture, recipe, device, seed, masking)  # data on the device, the model
    state = new_state(member.net, [member], recipe, device, steps.total)  # optimizer, schedule, EMA, lookahead
    desc = f"train {architecture.name}"
    if masking is not None:
        desc += f" ({mode_of(masking.keep, masking.mask_only)} {masking.fraction:g})"
    with progress_bar(total=steps.total * steps.batch_size, desc=desc, unit="img",
                      enabled=progress and rank == 0) as bar:
        train_states([state], dataset, recipe, steps, bar)  # the loop, each epoch evaluated and selected
    test_acc = selected_test_accs(state, torch.arange(len(dataset.test)))[0]
    return member.result(test_acc, recipe.epochs, time.perf_counter() - started)


# ------------------------------------------------------------------------------------------------------------ data

@dataclass(frozen=True)
class Steps:
    """The steps of a training run: `batch_size` images each (over all ranks), `per_epoch` an epoch (the
    last partial batch dropped), `total` over the recipe's epochs."""

    batch_size: int
    per_epoch: int
    total: int

    @classmethod
    def of(cls, dataset, recipe: Recipe, world: int) -> "Steps":
        train_images = dataset.train_index.shape[0]
        batch_size = min(recipe.batch_size, train_images)
        if batch_size % world:
            raise UserError(f"batch size should be a multiple of the {world} data-parallel ranks, got {batch_size}")
        per_epoch = train_images // batch_size
        return cls(batch_size=batch_size, per_epoch=per_epoch, total=recipe.epochs * per_epoch)


def _start_epoch(state: "TrainState", dataset, steps: Steps, spec, epoch: int, shard) -> list:
    """Puts the state's network in training mode, runs its start_epoch hook and returns an iterator of
    (x, y) batches per member: its shuffle and augmentation, and with alternating flips, the flips of this
    epoch (each image flipped in every other epoch, starting from a random half)."""
    state.model.train()
    hook = getattr(state.net, "start_epoch", None)
    if hook is not None:
        hook(epoch)
    iterators = []
    for member in state.members:
        loader = member.loaders["train"]
        batches = loader.batches(dataset.train_index, steps.batch_size, shuffle=True, augment_spec=spec,
                                 generator=member.generator, drop_last=True, shard=shard, with_index=True)
        iterators.append(alternate_flips(batches, member.flips, epoch))
    return iterators


# ----------------------------------------------------------------------------------------------------------- model

@dataclass(eq=False)
class Member:
    """One model's own part of a training: `net`, its network (the result, whose weights a fused training sets
    at the end); `loaders` {"train", "test"} of its (masked) images; `generator`, its data order and
    augmentation; its best epoch so far (`selection`); `flips`, with alternating flips, whether each training
    image is flipped in odd epochs (None otherwise); one history entry per epoch (epoch, lr, train_loss,
    train_acc, val_acc, seconds)."""

    net: torch.nn.Module
    loaders: dict
    generator: torch.Generator
    selection: "Selection"
    flips: torch.Tensor | None = None
    history: list = field(default_factory=list)

    def result(self, test_acc: float, epochs: int, seconds: float, trained_as: str = "alone") -> TrainResult:
        """The TrainResult of its network, once its selected weights were tested (selected_test_accs)."""
        return TrainResult(model=self.net, val_acc=self.selection.val_acc, test_acc=test_acc, epochs=epochs,
                           seconds=seconds, best_epoch=self.selection.epoch, history=self.history,
                           trained_as=trained_as)


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
    return Member(net=net, loaders=loaders, generator=generator, selection=Selection(), flips=flips)


def init_model(model, dataset, seed, device, recipe):
    """A fresh network of `model` (what resolve_model takes) for the dataset, initialized under `seed`."""
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


# ------------------------------------------------------------------------------------------ optimizer and schedule

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


# -------------------------------------------------------------------------------------------------------- the loop

def train_states(states: list[TrainState], dataset, recipe: Recipe, steps: Steps, bar, failed: dict | None = None):
    """Every epoch of `recipe` for each of `states` (models sharing the recipe and the dataset's splits):
    each member's batches come from its own loader, drawn with its own generator, so a member advances
    exactly as it would alone; each is scored and selected at every epoch's end.

    `failed` None: an error ends the training. A dict: a state whose step or evaluation raises is dropped
    and its error kept there (state -> exception) while the others go on."""
    rank, world = distributed()
    flip = recipe.flip and not recipe.alternate_flips  # alternating flips: chosen per image below, not drawn
    spec = Augment(flip=flip, translate=recipe.translate, pad=recipe.pad) if (flip or recipe.translate) else None
    images = steps.per_epoch * steps.batch_size
    alive = list(states)

    def guarded(state, action, *args):
        """action(*args); with `failed`, an exception is kept there and the state leaves the training."""
        if failed is None:
            return action(*args)
        try:
            return action(*args)
        except (KeyboardInterrupt, UserError):
            raise
        except Exception as err:  # noqa: BLE001  (this state's error: the group goes on without it)
            failed[state] = err
            alive.remove(state)
            return None

    for epoch in range(1, recipe.epochs + 1):
        started = time.perf_counter()
        tallies = {state: [EpochTally(state.device) for _ in state.members] for state in alive}
        batches = {state: guarded(state, _start_epoch, state, dataset, steps, spec, epoch, (rank, world))
                   for state in list(alive)}
        for _ in range(steps.per_epoch):
            for state in list(alive):
                guarded(state, _step, state, batches[state], tallies[state], steps.batch_size)
            bar.update(steps.batch_size * sum(len(state.members) for state in alive))
        join_streams(alive)
        entries = [entry for state in list(alive)
                   for entry in guarded(state, end_epoch, state, epoch, dataset.val_index, tallies[state], images,
                                        started) or []]
        if entries:
            bar.set_postfix(loss="/".join(f"{e['train_loss']:.3f}" for e in entries),
                            val="/".join(f"{e['val_acc']:.1%}" for e in entries))


def _step(state: TrainState, iterators: list, tallies: list, batch_size: int) -> None:
    """One step of `state` on the next batch of each member's iterator (on the state's stream, if it has one),
    its losses and correct counts added to the members' tallies."""
    pairs = [next(iterator) for iterator in iterators]
    stream = on_stream(state.stream, [t for pair in pairs for t in pair]) if state.stream is not None else nullcontext()
    with stream:
        for tally, (loss, correct) in zip(tallies, train_step(state, pairs)):
            tally.add(loss, correct, batch_size)


def train_step(state: TrainState, batches: list) -> list:
    """One optimizer step of `state` on one batch per member ((x Tensor[B, C, H, W], y int64 Tensor[B]) each);
    returns per member the batch's mean loss (detached) and its count of correct predictions (int64), both
    0-d on the device. Several members fused into one network: their batches side by side along the
    channels, one loss summed over them (roarfast.train.fused)."""
    recipe = state.recipe
    with autocast(state.device, recipe):
        if len(state.members) == 1:
            x, y = batches[0]
            logits = state.model(x)
            loss = state.loss_fn(logits.float(), y)
            losses, correct = [loss], [(logits.argmax(1) == y).sum()]
        else:
            loss, losses, correct = fused_forward_loss(state, batches)
    state.optimizer.zero_grad(set_to_none=True)
    state.scaler.scale(loss).backward()
    state.scaler.step(state.optimizer)
    state.scaler.update()
    state.scheduler.step()
    if state.ema is not None:
        ema_update(state.ema, state.net, recipe.ema_decay)
    if state.lookahead is not None:
        lookahead_update(state)
    return [(member_loss.detach(), member_correct) for member_loss, member_correct in zip(losses, correct)]


@torch.no_grad()
def ema_update(ema, model, decay: float):
    """ema <- decay * ema + (1 - decay) * model for float parameters; buffers (BN statistics) copied."""
    for e, p in zip(ema.parameters(), model.parameters()):
        e.lerp_(p, 1.0 - decay)
    for e, b in zip(ema.buffers(), model.buffers()):
        e.copy_(b)


@torch.no_grad()
def lookahead_update(state: TrainState) -> None:
    """After the step just taken: every LOOKAHEAD_EVERY steps the slow copy moves towards the weights and the
    weights are set to it; after the last step the weights are set to the slow copy."""
    step = state.scheduler.last_epoch
    pull, last = step % LOOKAHEAD_EVERY == 0, step >= state.total_steps
    if not (pull or last):
        return
    keep = LOOKAHEAD_DECAY ** LOOKAHEAD_EVERY * (step / state.total_steps) ** LOOKAHEAD_POWER
    current = state.net.state_dict()
    for name, slow in state.lookahead.items():
        if pull:
            slow.lerp_(current[name], 1.0 - keep)
        current[name].copy_(slow)


class EpochTally:
    """The loss and correct predictions of one model's steps in an epoch, summed on the device (no sync)."""

    def __init__(self, device):
        self.loss_sum = torch.zeros((), device=device)
        self.correct = torch.zeros((), dtype=torch.int64, device=device)

    def add(self, loss: torch.Tensor, correct: torch.Tensor, images: int) -> None:
        self.loss_sum += loss * images
        self.correct += correct


# ------------------------------------------------------------------------------------------------------ evaluation

@torch.no_grad()
def accuracy(model, loader, index, recipe: Recipe, tta: int = 0) -> float:
    """Top-1 accuracy of model on loader's samples `index` (int64 Tensor[M]), no augmentation (test-time views
    at level `tta`); under a process group each rank scores a share and the counts are summed."""
    return member_accuracies(model, [loader], index, recipe, tta)[0]


@torch.no_grad()
def member_accuracies(model, loaders: list, index, recipe: Recipe, tta: int = 0) -> list:
    """Top-1 accuracy of each member of `model` (one network, or len(loaders) fused) on its own loader's samples
    `index`, no augmentation (test-time views at level `tta`)."""
    was_training = model.training
    model.eval()
    device = loaders[0].device
    members = len(loaders)
    correct = torch.zeros(members, dtype=torch.int64, device=device)
    shard = distributed()
    # the training steps' freed blocks go back to the system before an evaluation, a large evaluation batch's after
    # it, and the evaluation's at its end: a CPU process then holds one batch's blocks, not those of the training
    # steps and of every batch it evaluated (roarfast.common.memory)
    release_freed_memory()
    for batches in zip(*(loader.batches(index, recipe.eval_batch_size, shard=shard) for loader in loaders)):
        x = batches[0][0] if members == 1 else torch.cat([x for x, _ in batches], 1)
        y = torch.stack([y for _, y in batches], 1)  # [B, K]
        with autocast(device, recipe):
            logits = tta_logits(model, x, tta, recipe.pad)
        logits = logits.unsqueeze(1) if members == 1 else member_logits(logits, members)
        correct += (logits.argmax(2) == y).sum(0)
        input_bytes = x.nbytes
        del batches, x, y, logits  # freed before the loaders make the next batch
        release_after_batch(input_bytes)
    release_freed_memory()
    model.train(was_training)
    return [float(c) / max(1, index.shape[0]) for c in all_reduce_sum(correct)]


# ------------------------------------------------------------------------------------------------------- selection

@dataclass
class Selection:
    """The epoch with the best validation accuracy so far: its accuracy, its number (0: none yet) and the
    evaluated model's weights then, on the CPU."""

    val_acc: float = -1.0
    epoch: int = 0
    weights: dict | None = None

    def offer(self, val_acc: float, epoch: int, model, always: bool = False) -> None:
        """Keeps `model`'s weights (an nn.Module, or a function returning its state dict) when `val_acc` beats
        the best so far (the earliest epoch wins a tie), or `always`."""
        if always or val_acc > self.val_acc:
            state = model.state_dict() if isinstance(model, torch.nn.Module) else model()
            self.val_acc, self.epoch = val_acc, epoch
            self.weights = {k: v.detach().to("cpu", copy=True) for k, v in state.items()}


def end_epoch(state: TrainState, epoch: int, val_index: torch.Tensor, tallies: list, images: int,
              started: float) -> list:
    """Scores the evaluated model (EMA or network) of each member on the samples `val_index` of its train
    loader, offers it to the member's selection and appends the epoch's history entries (returned); `tallies`
    per member, `images`: the images an epoch trained each member on over all ranks, `started`: its
    perf_counter start."""
    selected = state.evaluated
    average_buffers(selected, distributed()[1])
    members = state.members
    if val_index.numel():
        val_accs = member_accuracies(selected, [m.loaders["train"] for m in members], val_index, state.recipe)
    elif state.recipe.select == "last":
        val_accs = [math.nan] * len(members)
    else:
        raise UserError("an empty validation split leaves nothing to select the epoch by: train with "
                        "--recipe select=last")
    # "last": only the final epoch is offered, and kept whatever its accuracy (no copy of the others' weights)
    offered = state.recipe.select != "last" or epoch == state.recipe.epochs
    entries = []
    for k, (member, tally, val_acc) in enumerate(zip(members, tallies, val_accs)):
        entry = {"epoch": epoch, "lr": state.optimizer.param_groups[0]["lr"],
                 "train_loss": float(all_reduce_sum(tally.loss_sum)) / images,
                 "train_acc": float(all_reduce_sum(tally.correct)) / images,
                 "val_acc": val_acc, "seconds": time.perf_counter() - started}
        member.history.append(entry)
        weights = selected if len(members) == 1 else (
            lambda k=k: member_weights(selected.state_dict(), k, len(members)))
        if offered:
            member.selection.offer(val_acc, epoch, weights, always=state.recipe.select == "last")
        entries.append(entry)
    return entries


def selected_test_accs(state: TrainState, test_index: torch.Tensor) -> list:
    """Loads each member's selected weights into its network (and, fused, into the network stepped), leaves
    them in eval mode and returns each member's accuracy on the samples `test_index` of its test loader."""
    members = state.members
    for member in members:
        member.net.load_state_dict(member.selection.weights)
        member.net.eval()
    tested = members[0].net
    if len(members) > 1:
        state.net.load_state_dict(stack_weights([m.selection.weights for m in members]))
        tested = state.net
    return member_accuracies(tested, [m.loaders["test"] for m in members], test_index, state.recipe, state.recipe.tta)
