"""The built-in models (MODELS, a roarfast.resolver.Resolver): every module of roarfast.models registers its
networks here, each with a one-line description and the recipe it is tuned with, so that a new model is one
module; `build_model` builds one by name.

Light on purpose: the modules that register import torch and are imported at the first lookup only, so the
CLI can import MODELS and list the built-ins in its --model help only when the help is shown.
"""

from collections.abc import Mapping
from dataclasses import dataclass

from roarfast.resolver import Entry, Resolver, Scheme

FLAG = "--model"
TIMM_PREFIX = "timm:"


@dataclass(frozen=True)
class ModelEntry(Entry):
    """A built-in model. `value` is its factory(num_classes, image_size, in_channels) -> nn.Module: a freshly
    initialized network whose `cam_layer` names its last conv stage and whose every ReLU is an nn.ReLU
    module that is not inplace (guided backprop hooks them). `recipe`: the Recipe fields it is tuned with on
    CPU, over Recipe's defaults (roarfast.recipe.effective_recipe scales them on a GPU and lays the user's
    fields over them; None: trained as a model roarfast has not tuned, by image size)."""

    recipe: Mapping | None = None


MODELS = Resolver("model", FLAG, package="roarfast.models",
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
