"""The built-in models (MODELS, a roarfast.common.resolver.Resolver), declared here: each its name, a one-line
description, the recipe it is tuned with and its factory's import path in a module of roarfast.models;
`build_model` builds one by name.

Light on purpose: the factories' modules import torch and are imported when a model is built, so the CLI lists
the built-ins in its --model help at once. A new built-in is its factory in a module of this package and its
declaration in BUILTINS (tests/test_models.py builds every one, so a declaration cannot name what is not there).
"""

from collections.abc import Mapping
from dataclasses import dataclass

from roarfast.common.resolver import Entry, Resolver, Scheme

FLAG = "--model"
TIMM_PREFIX = "timm:"
#: images up to this side get the CIFAR stem (3x3 stride 1, no max pool) on torchvision ResNets
SMALL_IMAGE = 64


@dataclass(frozen=True)
class ModelEntry(Entry):
    """A built-in model. What it loads (`target`, or `value`) is its factory(num_classes, image_size, in_channels)
    -> nn.Module: a freshly initialized network whose `cam_layer` names its last conv stage and whose every ReLU
    is an nn.ReLU module that is not inplace (guided backprop hooks them). `recipe`: the Recipe fields it is
    tuned with on CPU, over Recipe's defaults (roarfast.recipe.effective_recipe scales them on a GPU and lays the
    user's fields over them; None: trained as a model roarfast has not tuned, by image size)."""

    recipe: Mapping | None = None


#: what the torchvision ResNets' descriptions add to their names
_TORCHVISION = f"(no pretrained weights), small-image stem up to {SMALL_IMAGE} px"

#: the built-ins, in listing order
BUILTINS = (
    ModelEntry(
        "airbench", "GPU default for 32px data: airbench94's net (frozen whitening stem from the training patches, "
        "identity-initialized convs, 64/256/256), ReLU; trains with airbench's recipe",
        target="roarfast.models.airbench:airbench",
        # airbench94's settings (per 1,024 images, over a summed loss: lr 11.5, weight decay 0.0153, momentum 0.85)
        # in this loop's terms (mean loss, decay coupled to lr): lr 1.5 and weight decay 1.33e-3 at batch 1,024. On
        # CPU a quarter of the batch and lr, which a GPU scales back 4x (gpu_batch_scale); TTA and lookahead in place
        # of EMA
        recipe={"epochs": 10, "batch_size": 256, "lr": 0.375, "momentum": 0.85, "weight_decay": 1.33e-3,
                "label_smoothing": 0.2, "warmup": 0.23, "ema_decay": None, "schedule": "linear", "lookahead": True,
                "alternate_flips": True, "tta": 2, "bias_lr_scale": 64.0}),
    ModelEntry(
        "fastnet", "CPU default for 32px data: 3 conv stages (16/32/64), about 3 M multiply-adds per image",
        target="roarfast.models.fastnet:fastnet", recipe={"epochs": 8, "batch_size": 128, "lr": 0.05}),
    # tuned for trainings of a few hundred steps (the quick preset's 3 epochs of 1,350 images): batch 24 for more steps
    # per image seen, and an EMA that forgets within 10 steps (fastnet's 0.98 still remembers the first steps at the end)
    ModelEntry(
        "fastnet-small", "`roarfast run`'s net: fastnet at half width (8/16/32), about 0.8 M multiply-adds per image",
        target="roarfast.models.fastnet:fastnet_small",
        recipe={"epochs": 8, "batch_size": 24, "lr": 0.05, "ema_decay": 0.9}),
    ModelEntry(
        "fastnet-gpu", "GPU default for 33-64 px data: airbench-shaped net (64/256/256) with a learned stem, ReLU",
        target="roarfast.models.fastnet:fastnet_gpu",
        recipe={"epochs": 10, "batch_size": 256, "lr": 0.2, "label_smoothing": 0.2}),
    ModelEntry("resnet8", "CIFAR ResNet-8: 3 stages of one BasicBlock (16/32/64)",
               target="roarfast.models.resnet:resnet8", recipe={"epochs": 15, "batch_size": 128, "lr": 0.1}),
    ModelEntry("resnet18", f"torchvision ResNet-18 {_TORCHVISION}", target="roarfast.models.resnet:resnet18",
               recipe={"epochs": 15, "batch_size": 128, "lr": 0.1}),
    ModelEntry("resnet50", f"torchvision ResNet-50 {_TORCHVISION}", target="roarfast.models.resnet:resnet50",
               recipe={"epochs": 15, "batch_size": 64, "lr": 0.05}),
)

MODELS = Resolver("model", FLAG, BUILTINS,
                  schemes=[Scheme(TIMM_PREFIX, "roarfast.models.spec:timm_model",
                                  "a timm network with random weights; pip install 'roarfast[timm]'")],
                  import_form="package.module:factory")


def build_model(name: str, num_classes: int, image_size: int = 32, in_channels: int = 3):
    """A freshly initialized built-in classifier (MODELS) taking normalized Tensor[B, in_channels, H, W] to
    logits Tensor[B, num_classes]."""
    if isinstance(num_classes, bool) or not isinstance(num_classes, int) or num_classes < 2:
        raise ValueError(f"num_classes should be an int >= 2, got {num_classes!r}")
    if isinstance(in_channels, bool) or not isinstance(in_channels, int) or in_channels < 1:
        raise ValueError(f"in_channels should be a positive int, got {in_channels!r}")
    return MODELS.load(name)(num_classes, image_size, in_channels)
