"""What an estimator needs of the model (its record's `requires`), checked before any image is processed, so
that an unfit model is refused in one line instead of failing after a base model was trained or half a
store was written:

- RELU_MODULES (gb and its ensembles): guided backprop guides nn.ReLU modules (in-place ones run out of
  place while it does: roarfast.methods.gradients.guided_relus); a model with none is refused.
- CONV_LAYER (gradcam, Captum's layer methods): the layer is --cam-layer, else the model's `cam_layer`,
  else its last nn.Conv2d; which one, and why, is said once.
"""

from torch import nn

from roarfast.errors import UserError
from roarfast.methods import registry
from roarfast.methods.declaration import CONV_LAYER, RELU_MODULES
from roarfast.methods.model_context import cam_layer, cam_layer_name


def check_model(model: nn.Module, names, gradcam_layer: str | None = None) -> list[str]:
    """Refuses (UserError) a model that lacks what the methods `names` need; returns the lines to print
    once (the Grad-CAM layer chosen when --cam-layer did not name it)."""
    needs = {}
    for name in names:
        for requirement in registry.get(name).requires:
            needs.setdefault(requirement, []).append(name)
    notes = []
    if RELU_MODULES in needs and not any(isinstance(m, nn.ReLU) for m in model.modules()):
        activations = sorted({type(m).__name__ for m in model.modules() if _is_activation(m)})
        found = f"its activations: {', '.join(activations)}" if activations else "no activation modules"
        raise UserError(f"--method {','.join(needs[RELU_MODULES])}: guided backprop guides nn.ReLU modules, "
                        f"and {type(model).__name__} has none ({found}); pick other methods or a model with nn.ReLU")
    if CONV_LAYER in needs:
        layer, source = cam_layer_name(model, gradcam_layer)
        cam_layer(model, layer)  # refuses a name that is not a module of the model
        if source != "--cam-layer":
            notes.append(f"{', '.join(needs[CONV_LAYER])}: layer {layer!r} ({source}; --cam-layer NAME picks "
                         f"another)")
    return notes


def _is_activation(module: nn.Module) -> bool:
    """An activation module of torch.nn (GELU, SiLU, Tanh, ...), for the refusal's message."""
    return type(module).__module__ == "torch.nn.modules.activation"
