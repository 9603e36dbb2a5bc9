"""The estimator parameters, each written once: its name, default, check and help. Every consumer reads this
table: the estimators' records (what each reads, roarfast.methods.declaration), `MethodParams` and
`ExtractOptions` (their fields, made from it by `parameter_fields`), the rank store's provenance, and the
`extract` command's flags (their defaults and help). The two options of ranking (granularity, reduction) and the
compute batch are here too: a store records them beside the estimator's parameters.

A built-in estimator with a parameter of its own declares it in its own module (`Parameter(...)` given to
`register`); users set it with `--method-arg NAME=VALUE`.

Light on purpose (no torch): the CLI builds its options from here.
"""

import math
from collections.abc import Callable
from dataclasses import dataclass

from roarfast.errors import UserError

#: what --method-arg values may be (the store records them as JSON)
_PLAIN = (type(None), bool, int, float, str, list, tuple, dict)


@dataclass(frozen=True)
class Parameter:
    """One parameter an estimator reads.

    Attributes:
        name: its name in records, in ExtractOptions and in `--method-arg NAME=VALUE`.
        default: the value when nothing sets it.
        help: one line for --help and for messages.
        kind: int, float or str (the value is checked to be one; None: any plain value).
        minimum: the smallest value allowed (a number), or None.
        choices: the values allowed, or () for any.
        flags: the `extract` command's flags that set it ("--samples"); () for --method-arg only.
        validate: a check of its own, validate(value, where) -> value, for values the fields above cannot say.
    """

    name: str
    default: object
    help: str
    kind: type | None = None
    minimum: float | None = None
    choices: tuple = ()
    flags: tuple = ()
    validate: Callable | None = None

    def check(self, value, where: str | None = None):
        """`value` when it is one this parameter takes (an int for a float is taken as is), else a UserError
        naming `where` (default: its first flag, else `--method-arg NAME`)."""
        where = where or (self.flags[0] if self.flags else f"--method-arg {self.name}")
        if self.validate is not None:
            return self.validate(value, where)
        if value is None and self.default is None:
            return value
        if self.choices and value not in self.choices:
            raise UserError(f"{where} should be one of {', '.join(map(str, self.choices))}, got {value!r}")
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        kinds = {int: number and isinstance(value, int), float: number and math.isfinite(value),
                 str: isinstance(value, str), None: True}
        if not kinds[self.kind] or (self.minimum is not None and value < self.minimum):
            raise UserError(f"{where} should be {_kind_text(self.kind, self.minimum)}, got {value!r}")
        return value


def _kind_text(kind, minimum) -> str:
    if kind is int and minimum == 1:
        return "a positive int"
    text = {int: "an int", float: "a number", str: "text", None: "a value"}[kind]
    return text if minimum is None else f"{text} >= {minimum:g}"


def _check_baseline(value, where: str):
    """black, or a non-empty list of finite numbers."""
    if value == "black" or (isinstance(value, (list, tuple)) and value and all(
            isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in value)):
        return value
    raise UserError(f"{where} should be black or one normalized value per channel ([v1, v2, v3]), got {value!r}")


#: the parameters the built-in estimators share (and Captum's classes, where their signature takes them)
PARAMETERS = {p.name: p for p in (
    Parameter("samples", 15, "noisy samples of the SmoothGrad family", kind=int, minimum=1, flags=("--samples",)),
    Parameter("noise_level", 0.15, "sigma = noise level x (max - min) of each image", kind=float, minimum=0,
              flags=("--noise-level",)),
    Parameter("ig_steps", 25, "integrated-gradients steps (Riemann midpoint)", kind=int, minimum=1,
              flags=("--ig-steps",)),
    Parameter("ig_baseline", "black", "the baseline of integrated gradients (and of Captum classes that take "
              "baselines): black (the normalized value of a black pixel), or one normalized value per channel",
              validate=_check_baseline),
    Parameter("target", "predicted", "the explained class", kind=str, choices=("predicted", "label"),
              flags=("--target",)),
    Parameter("gradcam_layer", None, "dotted module name of the Grad-CAM layer (and of Captum's layer classes; "
              "default: the model's cam_layer, else its last Conv2d)", kind=str,
              flags=("--cam-layer", "--gradcam-layer")),
)}

#: how maps are computed and become ranks: not an estimator's parameters, but recorded beside them (every store is
#: ranked so; a compute batch that a request sets is part of its ranks' identity: roarfast.methods.batches)
RANKING = {p.name: p for p in (
    Parameter("granularity", "pixel", "rank pixels (channels reduced) or every C*H*W value", kind=str,
              choices=("pixel", "value"), flags=("--granularity",)),
    Parameter("reduction", "sum_sq", "how channels fold into one pixel score", kind=str,
              choices=("sum_sq", "abs_sum", "max"), flags=("--reduction",)),
    # its flag stands beside --chunk-images (roarfast.cli.options.compute_batch_option), in extract and in sweep
    Parameter("compute_batch", None, "images the estimators take at once, aligned to image indices (default: by "
              "device and image size); set, it is part of the ranks' identity", kind=int, minimum=1),
)}


def parameter_fields(*tables, **defaults):
    """Class decorator, applied under @dataclass: one field per parameter of `tables` (its name, its table's
    default, or the one `defaults` gives it), after the fields the class declares; so a parameter is spelled
    once, here, and every options class that holds it takes it by that name."""

    def decorate(cls):
        annotations = dict(cls.__dict__.get("__annotations__", {}))
        for table in tables:
            for name, parameter in table.items():
                annotations[name] = object
                setattr(cls, name, defaults.get(name, parameter.default))
        cls.__annotations__ = annotations
        return cls

    return decorate


def check_method_args(args) -> dict:
    """`--method-arg` NAME=VALUE pairs as a dict: names are identifiers, values plain (number, text, list,
    mapping), the shared parameters' values checked here."""
    if args is None:
        return {}
    if not isinstance(args, dict):
        raise UserError(f"method arguments should be a mapping of names to values, got {type(args).__name__}")
    for name, value in args.items():
        if not isinstance(name, str) or not name.isidentifier():
            raise UserError(f"--method-arg {name!r}: a name should be an identifier (NAME=VALUE)")
        if not _plain(value):
            raise UserError(f"--method-arg {name}: {value!r} is not a plain value (a number, text, list or mapping)")
        if name in PARAMETERS:
            PARAMETERS[name].check(value, f"--method-arg {name}")
    return dict(args)


def _plain(value) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, (list, tuple)):
        return all(_plain(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _plain(v) for k, v in value.items())
    return isinstance(value, _PLAIN)
