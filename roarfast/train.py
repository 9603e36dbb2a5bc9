"""Training a classifier from scratch, on the unmodified dataset (the base model) or on ROAR/KAR-masked
images (every retraining cell): data on the device, SGD with Nesterov momentum, warmup then cosine
learning rate, label smoothing, an EMA of the weights, model selection on the validation split only.

Data-parallel under torchrun (or any initialized default process group): every rank holds the data,
shuffles it identically and trains on its share of each batch with DistributedDataParallel; evaluation
is split across ranks and summed, so all ranks select the same epoch and end with the same weights.
"""

import copy
import math
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch

from roarfast.version import __version__
from roarfast.errors import UserError
from roarfast.modes import mode_of
from roarfast.options import check_choice, check_positive
from roarfast.recipe import AMP_CHOICES, Recipe, amp_dtype, check_overrides, default_model, recipe_for

if TYPE_CHECKING:
    from roarfast.store import RankRecord


@dataclass
class Masking:
    """ROAR/KAR masking of every image before augmentation. Ranks cover the FULL splits (val is part of train).

    train_ranks (Tensor[N_train, H, W] or [N_train, C, H, W], or the RankRecord holding them), test_ranks
    (same for the test split),
    fraction in [0, 1] removed (keep=False) or kept (keep=True), fill per channel in the normalized
    space (None = 0, the training-split mean) or "road" (imputed, roarfast.imputation).
    """

    train_ranks: "torch.Tensor | RankRecord"
    test_ranks: "torch.Tensor | RankRecord"
    fraction: float
    keep: bool = False
    fill: tuple | str | None = None
    mask_only: bool = False  # the control: train on the removal pattern alone (data.loader.pattern_loader)


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


def _loaders(dataset, masking, device, recipe):
    from roarfast.data.loader import pattern_loader, split_loader

    out_dtype = amp_dtype(recipe) or torch.float32
    loaders = {}
    for split in ("train", "test"):
        masked = {}
        if masking is not None and masking.mask_only:
            loaders[split] = pattern_loader(dataset, split, device, ranks=getattr(masking, f"{split}_ranks"),
                                            fraction=masking.fraction, keep=masking.keep, out_dtype=out_dtype,
                                            channels_last=recipe.channels_last)
            continue
        if masking is not None:
            masked = dict(ranks=getattr(masking, f"{split}_ranks"), fraction=masking.fraction, keep=masking.keep,
                          fill=masking.fill)
        loaders[split] = split_loader(dataset, split, device, out_dtype=out_dtype, channels_last=recipe.channels_last,
                                      **masked)
    return loaders


def _autocast(device, recipe):
    dtype = amp_dtype(recipe)
    return torch.autocast(torch.device(device).type, dtype=dtype or torch.float32, enabled=dtype is not None)


def distributed() -> tuple[int, int]:
    """(rank, world size) of the default process group; (0, 1) when there is none."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def _all_reduce_sum(tensor):
    import torch.distributed as dist

    if distributed()[1] > 1:
        dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
    return tensor


@torch.no_grad()
def accuracy(model, loader, index, recipe: Recipe) -> float:
    """Top-1 accuracy of model on loader's samples `index` (int64 Tensor[M]), no augmentation; under a
    process group each rank scores a share and the counts are summed."""
    was_training = model.training
    model.eval()
    correct = torch.zeros((), dtype=torch.int64, device=loader.device)
    for x, y in loader.batches(index, recipe.eval_batch_size, shard=distributed()):
        with _autocast(loader.device, recipe):
            correct += (model(x).argmax(1) == y).sum()
    model.train(was_training)
    return float(_all_reduce_sum(correct)) / max(1, index.shape[0])


def lr_at(step: int, total: int, recipe: Recipe) -> float:
    """Learning-rate factor at `step` of `total`: linear warmup from 0.1 to 1, then cosine to 0."""
    warm = max(1, int(round(recipe.warmup * total)))
    if step < warm:
        return 0.1 + 0.9 * step / warm
    return 0.5 * (1.0 + math.cos(math.pi * (step - warm) / max(1, total - warm)))


def _init_model(model, dataset, seed, device, recipe):
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


@torch.no_grad()
def _average_buffers(model, world: int):
    """Averages floating buffers (BN statistics, which each rank gathers from its own share) over ranks."""
    if world > 1:
        for buffer in model.buffers():
            if buffer.is_floating_point():
                _all_reduce_sum(buffer).div_(world)


@torch.no_grad()
def _ema_update(ema, model, decay: float):
    """ema <- decay * ema + (1 - decay) * model for float parameters; buffers (BN statistics) copied."""
    for e, p in zip(ema.parameters(), model.parameters()):
        e.lerp_(p, 1.0 - decay)
    for e, b in zip(ema.buffers(), model.buffers()):
        e.copy_(b)


def train_classifier(dataset, model, recipe: Recipe, device, seed: int = 0, masking: Masking | None = None,
                     progress: bool = True) -> TrainResult:
    """Trains `model` (what roarfast.models.resolve_model takes: a name, an import path, a ModelSpec) from
    scratch on dataset's train split minus val, selects the epoch with the best val accuracy, and reports
    that model's test accuracy. With `masking`, every train, val and test image is masked
    (ops.mask_normalize) before augmentation.

    Deterministic on CPU for a given seed (model init, shuffling and augmentation are seeded).
    """
    from roarfast.data.augment import Augment
    from roarfast.models import resolve_model
    from roarfast.progress import progress_bar

    architecture = resolve_model(model)
    device = torch.device(device)
    started = time.perf_counter()
    rank, world = distributed()
    loaders = _loaders(dataset, masking, device, recipe)
    train_index, val_index = dataset.train_index, dataset.val_index
    test_index = torch.arange(len(dataset.test))
    batch_size = min(recipe.batch_size, train_index.shape[0])
    if batch_size % world:
        raise UserError(f"batch size should be a multiple of the {world} data-parallel ranks, got {batch_size}")
    steps_per_epoch = train_index.shape[0] // batch_size
    total_steps = recipe.epochs * steps_per_epoch

    net = _init_model(architecture, dataset, seed, device, recipe)
    ema = copy.deepcopy(net).eval() if recipe.ema_decay is not None else None
    model = net
    if world > 1:  # same seed on every rank: identical initial weights; DDP averages the gradients
        from torch.nn.parallel import DistributedDataParallel

        model = DistributedDataParallel(net, device_ids=[device.index] if device.type == "cuda" else None)
    optimizer = _optimizer(model, recipe)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: lr_at(step, total_steps, recipe))
    loss_fn = torch.nn.CrossEntropyLoss(label_smoothing=recipe.label_smoothing)
    # fp16 gradients underflow without loss scaling; bf16 has fp32's range and needs none
    scaler = torch.amp.GradScaler(device.type, enabled=recipe.amp == "fp16")
    generator = torch.Generator(device=device).manual_seed(seed)
    spec = Augment(flip=recipe.flip, translate=recipe.translate) if (recipe.flip or recipe.translate) else None

    best = (-1.0, 0, None)  # (val accuracy, epoch, state dict on CPU)
    history = []
    if masking is None:
        desc = f"train {architecture.name}"
    else:
        desc = f"train {architecture.name} ({mode_of(masking.keep, masking.mask_only)} {masking.fraction:g})"
    with progress_bar(total=total_steps * batch_size, desc=desc, unit="img", enabled=progress and rank == 0) as bar:
        for epoch in range(1, recipe.epochs + 1):
            epoch_start = time.perf_counter()
            model.train()
            loss_sum = torch.zeros((), device=device)
            correct = torch.zeros((), dtype=torch.int64, device=device)
            for x, y in loaders["train"].batches(train_index, batch_size, shuffle=True, augment_spec=spec,
                                                 generator=generator, drop_last=True, shard=(rank, world)):
                with _autocast(device, recipe):
                    logits = model(x)
                    loss = loss_fn(logits.float(), y)
                optimizer.zero_grad(set_to_none=True)
                scaler.scale(loss).backward()
                scaler.step(optimizer)
                scaler.update()
                scheduler.step()
                if ema is not None:
                    _ema_update(ema, net, recipe.ema_decay)
                loss_sum += loss.detach() * y.shape[0]
                correct += (logits.argmax(1) == y).sum()
                bar.update(batch_size)
            selected = ema if ema is not None else net
            _average_buffers(selected, world)
            val_acc = accuracy(selected, loaders["train"], val_index, recipe)
            seen = steps_per_epoch * batch_size
            history.append({"epoch": epoch, "lr": optimizer.param_groups[0]["lr"],
                            "train_loss": float(_all_reduce_sum(loss_sum)) / seen,
                            "train_acc": float(_all_reduce_sum(correct)) / seen,
                            "val_acc": val_acc, "seconds": time.perf_counter() - epoch_start})
            bar.set_postfix(loss=f"{history[-1]['train_loss']:.3f}", val=f"{val_acc:.1%}")
            if val_acc > best[0]:
                best = (val_acc, epoch, {k: v.detach().to("cpu", copy=True) for k, v in selected.state_dict().items()})
    net.load_state_dict(best[2])
    net.eval()
    test_acc = accuracy(net, loaders["test"], test_index, recipe)
    return TrainResult(model=net, val_acc=best[0], test_acc=test_acc, epochs=recipe.epochs,
                       seconds=time.perf_counter() - started, best_epoch=best[1], history=history)


@dataclass(frozen=True)
class TrainOptions:
    """The base model: `model` (what roarfast.models.resolve_model takes; None: the dataset's default on the
    device), `epochs` and `batch_size` (None: its recipe's), `amp`, and `recipe`: Recipe fields that override
    the rest ({field: value}). Each value is checked here, once (the model when it is resolved)."""

    model: object = None
    epochs: int | None = None
    batch_size: int | None = None
    amp: str = "auto"
    recipe: dict | None = None

    def __post_init__(self):
        check_positive("--epochs", self.epochs, optional=True)
        check_positive("--batch-size", self.batch_size, optional=True)
        check_choice("--amp", self.amp, AMP_CHOICES)
        object.__setattr__(self, "recipe", check_overrides(self.recipe))


def run_train(run_dir, options: TrainOptions, *, dataset=None, data_dir=None, dataset_options=None, device=None,
              seed=0, progress=True, dataset_obj=None) -> dict:
    """The `roarfast train` command: loads the dataset (or takes `dataset_obj`), trains the base model on
    the unmodified images and saves it as the run directory's base checkpoint. Returns a summary dict
    (model, val_acc, test_acc, best_epoch, epochs, seconds, checkpoint)."""
    from roarfast.device import resolve_device
    from roarfast.memory import keep_freed_memory
    from roarfast.rundir import RunDir

    keep_freed_memory()
    run = RunDir(run_dir)
    device = _join_torchrun(resolve_device(device))
    ds = dataset_obj if dataset_obj is not None else run.open_dataset(dataset, data_dir, dataset_options)
    spec = checked_model(options.model or default_model(ds, device), ds)
    recipe = recipe_for(spec.name, device, train_images=len(ds.train_index), image_size=ds.image_size, amp=options.amp,
                        epochs=options.epochs, batch_size=options.batch_size, overrides=options.recipe)
    run.check_writable(checkpoint_bytes(spec, ds))  # before the training, not after it
    result = train_classifier(ds, spec, recipe, device, seed=seed, progress=progress)
    meta = {"model": spec.name, "model_source_sha256": spec.source_sha256, "num_classes": ds.num_classes,
            "image_size": ds.image_size, "in_channels": ds.channels, "dataset": ds.name, "dataset_options": ds.options,
            "dataset_fingerprint": ds.fingerprint, "mean": list(ds.mean), "std": list(ds.std),
            "classes": ds.train.classes, "seed": seed, "recipe": recipe.to_dict(), "device": str(device),
            "val_acc": result.val_acc, "test_acc": result.test_acc, "best_epoch": result.best_epoch,
            "epochs": result.epochs, "seconds": result.seconds, "history": result.history,
            "versions": {"torch": torch.__version__, "roarfast": __version__}}
    if distributed()[0] == 0:
        run.save_base_model(result.model, meta)
        run.remember_dataset(ds)
    if distributed()[1] > 1:
        torch.distributed.barrier()  # no rank returns before the checkpoint exists
    return {"model": spec.name, "val_acc": result.val_acc, "test_acc": result.test_acc,
            "best_epoch": result.best_epoch, "epochs": result.epochs, "seconds": result.seconds,
            "checkpoint": str(run.base_checkpoint)}


def checked_model(model, ds):
    """The ModelSpec of `model` (resolve_model) after one network built for `ds` returned logits of the right
    shape: a factory's mistake is a one-line UserError before any training."""
    from roarfast.models import resolve_model

    spec = resolve_model(model)
    if not spec.builtin:
        spec.check(ds.num_classes, ds.image_size, ds.channels)
    return spec


def checkpoint_bytes(spec, ds) -> int:
    """Bytes of the checkpoint of ModelSpec `spec` for dataset ds (its state dict), counted on a model built on
    the meta device (no memory, no time); 0 for a model that cannot be built there."""
    try:
        with torch.device("meta"):
            model = spec.build(ds.num_classes, ds.image_size, ds.channels)
    except Exception:  # noqa: BLE001  (a model that needs real tensors to build: the write margin alone is checked)
        return 0
    return sum(t.numel() * t.element_size() for t in model.state_dict().values())


def _join_torchrun(device: torch.device) -> torch.device:
    """Under torchrun (WORLD_SIZE > 1) joins the process group (NCCL on GPUs, gloo on CPU) and returns this
    rank's device (cuda:LOCAL_RANK); otherwise returns device unchanged."""
    import os

    import torch.distributed as dist

    if int(os.environ.get("WORLD_SIZE", "1")) <= 1 or dist.is_initialized():
        return device
    if device.type == "cuda":
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
        torch.cuda.set_device(device)
    dist.init_process_group(backend="nccl" if device.type == "cuda" else "gloo")
    return device
