"""Estimators from outside roarfast: `--method package.module:function` on the command line, or the function
itself given to Study, with

    function(model, images, target) -> maps
    # images: normalized float Tensor[B, C, H, W] on the model's device; target: int64 Tensor[B], the
    # explained classes (predicted by default, --target label); the model is in eval mode, parameters
    # frozen; maps: Tensor[B, C, H, W] or Tensor[B, 1, H, W], larger = more important

and, when its signature takes them, keyword arguments from `--method-arg NAME=VALUE` (Study: method_args=).
Each gets a record (roarfast.methods.declaration.Estimator) under a readable name that says where it lives and
is unique: its import path (`package.module:function`, so the store directory, the report and a later
`--method` all use the one name), or object:<name> for a function with none (a notebook's, a script's
__main__). Its code identity is its source file's hash, or for an object the digest of what it runs
(roarfast.methods.identity), so an edited function makes new ranks. Its output is checked on every batch
(shape, NaN/Inf) and the run's seed seeds torch's random numbers around each call, so a plug-in that draws
them is reproducible like a built-in.
"""

import inspect
from functools import partial

from roarfast.errors import UserError
from roarfast.methods.declaration import Estimator, first_line, parameters_of
from roarfast.methods.identity import file_identity, object_identity
from roarfast.plugins import describe_error, import_object, import_path_of, object_name
from roarfast.resolver import IMPORT_PATH, OBJECT

FLAG = "--method"
#: separates a plug-in's random stream from the other per-batch randomness keyed by the same seed
PLUGIN_STREAM = 3
#: the plug-ins recorded in this process, by name (a notebook redefines a function: the newer record wins)
_PLUGINS: dict[str, Estimator] = {}


def recorded(name: str) -> Estimator | None:
    """The record of a plug-in this process resolved under `name`, or None."""
    return _PLUGINS.get(name)


def register_plugin(spec) -> Estimator:
    """The record of the estimator an import path names (or of a function object), kept under its name."""
    if isinstance(spec, str):
        name, function, form = spec.strip(), import_object(spec, FLAG), IMPORT_PATH
    else:
        function = spec
        if "<" in getattr(function, "__qualname__", ""):  # a lambda or a nested function: no name to store under
            raise UserError(f"{FLAG}: an estimator function needs a name to store its ranks under, got "
                            f"{function.__qualname__}; define it with def at module level")
        path = import_path_of(function)
        name, form = (path, IMPORT_PATH) if path else (object_name(function), OBJECT)
    if not callable(function):
        raise UserError(f"{FLAG} {name}: expected a function(model, images, target), got {type(function).__name__}")
    arguments, required, any_argument = _keywords(name, function)
    code = (file_identity(function) if form == IMPORT_PATH else None) or object_identity(function, name)
    record = Estimator(name, partial(plugin_maps, function, name), first_line(function), parameters_of(),
                       arguments=arguments, required=required, any_argument=any_argument, seeded=True, form=form,
                       code=code)
    _PLUGINS[name] = record
    return record


def plugin_maps(function, name: str, model, batch, target, params):
    """Calls function(model, images, target, **its arguments) for one batch under the batch's seed; checks and
    returns its maps as float32 Tensor[B, C or 1, H, W] on the images' device."""
    from roarfast.methods.params import seeded

    x = batch.x.detach()
    with seeded(batch, params, PLUGIN_STREAM):
        try:
            maps = function(model, x, target, **params.args)
        except UserError:
            raise
        except Exception as err:  # noqa: BLE001  (the user's function: any failure is theirs to fix)
            raise UserError(f"{FLAG} {name} failed on images Tensor{list(x.shape)}: {describe_error(err)}") from None
    return check_maps(name, maps, x)


def check_maps(name: str, maps, x):
    """maps (Tensor[B, C or 1, H, W] for images x) as float32 on x's device, or a UserError naming the method."""
    import torch

    b, c, h, w = x.shape
    expected = f"Tensor[{b}, {c} or 1, {h}, {w}]"
    if not isinstance(maps, torch.Tensor):
        raise UserError(f"{FLAG} {name} should return maps {expected}, got {type(maps).__name__}")
    if maps.dim() != 4 or maps.shape[0] != b or maps.shape[1] not in (1, c) or tuple(maps.shape[2:]) != (h, w):
        raise UserError(f"{FLAG} {name} should return maps {expected} for images Tensor{list(x.shape)}, got "
                        f"Tensor{list(maps.shape)}")
    maps = maps.detach().to(device=x.device, dtype=torch.float32)
    bad = ~torch.isfinite(maps)
    if bool(bad.any()):
        rows = bad.flatten(1).any(1).nonzero().flatten().tolist()
        raise UserError(f"{FLAG} {name} returned NaN or Inf in {int(bad.sum())} values (rows {rows[:5]} of the "
                        f"batch); scores must be finite")
    return maps


def _keywords(name: str, function) -> tuple[dict, tuple, bool]:
    """(the keyword arguments it takes beyond (model, images, target), name -> where; those without a default;
    whether it takes any keyword). Refuses a function that cannot take (model, images, target) before any image
    is processed."""
    try:
        signature = inspect.signature(function)
    except ValueError:
        return {}, (), False  # no signature to read (a builtin): the first call tells
    try:
        bound = signature.bind_partial(None, None, None)
    except TypeError as err:
        raise UserError(f"{FLAG} {name} should take (model, images, target): {err}") from None
    rest = [p for p in signature.parameters.values() if p.name not in bound.arguments]
    unfilled = [p.name for p in rest if p.kind == p.POSITIONAL_ONLY and p.default is p.empty]
    if unfilled:
        raise UserError(f"{FLAG} {name} should take (model, images, target): it also needs {', '.join(unfilled)} "
                        f"by position")
    keywords = [p for p in rest if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    return ({p.name: f"a keyword argument of {name}" for p in keywords},
            tuple(p.name for p in keywords if p.default is p.empty),
            any(p.kind == p.VAR_KEYWORD for p in signature.parameters.values()))
