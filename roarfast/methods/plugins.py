"""Estimators from outside roarfast: `--method package.module:function` on the command line, or the function
itself given to Study, with

    function(model, images, target) -> maps
    # images: normalized float Tensor[B, C, H, W] on the model's device; target: int64 Tensor[B], the
    # explained classes (predicted by default, --target label); the model is in eval mode, parameters
    # frozen; maps: Tensor[B, C, H, W] or Tensor[B, 1, H, W], larger = more important

Each is registered (roarfast.methods.registry) under a readable name that says where it lives and is
unique: its import path (`package.module:function`, so the store directory, the report and a later
`--method` all use the one name), or object:<name> for a function with none (a notebook's, a script's
__main__). Its output is checked on every batch (shape, NaN/Inf) and the run's seed seeds torch's
random numbers around each call, so a plug-in that draws them is reproducible like a built-in.
"""

import inspect
from functools import partial

from roarfast.errors import UserError
from roarfast.plugins import describe_error, import_object, import_path_of, object_name, source_sha256

FLAG = "--method"
#: separates a plug-in's random stream from the other per-batch randomness keyed by the same seed
PLUGIN_STREAM = 3


def register_plugin(spec) -> str:
    """Registers the estimator an import path names (or a function object) and returns its name."""
    from roarfast.methods.registry import Estimator, add

    if isinstance(spec, str):
        name, function = spec.strip(), import_object(spec, FLAG)
    else:
        function = spec
        if "<" in getattr(function, "__qualname__", ""):  # a lambda or a nested function: no name to store under
            raise UserError(f"{FLAG}: an estimator function needs a name to store its ranks under, got "
                            f"{function.__qualname__}; define it with def at module level")
        name = import_path_of(function) or object_name(function)
    if not callable(function):
        raise UserError(f"{FLAG} {name}: expected a function(model, images, target), got {type(function).__name__}")
    _check_signature(name, function)
    add(Estimator(name, partial(plugin_maps, function, name), target="given", plugin=True,
                   source_sha256=source_sha256(function)))
    return name


def plugin_maps(function, name: str, model, batch, target, params):
    """Calls function(model, images, target) for one batch under the batch's seed; checks and returns its
    maps as float32 Tensor[B, C or 1, H, W] on the images' device."""
    import torch

    from roarfast.methods.params import derive_seed

    x = batch.x.detach()
    seed = derive_seed(params.seed_for(batch), PLUGIN_STREAM, int(batch.index[0]) if batch.index.numel() else 0)
    with torch.random.fork_rng(devices=[x.device] if x.device.type == "cuda" else []):
        torch.manual_seed(seed)
        try:
            maps = function(model, x, target)
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


def _check_signature(name: str, function) -> None:
    """Refuses a function that cannot take (model, images, target) before any image is processed."""
    try:
        inspect.signature(function).bind(None, None, None)
    except TypeError as err:
        raise UserError(f"{FLAG} {name} should take (model, images, target): {err}") from None
    except ValueError:
        pass  # no signature to read (a builtin): the first call tells
