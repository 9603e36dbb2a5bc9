"""`captum:<ClassName>`: any attribution class of captum.attr as an estimator.

The class is built with the model (and, for classes that take a layer, the Grad-CAM layer) and called as
attribute(x, target=target), adding the arguments roarfast already has options for when the method takes
them: baselines (params.ig_baseline, if set) and n_steps (params.ig_steps). Layer methods return layer-shaped
maps; their channels are summed and the result upsampled bilinearly to the input, like Grad-CAM.
"""

import inspect

import torch
import torch.nn.functional as F

from roarfast.errors import UserError

#: classes that wrap another method or explain a neuron or an LLM: no single-call default exists.
UNSUPPORTED = {
    "NoiseTunnel": "it wraps another method; the built-in sg-*, sg-sq-*, var-* compute the same ensembles",
}


def _captum_attr():
    try:
        import captum.attr
    except ImportError:
        raise UserError("captum:<ClassName> methods need captum: pip install captum") from None
    return captum.attr


def attribution_class(name: str):
    """The captum.attr class called `name`, or a UserError saying why it cannot be used."""
    attr = _captum_attr()
    cls = getattr(attr, name, None)
    if not (inspect.isclass(cls) and issubclass(cls, attr.Attribution)) or inspect.isabstract(cls):
        known = sorted(n for n in dir(attr) if inspect.isclass(getattr(attr, n))
                       and issubclass(getattr(attr, n), attr.Attribution))
        raise UserError(f"captum:{name} is not a captum.attr attribution class; captum.attr has: {' '.join(known)}")
    if name in UNSUPPORTED:
        raise UserError(f"captum:{name} is not supported: {UNSUPPORTED[name]}")
    if issubclass(cls, attr.NeuronAttribution) or "LLM" in name or name.endswith("Base"):
        raise UserError(f"captum:{name} is not supported: it does not attribute a class logit of an image model")
    return cls


def check_captum_name(name: str) -> None:
    """Raises UserError unless captum:<name> can be computed."""
    attribution_class(name)


def takes_layer(name: str) -> bool:
    """Whether captum:<name> is built with a layer (the Grad-CAM layer)."""
    return "layer" in inspect.signature(attribution_class(name).__init__).parameters


def captum_maps(model, batch, target, params, name: str) -> torch.Tensor:
    """Maps of captum.attr.<name> for batch.x (Tensor[B, C, H, W]) -> float32 Tensor[B, C, H, W] or
    Tensor[B, 1, H, W] (layer methods)."""
    attr = _captum_attr()
    cls = attribution_class(name)
    if takes_layer(name):
        from roarfast.methods.model_context import cam_layer

        method = cls(model, cam_layer(model, params.gradcam_layer))
    else:
        method = cls(model)
    x = batch.x.detach().requires_grad_(True)
    kwargs = {"target": target}
    accepts = inspect.signature(method.attribute).parameters
    if "baselines" in accepts and params.ig_baseline is not None:
        kwargs["baselines"] = params.baseline(x).expand_as(x).contiguous()
    if "n_steps" in accepts:
        kwargs["n_steps"] = params.ig_steps
    try:
        maps = method.attribute(x, **kwargs)
    except TypeError as err:
        raise UserError(f"captum:{name} needs arguments roarfast does not supply ({err})") from None
    maps = maps.detach().float()
    if isinstance(method, attr.LayerAttribution):
        if maps.dim() != 4:
            raise UserError(f"captum:{name} gave a layer map of shape {list(maps.shape)}; only conv layers "
                            "(Tensor[B, K, h, w]) can be upsampled to the input")
        maps = F.interpolate(maps.sum(1, keepdim=True), size=x.shape[2:], mode="bilinear", align_corners=False)
    return maps
