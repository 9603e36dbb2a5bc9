"""What to train: the Recipe (every setting of a training run besides data, model and seed), the tuned
recipe of each model on CPU and GPU, the mixed-precision choice, and the default model of a dataset.
How to train (the loop, EMA, DDP) lives in roarfast.train.

torch is imported where it is used, so that the CLI can build its --amp choices (AMP_CHOICES) from here.
"""

import dataclasses
from dataclasses import dataclass

from roarfast.errors import UserError


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

    def replace(self, **changes) -> "Recipe":
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


#: recipes per model on CPU; the GPU recipes derive from them in default_recipe
_CPU_RECIPES = {
    "fastnet": Recipe(epochs=8, batch_size=128, lr=0.05),
    "fastnet-gpu": Recipe(epochs=10, batch_size=256, lr=0.2, label_smoothing=0.2),
    "resnet8": Recipe(epochs=15, batch_size=128, lr=0.1),
    "resnet18": Recipe(epochs=15, batch_size=128, lr=0.1),
    "resnet50": Recipe(epochs=15, batch_size=64, lr=0.05),
}
#: on a GPU: larger batches (lr scaled linearly), bf16 autocast, channels_last
_GPU_BATCH_SCALE = 4
#: ...but never so large that an epoch has fewer steps than this: at 4x, the embedded dataset's 4,500
#: training images made 4 steps an epoch and fastnet-gpu stayed at chance (H100, 2026-11-23); the quick
#: preset's 3-epoch cells need about 100 steps in all
MIN_STEPS_PER_EPOCH = 32
#: fastnet-gpu (airbench-class, 64/256/256) is sized for CIFAR-10's 50,000 images: on the embedded
#: dataset's 4,500 it reached 66% test in 3 epochs at batch 256 (CPU, fp32) where fastnet learns it
GPU_NET_MIN_IMAGES = 20_000


def _on_cuda(device) -> bool:
    import torch

    return torch.device(device).type == "cuda"


def gpu_batch_scale(batch_size: int, train_images: int | None) -> int:
    """The factor (4, 2 or 1) by which a GPU grows a recipe's batch: the largest that leaves at least
    MIN_STEPS_PER_EPOCH steps an epoch over `train_images` (None: unknown, the full factor)."""
    scale = _GPU_BATCH_SCALE
    while train_images is not None and scale > 1 and train_images // (batch_size * scale) < MIN_STEPS_PER_EPOCH:
        scale //= 2
    return scale


def default_recipe(model_name: str, device, train_images: int | None = None) -> Recipe:
    """The tuned recipe of `model_name` on `device` ("cpu", "cuda", torch.device): fp32 on CPU; on CUDA
    bf16 autocast and a batch up to 4x larger with the learning rate scaled alike (gpu_batch_scale:
    smaller for a training split of few `train_images`)."""
    if model_name not in _CPU_RECIPES:
        raise UserError(f"model should be one of {', '.join(_CPU_RECIPES)}, got {model_name!r}")
    recipe = _CPU_RECIPES[model_name]
    if _on_cuda(device):
        scale = gpu_batch_scale(recipe.batch_size, train_images)
        recipe = recipe.replace(batch_size=recipe.batch_size * scale, lr=recipe.lr * scale, eval_batch_size=2048)
    return recipe.replace(amp=resolve_amp("auto", device))


def recipe_for(model_name: str, device, *, train_images: int, amp: str = "auto", epochs: int | None = None,
               batch_size: int | None = None) -> Recipe:
    """The recipe a run trains `model_name` with on a training split of `train_images`: its tuned recipe on
    `device` with the --amp choice and, where given, the --epochs and --batch-size (checked by the options
    that carry them)."""
    recipe = default_recipe(model_name, device, train_images=train_images).replace(amp=resolve_amp(amp, device))
    if epochs is not None:
        recipe = recipe.replace(epochs=epochs)
    if batch_size is not None:
        recipe = recipe.replace(batch_size=batch_size)
    return recipe


#: --amp choices: "auto" is bf16 on CUDA and fp32 elsewhere
AMP_CHOICES = ("auto", "off", "bf16", "fp16")
_AMP_PRECISIONS = ("bf16", "fp16")


def resolve_amp(amp: str, device) -> str | None:
    """The Recipe.amp of an --amp choice on device: None (fp32), "bf16" or "fp16"."""
    if amp == "auto":
        return "bf16" if _on_cuda(device) else None
    return None if amp == "off" else amp


def amp_dtype(recipe: Recipe):
    """The autocast dtype of recipe (None: fp32); the loaders hand the model inputs in it."""
    if recipe.amp not in (None, *_AMP_PRECISIONS):
        raise UserError(f"recipe amp should be None, bf16 or fp16, got {recipe.amp!r}")
    return _precision_dtype(recipe.amp)


def autocast_dtype(amp: str, device):
    """The autocast dtype of an --amp choice on device (None: fp32), for passes outside training."""
    return _precision_dtype(resolve_amp(amp, device))


def _precision_dtype(amp: str | None):
    import torch

    return {"bf16": torch.bfloat16, "fp16": torch.float16}.get(amp)


def default_model(dataset, device) -> str:
    """For images up to 64 px: fastnet-gpu on CUDA when the training split has GPU_NET_MIN_IMAGES or more,
    else fastnet; resnet18 for larger canvases."""
    if dataset.image_size > 64:
        return "resnet18"
    large = len(dataset.train) >= GPU_NET_MIN_IMAGES
    return "fastnet-gpu" if _on_cuda(device) and large else "fastnet"
