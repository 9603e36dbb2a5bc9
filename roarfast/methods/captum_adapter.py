"""`captum:<ClassName>`: any attribution class of captum.attr as an estimator, its record read from the class.

The record comes from the class's constructor and `attribute()` signatures (captum_outline.py, which `roarfast
list` reads from captum's source files alike): every class reads the target
(when attribute() takes one); a `layer` constructor argument reads --cam-layer and needs a conv layer;
`n_steps` reads --ig-steps and `baselines` the IG baseline (black). Their other arguments are the ones a user
passes with `--method-arg NAME=VALUE` (Study: method_args=), each to the constructor or to attribute() by
name; those without a default must be passed (captum:Occlusion's sliding_window_shapes). Classes whose layers
need a propagation rule (LRP, LayerLRP) take `rules` besides: {module type or dotted module name: rule class},
for modules Captum has no default rule for.

Layer methods return layer-shaped maps; their channels are summed and the result upsampled bilinearly to the
input, like Grad-CAM. Captum's random draws (GradientShap, Lime, ...) are keyed by (the run's seed, the class,
each image's index): a class that draws runs one image per call (roarfast.methods.draws).
"""

import inspect
from functools import partial

import torch.nn.functional as F

from roarfast.errors import UserError
from roarfast.methods.captum_outline import PREFIX, RULES, captum_record, needs_rules, outline_of_class, refusal
from roarfast.methods.declaration import Estimator
from roarfast.methods.identity import captum_identity
from roarfast.methods.model_context import cam_layer
from roarfast.methods.draws import keyed_per_image, stream_of


def _captum_attr():
    try:
        import captum.attr
    except ImportError:
        raise UserError("captum:<ClassName> methods need captum: pip install captum") from None
    return captum.attr


def attribution_class(name: str):
    """The captum.attr class called `name`, or a UserError saying why it cannot be used (captum_outline.refusal)."""
    attr = _captum_attr()
    cls = getattr(attr, name, None)
    why = refusal(outline_of_class(cls, attr)) if inspect.isclass(cls) else "is not a captum.attr attribution class"
    if why is None:
        return cls
    if why.startswith("is not a captum.attr"):
        known = sorted(n for n in dir(attr) if inspect.isclass(getattr(attr, n))
                       and issubclass(getattr(attr, n), attr.Attribution))
        why += f"; captum.attr has: {' '.join(known)}"
    raise UserError(f"captum:{name} {why}")


def captum_estimator(name: str) -> Estimator:
    """The record of captum:<name>, read from its class's signatures (captum_outline.captum_record)."""
    cls = attribution_class(name)
    return captum_record(outline_of_class(cls, _captum_attr()), partial(captum_maps, name=name), captum_identity(cls))


def captum_maps(model, batch, target, params, name: str):
    """Maps of captum.attr.<name> for batch.x (Tensor[B, C, H, W]) -> float32 Tensor[B, C, H, W] or
    Tensor[B, 1, H, W] (layer methods)."""
    attr = _captum_attr()
    cls = attribution_class(name)
    init, attribute = _signature(cls.__init__), _signature(cls.attribute)
    rules_needed = needs_rules(outline_of_class(cls, attr))
    args = dict(params.args)
    rules = args.pop(RULES, None)
    built = {arg: _captum_value(value) for arg, value in args.items() if arg in init}
    if "layer" in init:
        built["layer"] = cam_layer(model, params.gradcam_layer)
    method = cls(model, **built)
    kwargs = {arg: _captum_value(value) for arg, value in args.items() if arg in attribute}
    if "n_steps" in attribute:
        kwargs["n_steps"] = params.ig_steps

    def call(rows):
        if rules_needed:  # each call: Captum removes the rules after one
            _attach_rules(model, name, rules or {})
        x = batch.x[rows].detach().requires_grad_(True)
        own = dict(kwargs)
        if "target" in attribute:
            own["target"] = None if target is None else target[rows]
        if "baselines" in attribute and params.ig_baseline is not None:  # extraction always sets it (black)
            own["baselines"] = params.baseline(x).expand_as(x).contiguous()
        try:
            return method.attribute(x, **own).detach().float()
        except (TypeError, ValueError, RuntimeError, AssertionError) as err:
            given = ", ".join(f"{k}={v!r}" for k, v in args.items()) or "none"
            raise UserError(f"captum:{name} failed: {' '.join(str(err).split())} (--method-arg given: {given}; it "
                            f"takes {captum_estimator(name).accepted()})") from None

    x = batch.x
    maps = keyed_per_image(call, batch, params, stream_of(PREFIX + name))
    if isinstance(method, attr.LayerAttribution):
        if maps.dim() != 4:
            raise UserError(f"captum:{name} gave a layer map of shape {list(maps.shape)}; only conv layers "
                            "(Tensor[B, K, h, w]) can be upsampled to the input")
        maps = F.interpolate(maps.sum(1, keepdim=True), size=x.shape[2:], mode="bilinear", align_corners=False)
    return maps


def _signature(function) -> dict:
    """The named parameters of `function` (no *args, **kwargs)."""
    return {arg: p for arg, p in inspect.signature(function).parameters.items()
            if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)}


def _captum_value(value):
    """A --method-arg value as Captum takes it: YAML lists as tuples (shapes, strides)."""
    if isinstance(value, list):
        return tuple(_captum_value(v) for v in value)
    return value


def _attach_rules(model, name: str, rules) -> None:
    """Sets `rule` on every module `rules` names (by type name or dotted module name), for this call (Captum
    removes them after); refuses, naming them and how to pass a rule, modules Captum has no default rule for."""
    from captum.attr._core import lrp
    from captum.attr._utils import lrp_rules

    kinds = {n: c for n, c in vars(lrp_rules).items() if inspect.isclass(c) and issubclass(c, lrp_rules.PropagationRule)
             and c is not lrp_rules.PropagationRule}
    if not isinstance(rules, dict) or any(rule not in kinds for rule in rules.values()):
        raise UserError(f"--method-arg {RULES} for captum:{name} should map module types or names to one of "
                        f"{', '.join(sorted(kinds))}, got {rules!r}")
    known = (*lrp.SUPPORTED_LAYERS_WITH_RULES, *lrp.SUPPORTED_NON_LINEAR_LAYERS)
    leaves = [(n, m) for n, m in model.named_modules() if next(m.children(), None) is None]  # LRP rules the leaves
    chosen = {n: rules.get(n, rules.get(type(m).__name__)) for n, m in leaves}
    missing = [f"{type(m).__name__} ({n or 'the model'})" for n, m in leaves
               if chosen[n] is None and not hasattr(m, "rule") and type(m) not in known]
    if missing:
        example = missing[0].split(" ")[0]
        raise UserError(f"captum:{name} has no rule for {', '.join(missing)}: pass --method-arg "
                        f"'{RULES}={{{example}: EpsilonRule}}' (Study: method_args={{'{RULES}': {{'{example}': "
                        f"'EpsilonRule'}}}}); rules: {', '.join(sorted(kinds))}")
    for n, m in leaves:
        if chosen[n] is not None:
            m.rule = kinds[chosen[n]]()
