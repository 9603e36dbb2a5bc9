"""What to train: the Recipe (every setting of a training run besides data, model and seed); effective_recipe,
the one function that composes the recipe a run trains with and records, for the base model and the cells alike
(the model's recipe block, declared with it in roarfast.models.builtins, or the untuned default; the GPU's
scaling; the user's options and --recipe overrides, as the stage reads them); the checks of --recipe fields; the
mixed-precision choice; the default model of a dataset.
How to train (data, model, optimizer, schedule, loop, evaluation) reads top to bottom in
roarfast.train.classifier.

torch is imported where it is used, so that the CLI can build its --amp choices (AMP_CHOICES) from here.
"""

import dataclasses
import math
from dataclasses import dataclass

from roarfast.common.device import native_bf16
from roarfast.errors import UserError
from roarfast.models.registry import MODELS


@dataclass(frozen=True)
class Recipe:
    """Everything that decides a training run besides data, model and seed."""

    epochs: int = 8
    batch_size: int = 128
    lr: float = 0.1  # peak learning rate, reached at the end of warmup
    momentum: float = 0.9
    weight_decay: float = 5e-4
    label_smoothing: float = 0.1
    warmup: float = 0.15  # share of the steps with a linear ramp from lr/10 to lr, then cosine to 0
    ema_decay: float | None = 0.98  # per-step EMA of the weights (evaluated and selected); None = off
    flip: bool = True
    translate: int = 2  # pixels of random shift per axis
    amp: str | None = None  # None (fp32), "bf16" (autocast) or "fp16" (autocast + gradient scaler)
    channels_last: bool = True  # faster convolutions on CPU (oneDNN) and GPU (tensor cores) alike
    eval_batch_size: int = 512
    # airbench's training (the fields below are left out of to_dict at their defaults: LATER_FIELDS)
    schedule: str = "cosine"  # "cosine": warmup from lr/10, cosine to 0; "linear": from lr/5 up, then down to 0.07 lr
    lookahead: bool = False  # every 5 steps the weights pulled to a slow copy of them, at the end set to it
    alternate_flips: bool = False  # (with flip) a random half flipped in epoch 1, then each epoch the other half
    tta: int = 0  # test-time views averaged: 0 none, 1 + the mirror image, 2 + 1-pixel shifts of both
    bias_lr_scale: float | None = None  # 1-D parameters: lr x this, decayed as much per step as the weights
    pad: str = "zero"  # what the training and test-time shifts bring in at the border: "zero" or "reflect"
    select: str = "val"  # the model kept: "val" the epoch with the best validation accuracy, "last" the last epoch

    def replace(self, **changes) -> "Recipe":
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict:
        """The fields, LATER_FIELDS only where they differ from their defaults: a results row's configuration
        hash holds the recipe, so a field added later leaves the recipes (and rows) from before it alone."""
        fields = dataclasses.asdict(self)
        return {k: v for k, v in fields.items() if k not in LATER_FIELDS or v != LATER_FIELDS[k]}

    @classmethod
    def from_dict(cls, fields: dict) -> "Recipe":
        """The Recipe of a record that to_dict wrote (a field it left out at its default)."""
        return cls(**fields)


#: Recipe fields added after results were recorded, with their defaults (Recipe.to_dict)
LATER_FIELDS = {"schedule": "cosine", "lookahead": False, "alternate_flips": False, "tta": 0, "bias_lr_scale": None,
                "pad": "zero", "select": "val"}
#: Recipe.schedule choices
SCHEDULES = ("cosine", "linear")
#: Recipe.pad choices. "zero" is the dataset mean once normalized, so a shift brings in no pixel of the image
#: (what a ROAR cell's masked images need: a reflected border would copy pixels next to removed ones);
#: "reflect" is airbench94's, for a comparison on unmodified images
PADS = ("zero", "reflect")
#: Recipe.select choices. "last" keeps the last epoch's model as airbench94 and the ROAR paper do; with it a
#: training needs no held-out images
SELECTIONS = ("val", "last")


#: a model roarfast has not tuned (package.module:factory, timm:<name>, an object) trains with the recipe
#: of its image side: up to PLUGIN_SMALL_IMAGE px, resnet8's CIFAR recipe at half its learning rate (an
#: untuned network, without batch norm or with a deep stem, survives it); larger canvases, ImageNet-style
#: batches small enough for CPU memory at 224 px
PLUGIN_SMALL_IMAGE = 64
PLUGIN_RECIPES = {"small": Recipe(epochs=15, batch_size=128, lr=0.05),
                  "large": Recipe(epochs=15, batch_size=32, lr=0.02)}
#: on a GPU: larger batches (lr scaled linearly), bf16 autocast, channels_last
_GPU_BATCH_SCALE = 4
#: ...but never so large that an epoch has fewer steps than this: at 4x, the embedded dataset's 4,500
#: training images made 4 steps an epoch and fastnet-gpu stayed at chance (H100, 2026-11-23); the quick
#: preset's 3-epoch cells need about 100 steps in all
MIN_STEPS_PER_EPOCH = 32
#: a GPU's evaluation batches: evaluation holds no activations for a backward pass, so they can be large
GPU_EVAL_BATCH_SIZE = 2048
#: fastnet-gpu (airbench-class, 64/256/256) is sized for CIFAR-10's 50,000 images: on the embedded
#: dataset's 4,500 it reached 66% test in 3 epochs at batch 256 (CPU, fp32) where fastnet learns it
GPU_NET_MIN_IMAGES = 20_000
#: airbench's whitening stem, widths and pools are CIFAR-10's: the GPU default only at this image side
AIRBENCH_IMAGE_SIZE = 32


def _on_cuda(device) -> bool:
    # late: loads torch, and --help imports this module
    import torch

    return torch.device(device).type == "cuda"


def gpu_batch_scale(batch_size: int, train_images: int | None) -> int:
    """The factor (4, 2 or 1) by which a GPU grows a recipe's batch: the largest that leaves at least
    MIN_STEPS_PER_EPOCH steps an epoch over `train_images` (None: unknown, the full factor)."""
    scale = _GPU_BATCH_SCALE
    while train_images is not None and scale > 1 and train_images // (batch_size * scale) < MIN_STEPS_PER_EPOCH:
        scale //= 2
    return scale


#: the trainings a recipe is made for: the base model (`train`, a sweep's base model) and the retraining cells
#: (`retrain`, a sweep's cells and their controls)
BASE_MODEL, CELLS = "base model", "cells"


@dataclass(frozen=True)
class DataSize:
    """What a recipe reads of the data: the images of its training split (None: not known, so a GPU's full batch
    factor) and the side of its images."""

    train_images: int | None
    image_size: int

    @classmethod
    def of(cls, data) -> "DataSize":
        """The DataSize of a Dataset or a dry run's outline (its train_index and image_size); a DataSize as it is."""
        return data if isinstance(data, cls) else cls(len(data.train_index), data.image_size)


def effective_recipe(model, device, data, options=None, *, stage: str | None = None) -> Recipe:
    """The Recipe that trains `model` (a ModelSpec, or a model's name) on `device` over `data` (a Dataset, a dry
    run's outline, or a DataSize) for `stage` (BASE_MODEL or CELLS; None: the stage `options` are for), with the
    user's `options`. The one place a recipe is composed, for the base model and the cells alike; each step
    overrides the one before:

    1. the model's recipe block (its ModelEntry's `recipe` fields over Recipe's defaults, declared with it in
       roarfast.models.builtins), or for a model roarfast has not tuned, the PLUGIN_RECIPES entry of its image
       size;
    2. on CUDA, a batch up to 4x larger with the learning rate scaled alike (gpu_batch_scale: less for few
       training images; None: unknown, the full factor) and evaluation batches of GPU_EVAL_BATCH_SIZE;
    3. the user's options (stages.basemodel.TrainOptions, stages.cells.CellOptions or a sweep's Grid; None: none):
       `amp` (an AMP_CHOICES entry: "auto" is bf16 where the device computes it natively, device.native_bf16),
       then `epochs` (--epochs, a preset's) and `batch_size` (--batch-size, where the options have one) when the
       options are the stage's own (`options.stage`): a sweep's --epochs set its cells', never its base model's;
    4. `options.recipe`: Recipe fields (--recipe FIELD=VALUE, a config file's `recipe:`, checked by
       check_overrides), which win over everything above, in every stage.

    What it returns is what trains and what is recorded, as it is (Recipe.to_dict: the base model's meta.json,
    every cell's configuration, a Ray worker's settings): a function of its arguments and of whether the
    device computes bf16 natively, and Recipe.from_dict of the record gives it back."""
    if stage is None:
        stage = BASE_MODEL if options is None else options.stage
    if stage not in (BASE_MODEL, CELLS):
        raise ValueError(f"stage should be {BASE_MODEL!r} or {CELLS!r}, got {stage!r}")
    name, size = getattr(model, "name", model), DataSize.of(data)
    block = MODELS[name].recipe if name in MODELS else None
    untuned = PLUGIN_RECIPES["small" if size.image_size <= PLUGIN_SMALL_IMAGE else "large"]
    recipe = untuned if block is None else Recipe(**block)
    if _on_cuda(device):
        scale = gpu_batch_scale(recipe.batch_size, size.train_images)
        recipe = recipe.replace(batch_size=recipe.batch_size * scale, lr=recipe.lr * scale,
                                eval_batch_size=GPU_EVAL_BATCH_SIZE)
    if options is None:  # nothing the user chose: the model's recipe on this device
        return recipe.replace(amp=resolve_amp("auto", device))
    recipe = recipe.replace(amp=resolve_amp(options.amp, device))
    if options.stage == stage:
        batch_size = getattr(options, "batch_size", None)  # the cells take no --batch-size
        if options.epochs is not None:
            recipe = recipe.replace(epochs=options.epochs)
        if batch_size is not None:
            recipe = recipe.replace(batch_size=batch_size)
    overrides = dict(options.recipe or {})
    if "amp" in overrides:
        overrides["amp"] = resolve_amp(overrides["amp"] or "off", device)
    return recipe.replace(**overrides)


def _number(low: float, high: float | None = None, *, low_open: bool = False, high_open: bool = False,
            optional: bool = False):
    """A check of a real Recipe field: a number in the interval, or None when optional."""

    def check(value):
        if value is None and optional:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError("a number")
        inside = (value > low if low_open else value >= low) and (
            high is None or (value < high if high_open else value <= high))
        if not (math.isfinite(value) and inside):
            raise ValueError("in " + ("(" if low_open else "[") + f"{low:g}, "
                             + (f"{high:g}" + (")" if high_open else "]") if high is not None else "inf)"))
        return float(value)

    return check


def _integer(low: int):
    def check(value):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ValueError(f"an int >= {low}")
        return value

    return check


def _flag(value):
    if not isinstance(value, bool):
        raise ValueError("true or false")
    return value


def _choice(choices):
    def check(value):
        if isinstance(value, bool) or value not in choices:
            raise ValueError(f"one of {', '.join(map(str, choices))}")
        return value

    return check


def _amp(value):
    if value not in (None, *AMP_CHOICES):
        raise ValueError(f"one of {', '.join(AMP_CHOICES)}")
    return value


#: the check of every Recipe field a --recipe KEY=VALUE (or a config file's `recipe:` mapping) may set
RECIPE_FIELDS = {
    "epochs": _integer(1), "batch_size": _integer(1), "lr": _number(0, low_open=True),
    "momentum": _number(0, 1, high_open=True), "weight_decay": _number(0), "label_smoothing": _number(0, 1, high_open=True),
    "warmup": _number(0, 1), "ema_decay": _number(0, 1, low_open=True, high_open=True, optional=True), "flip": _flag,
    "translate": _integer(0), "amp": _amp, "channels_last": _flag, "eval_batch_size": _integer(1),
    "schedule": _choice(SCHEDULES), "lookahead": _flag, "alternate_flips": _flag, "tta": _choice((0, 1, 2)),
    "bias_lr_scale": _number(0, low_open=True, optional=True), "pad": _choice(PADS), "select": _choice(SELECTIONS),
}


def check_overrides(overrides, flag: str = "--recipe") -> dict:
    """{field: value} of Recipe fields, each checked (RECIPE_FIELDS); a UserError naming the flag and the
    field otherwise."""
    if overrides is None:
        return {}
    if not isinstance(overrides, dict):
        raise UserError(f"{flag} should be a mapping of Recipe fields to values, got {type(overrides).__name__}")
    checked = {}
    for key, value in overrides.items():
        name = str(key).replace("-", "_")
        if name not in RECIPE_FIELDS:
            raise UserError(f"{flag} {key}: not a Recipe field; the fields are {', '.join(RECIPE_FIELDS)}")
        try:
            checked[name] = RECIPE_FIELDS[name](value)
        except ValueError as err:
            raise UserError(f"{flag} {key}={value!r}: should be {err}") from None
    return checked


#: --amp choices: "auto" trains in bf16 where the device computes it natively (device.native_bf16), fp32
#: elsewhere
AMP_CHOICES = ("auto", "off", "bf16", "fp16")
_AMP_PRECISIONS = ("bf16", "fp16")


def resolve_amp(amp: str, device) -> str | None:
    """The Recipe.amp of an --amp choice for training on device: None (fp32), "bf16" or "fp16"."""
    if amp == "auto":
        return "bf16" if native_bf16(device) else None
    return None if amp == "off" else amp


def amp_dtype(recipe: Recipe):
    """The autocast dtype of recipe (None: fp32); the loaders hand the model inputs in it."""
    if recipe.amp not in (None, *_AMP_PRECISIONS):
        raise UserError(f"recipe amp should be None, bf16 or fp16, got {recipe.amp!r}")
    return _precision_dtype(recipe.amp)


def autocast(device, recipe: Recipe):
    """The recipe's autocast context on device (a no-op in fp32): the training step's, its evaluations' and
    the measured steps' of an estimate."""
    # late: loads torch, and --help imports this module
    import torch

    dtype = amp_dtype(recipe)
    return torch.autocast(torch.device(device).type, dtype=dtype or torch.float32, enabled=dtype is not None)


def autocast_dtype(amp: str, device):
    """The autocast dtype of an --amp choice on device (None: fp32) for passes outside training (attributions):
    "auto" is bf16 on a GPU only. On a CPU attributions stay fp32 even where bf16 is native: a bf16 gradient
    keeps 8 bits of mantissa (more tied ranks), and extraction gains little (the embedded run's 26 s -> 24 s)."""
    if amp == "auto":
        return _precision_dtype("bf16" if _on_cuda(device) else None)
    return _precision_dtype(resolve_amp(amp, device))


def _precision_dtype(amp: str | None):
    # late: loads torch, and --help imports this module
    import torch

    return {"bf16": torch.bfloat16, "fp16": torch.float16}.get(amp)


def default_model(dataset, device) -> str:
    """For images up to 64 px: on CUDA, when the training split has GPU_NET_MIN_IMAGES or more, airbench for
    CIFAR-size images (AIRBENCH_IMAGE_SIZE px) and fastnet-gpu for the others; else fastnet. resnet18 for
    larger canvases."""
    if dataset.image_size > 64:
        return "resnet18"
    if not (_on_cuda(device) and len(dataset.train) >= GPU_NET_MIN_IMAGES):
        return "fastnet"
    return "airbench" if dataset.image_size == AIRBENCH_IMAGE_SIZE else "fastnet-gpu"
