"""What an estimator needs of the model (its record's `requires`), checked before any image is processed, so
that an unfit model is refused in one line instead of failing after a base model was trained or half a
store was written:

- RELU_MODULES (gb and its ensembles): guided backprop guides nn.ReLU modules (in-place ones run out of
  place while it does: roarfast.methods.gradients.guided_relus); a model with none is refused.
- CONV_LAYER (gradcam, Captum's layer methods): the layer is --cam-layer, else the model's `cam_layer`,
  else its last nn.Conv2d; which one, and why, is said once.

An estimator from outside roarfast (a plug-in, a Captum class) is also tried on a few images (check_methods).
"""

import torch
from torch import nn

from roarfast.data.loader import split_loader
from roarfast.errors import UserError
from roarfast.methods.compute import compute_maps
from roarfast.methods.declaration import CONV_LAYER, RELU_MODULES
from roarfast.methods.model_context import cam_layer, cam_layer_name
from roarfast.methods.params import ExplainBatch
from roarfast.common.resolver import BUILTIN

#: train images a plug-in or Captum estimator is tried on before any store is written (shape, NaN, arguments)
PROBE_IMAGES = 2


def check_methods(model, ds, selection, params, device) -> list[str]:
    """Refuses (UserError), before any store is written, the methods of `selection` (a
    roarfast.methods.selection.Selection) the model cannot serve (check_model) and the estimators from outside
    roarfast (plug-ins, Captum classes) that fail on the first PROBE_IMAGES train images of `ds` (wrong shape, not
    finite, an argument missing) with `params`. Returns the lines to print once (the Grad-CAM layer chosen)."""
    explained = [selection.records[name] for name in selection.explained]
    notes = check_model(model, explained, params.gradcam_layer) if explained else []
    outside = [record.name for record in explained if record.form != BUILTIN]
    if outside:
        rows = torch.arange(min(PROBE_IMAGES, len(ds.train)))
        x, y, index = next(split_loader(ds, "train", device).batches(rows, rows.shape[0], with_index=True))
        compute_maps(model, ExplainBatch(x=x, target=y, index=index.cpu()), selection.only(outside), params)
    return notes


def check_model(model: nn.Module, records, gradcam_layer: str | None = None) -> list[str]:
    """Refuses (UserError) a model that lacks what the estimators `records` (their Estimator records) need;
    returns the lines to print once (the Grad-CAM layer chosen when --cam-layer did not name it)."""
    needs = {}
    for record in records:
        for requirement in record.requires:
            needs.setdefault(requirement, []).append(record.name)
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
