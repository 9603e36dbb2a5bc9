"""The model resolver's built-ins: MODELS (a roarfast.common.resolver.Resolver) and ModelEntry, what each built-in
declares (its name, a one-line description, its recipe block, its factory's import path); `build_model` builds
one by name.

Each built-in is declared in a module of roarfast.models.builtins, which registers its entries with MODELS as it
is imported; MODELS imports every module there at its first lookup. Those modules are light (their factories are
named by import path, in the modules of this package that import torch, imported when a model is built), so the
CLI lists the built-ins in its --model help at once. A new built-in is its declaration module there, its factory
and its test (tests/test_models.py builds every one, so a declaration cannot name what is not there).
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
    is an nn.ReLU module that is not inplace (guided backprop hooks them). `recipe`: its recipe block, the Recipe
    fields it is tuned with on CPU over Recipe's defaults, in one mapping (roarfast.recipe.effective_recipe
    scales them on a GPU and lays the user's fields over them; None: trained as a model roarfast has not tuned,
    by image size)."""

    recipe: Mapping | None = None


MODELS = Resolver("model", FLAG, package="roarfast.models.builtins",
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
