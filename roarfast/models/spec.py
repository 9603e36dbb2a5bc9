"""The model resolver: what `--model` (and Study's `model=`) may name, turned into a ModelSpec that builds
the network and says where it came from. The forms are those MODELS reads (roarfast.models.registry):

    built-in name           fastnet, fastnet-gpu, resnet8, resnet18, resnet50: the modules of roarfast.models
    package.module:factory  factory(num_classes, image_size, in_channels) -> nn.Module, imported from the
                            working directory or PYTHONPATH
    timm:<name>             timm.create_model(name, num_classes=, in_chans=), random init (roarfast[timm])
    object:<name>           a Python object this process was given before (below), by the name its run records
    a Python object         (Study) a factory, or an nn.Module whose copies are re-initialized per training

A run records the spec's `name` and `source_sha256` (the factory's source file) in the base checkpoint;
the stages rebuild the network from the name and refuse a source that changed since. A recorded name is
resolved with `recorded_in`: an import path only where the user named it again or trusts the run directory
(roarfast.common.plugins.check_recorded), a timm: name only when timm lists it.
"""

import copy
import difflib
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from roarfast.errors import UserError
from roarfast.models.registry import FLAG, MODELS, TIMM_PREFIX, build_model
from roarfast.common.plugins import describe_error, import_object, import_path_of, object_name, source_sha256
from roarfast.common.resolver import BUILTIN, IMPORT_PATH, RECORDED_OBJECT, SCHEME

#: images in the output check of a factory (two, so that a model that mixes the batch is caught too)
PROBE_IMAGES = 2

#: models that came as Python objects without an import path, by the name their runs record: a Study
#: registers them here so that the stages, which pass names, rebuild them in this process
_OBJECTS: dict[str, "ModelSpec"] = {}


@dataclass(frozen=True)
class ModelSpec:
    """A model as a run knows it: `name` (recorded: a built-in name, timm:<name>, package.module:factory or
    object:<name>), `factory(num_classes, image_size, in_channels) -> nn.Module`, the sha256 of the
    factory's source file (None for built-ins and objects) and whether it is a built-in (its tuned recipe)."""

    name: str
    factory: Callable
    source_sha256: str | None = None
    builtin: bool = False

    def build(self, num_classes: int, image_size: int, in_channels: int):
        """A freshly initialized network; a UserError when the factory fails or returns no nn.Module."""
        # late: loads torch, and --help imports this module
        from torch import nn

        try:
            model = self.factory(num_classes, image_size, in_channels)
        except UserError:
            raise
        except Exception as err:  # noqa: BLE001  (the user's factory: any failure is theirs to fix)
            if self.builtin:
                raise
            raise UserError(f"{FLAG} {self.name}: factory(num_classes={num_classes}, image_size={image_size}, "
                            f"in_channels={in_channels}) failed: {describe_error(err)}") from None
        if not isinstance(model, nn.Module):
            raise UserError(f"{FLAG} {self.name}: the factory should return a torch.nn.Module, got "
                            f"{type(model).__name__}")
        return model

    def check(self, num_classes: int, image_size: int, in_channels: int) -> None:
        """Builds one network and runs PROBE_IMAGES zero images through it in eval mode: a UserError naming
        --model unless it returns logits Tensor[PROBE_IMAGES, num_classes]."""
        # late: loads torch, and --help imports this module
        import torch

        model = self.build(num_classes, image_size, in_channels).eval()
        shape = (PROBE_IMAGES, in_channels, image_size, image_size)
        try:
            with torch.no_grad():
                out = model(torch.zeros(shape))
        except Exception as err:  # noqa: BLE001
            raise UserError(f"{FLAG} {self.name}: its forward on a batch Tensor{list(shape)} failed: "
                            f"{describe_error(err)}") from None
        if not isinstance(out, torch.Tensor) or tuple(out.shape) != (PROBE_IMAGES, num_classes):
            got = list(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
            raise UserError(f"{FLAG} {self.name}: for images Tensor{list(shape)} it should return logits "
                            f"Tensor[{PROBE_IMAGES}, {num_classes}] (num_classes), got {got}")


def resolve_model(spec, *, recorded_in=None) -> ModelSpec:
    """The ModelSpec of a built-in name, `package.module:factory`, `timm:<name>`, a name an earlier
    resolve_model recorded for an object, or a Python object (a factory, or an nn.Module instance).
    recorded_in: the run-directory file the name was read from (roarfast.common.resolver.Resolver.query)."""
    if isinstance(spec, ModelSpec):
        return spec
    query = MODELS.query(spec, recorded_in=recorded_in)
    if query.form == BUILTIN:
        return ModelSpec(query.entry.name, partial(build_model, query.entry.name), builtin=True)
    if query.form == SCHEME:
        return query.scheme.load()(query.rest)
    if query.form == RECORDED_OBJECT:
        if query.text not in _OBJECTS:
            raise UserError(f"{FLAG} {query.text}: this model was a Python object given to roarfast.Study; the "
                            f"command line cannot rebuild it: pass the same object again, roarfast.Study(run_dir, "
                            f"model=...), or train another with --model NAME|package.module:factory")
        return _OBJECTS[query.text]
    if query.form == IMPORT_PATH:
        factory = import_object(query.text, FLAG)
        if not callable(factory):
            raise UserError(f"{FLAG} {query.text}: expected a factory(num_classes, image_size, in_channels), got "
                            f"{type(factory).__name__}")
        return ModelSpec(query.text, factory, source_sha256(factory))
    return _from_object(query.obj)


def check_source(spec: ModelSpec, recorded: str | None, where) -> None:
    """Refuses, naming both hashes, a model whose factory's source file changed since a run recorded it."""
    if recorded is not None and spec.source_sha256 != recorded:
        raise UserError(f"{FLAG} {spec.name}: the model in {where} was built from a factory source with sha256 "
                        f"{recorded}, which now has sha256 {spec.source_sha256}; restore that source, or train "
                        f"a new base model in another run directory")


def _from_object(obj) -> ModelSpec:
    """A factory or an nn.Module given as a Python object: by its import path when it has one (so the
    command line can go on with the run), else registered under object:<name> for this process."""
    # late: loads torch, and --help imports this module
    from torch import nn

    if isinstance(obj, nn.Module):
        spec = ModelSpec(object_name(obj), partial(_fresh_copy, obj))
    elif callable(obj):
        path = import_path_of(obj)
        if path is not None:
            return ModelSpec(path, obj, source_sha256(obj))
        spec = ModelSpec(object_name(obj), obj)
    else:
        raise UserError(f"model should be {MODELS.forms()}, a factory(num_classes, image_size, in_channels) or an "
                        f"nn.Module, got {type(obj).__name__}")
    _OBJECTS[spec.name] = spec  # a notebook that redefines its class replaces the old one
    return spec


def _fresh_copy(template, num_classes: int, image_size: int, in_channels: int):
    """A copy of the nn.Module `template` with every submodule's reset_parameters() run (under the training's
    seed): a retraining starts from scratch, not from the template's weights."""
    model = copy.deepcopy(template)
    for module in model.modules():
        reset = getattr(module, "reset_parameters", None)
        if callable(reset):
            reset()
    return model


def timm_model(name: str) -> ModelSpec:
    """The ModelSpec of `timm:<name>` (MODELS' timm scheme): random weights, its source the file of the
    model's entry point."""
    try:
        import timm
    except ImportError:
        raise UserError(f"{FLAG} {TIMM_PREFIX}{name}: timm models need timm: pip install 'roarfast[timm]'") from None
    if not timm.is_model(name):
        close = difflib.get_close_matches(name, timm.list_models(), n=3)
        hint = f"; close: {', '.join(close)}" if close else " (timm.list_models() lists them)"
        raise UserError(f"{FLAG} {TIMM_PREFIX}{name}: timm has no model {name!r}{hint}")
    return ModelSpec(TIMM_PREFIX + name, partial(_create_timm, name),
                     source_sha256(timm.models.model_entrypoint(name)))


def _create_timm(name: str, num_classes: int, image_size: int, in_channels: int):
    """timm.create_model with random weights; transformers take the image size, convolutional nets refuse it."""
    import timm

    try:
        return timm.create_model(name, pretrained=False, num_classes=num_classes, in_chans=in_channels,
                                 img_size=image_size)
    except TypeError:
        return timm.create_model(name, pretrained=False, num_classes=num_classes, in_chans=in_channels)
