"""The training loop (`train_states`): every epoch of a recipe for one model or several (each a `TrainState`
of roarfast.train.state): its batches (`Steps`: shuffled, flipped and shifted with each member's own
generator), a step each (`train_step`: autocast, fp16 loss scaling, the EMA or airbench's lookahead), and at
each epoch's end each member scored and selected (roarfast.train.evaluation.end_epoch).
"""

import time
from contextlib import nullcontext
from dataclasses import dataclass

import torch

from roarfast.data.augment import Augment
from roarfast.errors import UserError
from roarfast.recipe import Recipe, autocast
from roarfast.train.evaluation import end_epoch
from roarfast.train.fused import fused_forward_loss
from roarfast.train.parallel import distributed
from roarfast.train.state import TrainState
from roarfast.train.streams import join_streams, on_stream
from roarfast.train.views import alternate_flips

#: lookahead (airbench): the weights are pulled to their slow copy every this many steps
LOOKAHEAD_EVERY = 5
#: ...with the slow copy's weight LOOKAHEAD_DECAY ** LOOKAHEAD_EVERY x (step / total) ** LOOKAHEAD_POWER: the
#: pull grows from nothing to 0.77 as training ends
LOOKAHEAD_DECAY = 0.95
LOOKAHEAD_POWER = 3


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


def _start_epoch(state: TrainState, dataset, steps: Steps, spec, epoch: int, shard) -> list:
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
