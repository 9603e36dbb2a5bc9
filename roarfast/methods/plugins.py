"""Estimators from outside roarfast: `--method package.module:function` on the command line, or the function
itself given to Study, with

    function(model, images, target) -> maps
    # images: normalized float Tensor[B, C, H, W] on the model's device; target: int64 Tensor[B], the
    # explained classes (predicted by default, --target label); the model is in eval mode, parameters
    # frozen; maps: Tensor[B, C, H, W] or Tensor[B, 1, H, W], larger = more important

and, when its signature takes them, keyword arguments from `--method-arg NAME=VALUE` (Study: method_args=).
Each gets a record (roarfast.methods.declaration.Estimator) under a readable name that says where it lives and
is unique: its import path (`package.module:function`, so the store directory, the report and a later
`--method` all use the one name); for an object with none (a notebook's function, a partial, a callable
instance), the name the user gives it (Study(methods={"noisy": partial(f, w=1.0)}): object:noisy), else
object:<its name>-<8 hex of its identity> (object:partial.f-3f2a9c1b), so two objects are two estimators and
the same object in a later session has the same name; one name given to two objects is refused
(check_distinct). Its code identity is its source file's hash, or for an object the digest of what it runs and
reads (roarfast.methods.identity), so an edited function makes new ranks. Its output is checked on every batch
(shape, NaN/Inf), and a plug-in that draws torch's random numbers draws them keyed by (the run's seed, its
name, each image's index), one image per call (roarfast.methods.draws), so it is reproducible like a built-in
and its ranks do not depend on the batching.
"""

import inspect
from functools import partial

from roarfast.errors import UserError
from roarfast.methods.declaration import ESTIMATORS, Estimator, first_line, parameters_of
from roarfast.methods.identity import file_identity, object_identity
from roarfast.common.plugins import (OBJECT_PREFIX, describe_error, given_object_name, import_object, import_path_of,
                              object_name)
from roarfast.common.resolver import IMPORT_PATH, OBJECT

FLAG = "--method"
#: the plug-ins recorded in this process, by name (a notebook redefines a function: the newer record wins)
_PLUGINS: dict[str, Estimator] = {}


def recorded(name: str) -> Estimator | None:
    """The record of a plug-in this process resolved under `name`, or None."""
    return _PLUGINS.get(name)


def register_plugin(spec, given=None) -> Estimator:
    """The record of the estimator an import path names, or of a Python object, kept under its name: an import
    path's, `given` (a name the user gave the object: object:<given>), else object:<its name>-<a digest of its
    identity> (roarfast.common.plugins.object_name), so that two different objects are two estimators."""
    if isinstance(spec, str):
        if given is not None:
            raise UserError(f"methods: the name {given!r} is given to {spec!r}; names are given to Python objects "
                            f"(methods={{{given!r}: function}}), an estimator named by text goes in a list")
        function, path = import_object(spec, FLAG), spec.strip()
    else:
        function, path = spec, import_path_of(spec)
    own = path if given is None else _given_name(given)  # the name it goes by, where it has one
    shown = own or object_name(function)
    if not callable(function):
        raise UserError(f"{FLAG} {shown}: expected a function(model, images, target), got {type(function).__name__}")
    arguments, required, any_argument = _keywords(shown, function)
    code = (file_identity(function) if path else None) or object_identity(function, shown)
    name = own or object_name(function, code["code_sha256"])
    record = Estimator(name, partial(plugin_maps, function, name), first_line(function), parameters_of(),
                       arguments=arguments, required=required, any_argument=any_argument, seeded=True,
                       form=IMPORT_PATH if name == path else OBJECT, code=code)
    _PLUGINS[name] = record
    return record


def check_distinct(records) -> None:
    """Refuses (UserError, one line) one name given to two different estimators (two identities) among
    `records`, the methods of one run."""
    codes = {}
    for record in records:
        if codes.setdefault(record.name, record.code) != record.code:
            raise UserError(f"methods: {record.name} names two different estimators; give each its own name "
                            f"(methods={{'name': object, ...}})")


def _given_name(given) -> str:
    """object:<given>, refused (UserError) when it is not a directory's name or is a built-in's (or a short
    form's), which a report would read as the built-in."""
    name = given_object_name(given, "methods")
    if name[len(OBJECT_PREFIX):] in ESTIMATORS:
        raise UserError(f"methods: {given!r} is a built-in estimator's name; give your estimator another name")
    return name


def plugin_maps(function, name: str, model, batch, target, params):
    """Calls function(model, images, target, **its arguments) for one batch, its random draws keyed per image
    (draws.keyed_per_image: image by image when it draws any); checks and returns its maps as float32
    Tensor[B, C or 1, H, W] on the images' device."""
    # late: loads torch, and --help imports this module
    from roarfast.methods.draws import keyed_per_image, stream_of

    x = batch.x.detach()

    def call(rows):
        images = x[rows]
        try:
            maps = function(model, images, None if target is None else target[rows], **params.args)
        except UserError:
            raise
        except Exception as err:  # noqa: BLE001  (the user's function: any failure is theirs to fix)
            raise UserError(f"{FLAG} {name} failed on images Tensor{list(images.shape)}: {describe_error(err)}") \
                from None
        return check_maps(name, maps, images)

    return keyed_per_image(call, batch, params, stream_of(name))


def check_maps(name: str, maps, x):
    """maps (Tensor[B, C or 1, H, W] for images x) as float32 on x's device, or a UserError naming the method."""
    # late: loads torch, and --help imports this module
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
