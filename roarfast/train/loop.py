"""The training loop: the states of the models it trains advanced batch by batch (train_step), each
scored and selected at every epoch's end (end_epoch), then each selected model tested
(selected_test_acc)."""

import time
from dataclasses import dataclass, field

import torch

from roarfast.errors import UserError
from roarfast.modes import mode_of
from roarfast.recipe import Recipe
from roarfast.train.masking import Masking
from roarfast.train.parallel import distributed
from roarfast.train.select import end_epoch, selected_test_acc
from roarfast.train.state import TrainState, new_state
from roarfast.train.step import EpochTally, train_step


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

    architecture = resolve_model(model)
    device = torch.device(device)
    started = time.perf_counter()
    rank, world = distributed()
    steps = Steps.of(dataset, recipe, world)
    state = new_state(dataset, architecture, recipe, device, seed, masking, steps.total)
    desc = f"train {architecture.name}"
    if masking is not None:
        desc += f" ({mode_of(masking.keep, masking.mask_only)} {masking.fraction:g})"
    with progress_bar(total=steps.total * steps.batch_size, desc=desc, unit="img",
                      enabled=progress and rank == 0) as bar:
        _train([state], dataset, recipe, steps, bar)
    test_acc = selected_test_acc(state, torch.arange(len(dataset.test)))
    return TrainResult(model=state.net, val_acc=state.selection.val_acc, test_acc=test_acc, epochs=recipe.epochs,
                       seconds=time.perf_counter() - started, best_epoch=state.selection.epoch, history=state.history)


def _train(states: list[TrainState], dataset, recipe: Recipe, steps: Steps, bar) -> None:
    """Every epoch of `recipe` for each of `states` (models sharing the recipe and the dataset's splits):
    each state's step takes the next batch of its own loader, drawn with its own generator, so a state
    advances exactly as it would alone; each is scored and selected at every epoch's end."""
    from roarfast.data.augment import Augment

    rank, world = distributed()
    spec = Augment(flip=recipe.flip, translate=recipe.translate) if (recipe.flip or recipe.translate) else None
    for epoch in range(1, recipe.epochs + 1):
        started = time.perf_counter()
        tallies = []
        epoch_batches = []
        for state in states:
            state.model.train()
            tallies.append(EpochTally(state.device))
            epoch_batches.append(state.loaders["train"].batches(
                dataset.train_index, steps.batch_size, shuffle=True, augment_spec=spec, generator=state.generator,
                drop_last=True, shard=(rank, world)))
        for batches in zip(*epoch_batches):
            for state, tally, (x, y) in zip(states, tallies, batches):
                tally.add(*train_step(state, x, y), y.shape[0])
            bar.update(steps.batch_size)
        entries = [end_epoch(state, epoch, dataset.val_index, tally, steps.per_epoch * steps.batch_size, started)
                   for state, tally in zip(states, tallies)]
        bar.set_postfix(loss="/".join(f"{e['train_loss']:.3f}" for e in entries),
                        val="/".join(f"{e['val_acc']:.1%}" for e in entries))
