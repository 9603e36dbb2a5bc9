"""One training run of a classifier, top to bottom, as airbench's `main` reads: `train_classifier` runs the
parts in order, each in the module named after what it holds. Data: the splits on the device as uint8, masked
there for a cell (roarfast.train.masking), batches drawn by index, shuffled, flipped and shifted with the run's
own generator (roarfast.train.loop.Steps). Model: built under the run's seed, fitted to its first training
images where it asks (below: a `Member`, one model's part of a run). Optimizer and schedule: SGD with Nesterov
momentum, warmup then cosine decay (or airbench's piecewise-linear schedule and bias learning rate), in the
`TrainState` a step updates (roarfast.train.state). The loop: autocast, fp16 loss scaling, an EMA of the
weights or airbench's lookahead (roarfast.train.loop). Evaluation and selection: each epoch's validation
accuracy, the best epoch's weights (or, recipe.select "last", the last epoch's) kept and tested at the end, with
the recipe's test-time views (roarfast.train.evaluation, roarfast.train.views).

Every setting is the Recipe's (roarfast.recipe.effective_recipe); what is fixed is named with its reason where it
is used. The one loop `train_states` advances one model or several: roarfast.train.group trains cells together
through these same parts, fused into one network (roarfast.train.fused) or on CUDA streams
(roarfast.train.streams); under torchrun each rank trains its share of every batch (roarfast.train.parallel).

A network may declare two hooks: `init_from_images(images)`, called with its first `init_images` training
images (dataset order, masked as it trains, not augmented) before the first step (a whitening stem fitted on
the data), and `start_epoch(epoch)` before each epoch (parts frozen on a schedule).
"""

import time
from dataclasses import dataclass, field

import torch

from roarfast.models import resolve_model
from roarfast.modes import mode_of
from roarfast.common.progress import progress_bar
from roarfast.recipe import Recipe
from roarfast.train.evaluation import Selection, selected_test_accs
from roarfast.train.loop import Steps, train_states
from roarfast.train.masking import Masking, split_loaders
from roarfast.train.parallel import distributed
from roarfast.train.state import new_state


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
    selection: Selection
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
