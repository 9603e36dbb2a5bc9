"""What an estimator is: one record (`Estimator`) per estimator, for every form it comes in (a built-in, a
`captum:` class, an import path, a Python function), declared where it is defined, never guessed from its
name. Every consumer reads the record, resolved once per stage into a Selection (selection.py: the rank
store's provenance, which methods use the model), the model's requirements (requirements.py), the compute
path (compute.py), the command line's options.

The built-ins register here: one module each in roarfast/methods/estimators/, discovered by the resolver
`ESTIMATORS` at its first lookup, with

    @register("name", reads=("target",), ...)
    def name(model, batch, target, params): ...

Light on purpose (no torch): the CLI lists the built-ins from here.
"""

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from roarfast.methods.parameters import PARAMETERS, RANKING, Parameter
from roarfast.common.resolver import BUILTIN, Entry, Resolver, Scheme, declaring_module
from roarfast.version import __version__

#: what an estimator may need of the model (Estimator.requires; checked by roarfast.methods.requirements):
#: nn.ReLU modules to guide (guided backprop), a conv layer to take the activations of (Grad-CAM)
RELU_MODULES, CONV_LAYER = "relu-modules", "conv-layer"
#: how an estimator gets the explained class: "given" (a Tensor[B] up front), "own" (None = predicted, found in
#: its own forward) or "none" (it explains no class)
TARGET_MODES = ("given", "own", "none")
#: short forms accepted on the command line, and the built-ins they mean
ALIASES = {"sg": "sg-grad", "sg-sq": "sg-sq-grad", "var": "var-grad"}
#: the code identity of every built-in: the roarfast release it belongs to
BUILTIN_CODE = {"roarfast": __version__}
#: the keying of random draws (roarfast.methods.draws) that a seeded estimator's rank identity records: per image,
#: (seed, estimator, image index, sample); a store recording none was keyed per batch (its first image)
KEYING = "image"


@dataclass(frozen=True)
class Estimator:
    """One estimator, as every consumer sees it.

    Attributes:
        name: its canonical name (the rank store's directory, the results' method column).
        compute: fn(model, batch, target, params) -> float32 Tensor[B, C or 1, H, W]; with `shared`,
            fn(model, batch, target, params, names) -> {name: Tensor}. `params.args` holds its own arguments.
        description: one line, for the --method help.
        parameters: what it reads, each with its default (roarfast.methods.parameters); recorded with their
            values in its rank store.
        arguments: further arguments it takes when given (`--method-arg`), name -> where it goes (Captum's
            constructor or attribute(), a plug-in's keyword); recorded when given.
        required: the arguments it cannot run without.
        any_argument: it takes any argument name (a plug-in with **kwargs).
        uses_model: False for ranks that ignore the model (random, sobel, oracle): stored without a checkpoint
            hash, computed without loading one.
        seeded: its maps depend on the run's seed (it draws random numbers, keyed by the seed).
        keying: how a seeded estimator's draws are keyed, recorded in its ranks' identity: KEYING, or None for
            one keyed per image before the identity said so (random), whose stores keep their ids.
        target_mode: how it gets the explained class (TARGET_MODES).
        requires: what it needs of the model (RELU_MODULES, CONV_LAYER), checked before any image.
        ground_truth: it needs the dataset's ground-truth importance masks.
        shared: the estimators one call computes together (one set of noisy samples), or None.
        base: the estimator whose maps this one aggregates (a SmoothGrad family member's gradient estimator:
            grad for sg-sq-grad), or None.
        compilable: its maps stay right when the model is torch.compile'd (False for anything that hooks
            modules, and for anything not checked).
        cites: the keys of the papers it comes from (roarfast.report.citations holds their BibTeX), cited where
            a paper's methods paragraph names it.
        form: where it came from (roarfast.common.resolver's BUILTIN, SCHEME, IMPORT_PATH, OBJECT).
        code: the identity of its code (roarfast.methods.identity), recorded in its rank store.
    """

    name: str
    compute: Callable
    description: str = ""
    parameters: tuple[Parameter, ...] = ()
    arguments: Mapping[str, str] = field(default_factory=dict)
    required: tuple[str, ...] = ()
    any_argument: bool = False
    uses_model: bool = True
    seeded: bool = False
    keying: str | None = KEYING
    target_mode: str = "given"
    requires: tuple[str, ...] = ()
    ground_truth: bool = False
    shared: tuple[str, ...] | None = None
    base: str | None = None
    compilable: bool = False
    cites: tuple[str, ...] = ()
    form: str = BUILTIN
    code: Mapping = field(default_factory=lambda: dict(BUILTIN_CODE))

    def __post_init__(self):
        if self.target_mode not in TARGET_MODES:
            raise ValueError(f"target_mode should be one of {', '.join(TARGET_MODES)}, got {self.target_mode!r}")
        if not self.uses_model and self.target_mode == "own":
            raise ValueError(f"estimator {self.name!r} finds the predicted class in its own forward, so it uses "
                             f"the model")

    @property
    def parameter_names(self) -> list[str]:
        return [p.name for p in self.parameters]

    def takes(self, name: str) -> bool:
        """Whether `--method-arg name=...` reaches it (a parameter it reads, or an argument it takes)."""
        return name in self.parameter_names or self._takes_argument(name)

    def accepted(self) -> str:
        """The names it takes, for messages."""
        names = self.parameter_names + [name for name in self.arguments if name not in self.parameter_names]
        return (", ".join(names) or "nothing") + (" and any keyword" if self.any_argument else "")

    def values(self, shared: Mapping, args: Mapping) -> dict:
        """What makes its maps: each parameter it reads with its value (from `args`, the --method-arg values,
        else `shared`, the run's values of the shared parameters, else its default), and the arguments it takes
        among `args`."""
        out = {p.name: args[p.name] if p.name in args else shared.get(p.name, p.default) for p in self.parameters}
        out.update({name: value for name, value in args.items() if name not in out and self._takes_argument(name)})
        return out

    def call_arguments(self, args: Mapping) -> dict:
        """What its compute function gets as `params.args`: its own parameters (those not shared, which
        MethodParams holds) with their values, and the arguments it takes among `args`."""
        out = {p.name: args.get(p.name, p.default) for p in self.parameters if p.name not in PARAMETERS}
        out.update({name: value for name, value in args.items() if self._takes_argument(name)})
        return out

    def _takes_argument(self, name: str) -> bool:
        if name in self.parameter_names:
            return False
        return name in self.arguments or (self.any_argument and name not in PARAMETERS)


def parameters_of(reads=(), own=(), target_mode: str = "given") -> tuple[Parameter, ...]:
    """The parameters an estimator reads: the shared ones it names (`reads`, keys of PARAMETERS; "target"
    whenever it explains a class), then its own (`own`, Parameter objects, names not taken)."""
    names = list(reads) + (["target"] if target_mode != "none" and "target" not in reads else [])
    unknown = [name for name in names if name not in PARAMETERS]
    if unknown:
        raise ValueError(f"unknown shared parameters {unknown}; the shared ones: {', '.join(PARAMETERS)}")
    clash = [p.name for p in own if p.name in PARAMETERS or p.name in RANKING]
    if clash:
        raise ValueError(f"parameter names {clash} are taken by the shared parameters; pick others")
    return tuple(PARAMETERS[name] for name in names) + tuple(own)


ESTIMATORS = Resolver(
    "estimator", "--method", package="roarfast.methods.estimators",
    schemes=[Scheme("captum:", "roarfast.methods.captum_adapter:captum_estimator", "any attribution class of "
                    "captum.attr, e.g. captum:IntegratedGradients")],
    aliases=ALIASES, case_sensitive=False,
    import_form="package.module:function (function(model, images, target) -> maps [B, C or 1, H, W])")


def register(name: str, description: str | None = None, *, reads=(), parameters=(), uses_model: bool = True,
             seeded: bool = False, keying: str | None = KEYING, target_mode: str = "given", requires=(),
             ground_truth: bool = False, compilable: bool = False, order: float = 0.0, cites=()):
    """Decorator: registers `fn(model, batch, target, params) -> Tensor` as the built-in `name`.

    Args:
        description: one line for the --method help (default: the first line of fn's docstring).
        reads: the shared parameters it reads (keys of roarfast.methods.parameters.PARAMETERS; "target" is
            added whenever target_mode is not "none").
        parameters: Parameter objects of its own (read in fn as params.args[name]; set by --method-arg).
        order: its place in the listing and in 'all' (then the module that defines fn, then the order of
            registration).
        The rest: the fields of Estimator.
    """

    def decorate(fn):
        _add(Estimator(name, fn, description or first_line(fn), parameters_of(reads, parameters, target_mode),
                       uses_model=uses_model, seeded=seeded, keying=keying, target_mode=target_mode,
                       requires=tuple(requires), ground_truth=ground_truth, compilable=compilable,
                       cites=tuple(cites)), order)
        return fn

    return decorate


def register_shared(names: Mapping[str, str], *, reads=(), uses_model: bool = True, seeded: bool = False,
                    target_mode: str = "given", requires=(), compilable: bool = False, order: float = 0.0,
                    base: str | None = None, cites: Mapping[str, tuple] | None = None):
    """Decorator: registers `fn(model, batch, target, params, names) -> {name: Tensor}`, which computes any
    subset of `names` (name -> description) from one piece of shared work, as one built-in per name (`base`:
    the estimator whose maps they aggregate, if any; `cites`: name -> the keys of its papers)."""

    def decorate(fn):
        for name, description in names.items():
            _add(Estimator(name, fn, description, parameters_of(reads, (), target_mode), uses_model=uses_model,
                           seeded=seeded, target_mode=target_mode, requires=tuple(requires),
                           shared=tuple(names), base=base, compilable=compilable,
                           cites=tuple((cites or {}).get(name, ()))), order)
        return fn

    return decorate


def _add(estimator: Estimator, order: float) -> None:
    if estimator.name in ALIASES or ":" in estimator.name:  # ':' belongs to captum:, object: and import paths
        raise ValueError(f"estimator name {estimator.name!r} is taken by a short form or a name form")
    ESTIMATORS.register(Entry(estimator.name, estimator.description, value=estimator,
                              options={p.name: p.default for p in estimator.parameters}, order=order,
                              module=declaring_module(estimator.compute)))


def first_line(fn) -> str:
    """The first line of fn's docstring ("" without one): an estimator's description when none is given."""
    return (getattr(fn, "__doc__", None) or "").strip().split("\n")[0]
