"""The training loop: the states of the models it trains advanced batch by batch (train_step), each member
scored and selected at every epoch's end (end_epoch), then each selected model tested (selected_test_accs).
`train_classifier` trains one model; roarfast.train.group trains several at once through the same loop."""

import time
from contextlib import nullcontext
from dataclasses import dataclass, field

import torch

from roarfast.errors import UserError
from roarfast.modes import mode_of
from roarfast.recipe import Recipe
from roarfast.train.masking import Masking
from roarfast.train.parallel import distributed
from roarfast.train.select import end_epoch, new_tally
from roarfast.train.state import TrainState
from roarfast.train.step import train_step


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


def train_classifier(dataset, model, recipe: Recipe, device, seed: int = 0, masking: Masking | None = None,
                     progress: bool = True) -> TrainResult:
    """Trains `model` (what roarfast.models.resolve_model takes: a name, an import path, a ModelSpec) from
    scratch on dataset's train split minus val, selects the epoch with the best val accuracy, and reports
    that model's test accuracy. With `masking`, every train, val and test image is masked
    (ops.mask_normalize) before augmentation.

    Deterministic on CPU for a given seed (model init, shuffling and augmentation are seeded).
    """
    from roarfast.models import resolve_model
    from roarfast.progress import progress_bar
    from roarfast.train.select import selected_test_accs
    from roarfast.train.state import new_member, new_state

    architecture = resolve_model(model)
    device = torch.device(device)
    started = time.perf_counter()
    rank, world = distributed()
    steps = Steps.of(dataset, recipe, world)
    member = new_member(dataset, architecture, recipe, device, seed, masking)
    state = new_state(member.net, [member], recipe, device, steps.total)
    desc = f"train {architecture.name}"
    if masking is not None:
        desc += f" ({mode_of(masking.keep, masking.mask_only)} {masking.fraction:g})"
    with progress_bar(total=steps.total * steps.batch_size, desc=desc, unit="img",
                      enabled=progress and rank == 0) as bar:
        train_states([state], dataset, recipe, steps, bar)
    test_acc = selected_test_accs(state, torch.arange(len(dataset.test)))[0]
    return TrainResult(model=member.net, val_acc=member.selection.val_acc, test_acc=test_acc, epochs=recipe.epochs,
                       seconds=time.perf_counter() - started, best_epoch=member.selection.epoch,
                       history=member.history)


def train_states(states: list[TrainState], dataset, recipe: Recipe, steps: Steps, bar, failed: dict | None = None):
    """Every epoch of `recipe` for each of `states` (models sharing the recipe and the dataset's splits):
    each member's batches come from its own loader, drawn with its own generator, so a member advances
    exactly as it would alone; each is scored and selected at every epoch's end.

    `failed` None: an error ends the training. A dict: a state whose step or evaluation raises is dropped
    and its error kept there (state -> exception) while the others go on."""
    from roarfast.data.augment import Augment
    from roarfast.train.streams import join_streams

    rank, world = distributed()
    flip = recipe.flip and not recipe.alternate_flips  # alternating flips: chosen per image below, not drawn
    spec = Augment(flip=flip, translate=recipe.translate) if (flip or recipe.translate) else None
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
        tallies = {state: new_tally(state) for state in alive}
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
    from roarfast.train.streams import on_stream

    pairs = [next(iterator) for iterator in iterators]
    stream = on_stream(state.stream, [t for pair in pairs for t in pair]) if state.stream is not None else nullcontext()
    with stream:
        for tally, (loss, correct) in zip(tallies, train_step(state, pairs)):
            tally.add(loss, correct, batch_size)


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
        iterators.append(_flipped(batches, member.flips, epoch))
    return iterators


def _flipped(batches, flips: torch.Tensor | None, epoch: int):
    """(x, y) of `batches` ((x, y, rows) each), with alternating flips: rows flipped where `flips` says in odd
    epochs, the others in even epochs."""
    for x, y, rows in batches:
        if flips is not None:
            chosen = flips[rows] ^ (epoch % 2 == 0)
            last = x.is_contiguous(memory_format=torch.channels_last)
            x = torch.where(chosen.view(-1, 1, 1, 1), x.flip(3), x)
            x = x.contiguous(memory_format=torch.channels_last if last else torch.contiguous_format)
        yield x, y
