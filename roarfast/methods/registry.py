"""The estimator registry: method names -> the functions that compute their maps.

An estimator is `fn(model, batch, target, params) -> Tensor[B, C, H, W] or Tensor[B, 1, H, W]`
(float32, unreduced), registered with `@register("name")`. `target` is an int64 Tensor[B] of
explained classes, found once by compute_maps. Two registrations save that forward pass:
`target="own"` (the estimator accepts target=None, meaning the predicted class, and takes the argmax
from its own forward) and `target="none"` (the estimator ignores the classes).

Estimators that share work (the SmoothGrad family: one set of noisy gradients gives SG, SG-SQ and
VAR) register together with `@register_shared(*names)` as
`fn(model, batch, target, params, names) -> dict[name, Tensor]`.

This is the estimator resolver: parse_methods turns every form --method takes (METHOD_FORMS) and the
functions Study takes into registered names; plug-ins (`package.module:function`, a function object) are
registered on the way (roarfast.methods.plugins). Light on purpose: the built-ins (which need torch) are
imported at the first lookup, so the CLI builds its --method help from here at once.
"""

import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from roarfast.errors import UserError
from roarfast.plugins import OBJECT_PREFIX, is_import_path

CAPTUM_PREFIX = "captum:"
#: the forms --method takes, for its help
METHOD_FORMS = ("estimators, comma-separated: grad ig gb, sg sg-sq var (of grad; -ig/-gb suffixes), random sobel "
                "gradcam oracle, captum:<ClassName>, package.module:function (function(model, images, target) -> "
                "maps [B, C or 1, H, W]), or 'all' (every built-in)")
#: what an estimator may need of the model (Estimator.requires; checked by roarfast.methods.requirements):
#: nn.ReLU modules to guide (guided backprop), a conv layer to take the activations of (Grad-CAM)
RELU_MODULES, CONV_LAYER = "relu-modules", "conv-layer"
#: the modules whose import registers the built-ins, in the order of known_methods()
_BUILTIN_MODULES = ("gradients", "ensembles", "baselines", "gradcam")
#: short forms accepted on the command line, and the canonical names they mean.
ALIASES = {"sg": "sg-grad", "sg-sq": "sg-sq-grad", "var": "var-grad"}
#: how an estimator gets the explained class: "given" (a Tensor[B] up front), "own" (None = predicted,
#: found in its own forward) or "none" (not used).
TARGET_MODES = ("given", "own", "none")


@dataclass(frozen=True)
class Estimator:
    """One registered method. `shared` names the methods computed by the same call (None: just this one)."""

    name: str
    compute: Callable
    target: str = "given"
    shared: tuple[str, ...] | None = None
    #: correct under torch.compile; False for estimators that hook modules (guided backprop's ReLU
    #: hooks are silently dropped by a compiled graph) and for anything not checked
    compilable: bool = False
    #: its maps depend on params.seed (random draws); False lets a new seed reuse stored ranks
    seeded: bool = True
    #: what it needs of the model, checked before any image is processed (roarfast.methods.requirements)
    requires: tuple[str, ...] = ()
    #: from outside roarfast (roarfast.methods.plugins): its name is where it lives, its source is hashed
    plugin: bool = False
    source_sha256: str | None = None


_ESTIMATORS: dict[str, Estimator] = {}
_LOADED = []  # [True] once the built-in modules were imported


def builtins_loaded() -> dict[str, Estimator]:
    """The registry with the built-ins in it (imported at the first call: they need torch)."""
    if not _LOADED:
        _LOADED.append(True)  # before the imports: their register() calls come back here
        try:
            for module in _BUILTIN_MODULES:
                importlib.import_module(f"roarfast.methods.{module}")
        except BaseException:
            _LOADED.clear()
            raise
    return _ESTIMATORS


def register(name: str, target: str = "given", compilable: bool = False, seeded: bool = True, requires=()):
    """Decorator: registers `fn(model, batch, target, params) -> Tensor` under `name`; `target` is one of
    TARGET_MODES; `compilable` says its maps stay right when the model is torch.compile'd; seeded=False
    says they do not depend on params.seed; `requires` what it needs of the model (REQUIREMENTS)."""

    def decorate(fn):
        add(Estimator(name, fn, target, compilable=compilable, seeded=seeded, requires=tuple(requires)))
        return fn

    return decorate


def register_shared(*names: str, target: str = "given", compilable: bool = False, seeded: bool = True, requires=()):
    """Decorator: registers `fn(model, batch, target, params, names) -> dict[str, Tensor]` computing any
    subset of `names` from one piece of shared work."""

    def decorate(fn):
        for name in names:
            add(Estimator(name, fn, target, shared=tuple(names), compilable=compilable, seeded=seeded,
                           requires=tuple(requires)))
        return fn

    return decorate


def add(estimator: Estimator):
    """Registers `estimator` (what register and register_shared build; plug-ins come through here too)."""
    if estimator.target not in TARGET_MODES:
        raise ValueError(f"target should be one of {', '.join(TARGET_MODES)}, got {estimator.target!r}")
    taken = builtins_loaded().get(estimator.name)
    # a plug-in is looked up again under the same name (a notebook redefines it, a module is reloaded)
    if (taken is not None and not (taken.plugin and estimator.plugin)) or estimator.name in ALIASES \
            or estimator.name.startswith(CAPTUM_PREFIX):
        raise ValueError(f"estimator name {estimator.name!r} is already taken")
    _ESTIMATORS[estimator.name] = estimator


def get(name: str) -> Estimator:
    """The registered estimator of a canonical name (a built-in, or a plug-in parse_methods registered)."""
    return builtins_loaded()[name]


def compilable(name: str) -> bool:
    """Whether `name`'s maps stay right under torch.compile (Captum methods: not checked, so no)."""
    return not name.startswith(CAPTUM_PREFIX) and get(name).compilable


def is_plugin(name: str) -> bool:
    """Whether `name` is an estimator from outside roarfast (an import path or a function object)."""
    return not name.startswith(CAPTUM_PREFIX) and get(name).plugin


def seeded(name: str) -> bool:
    """Whether `name`'s maps depend on the seed (Captum methods: assumed so, e.g. NoiseTunnel)."""
    return name.startswith(CAPTUM_PREFIX) or get(name).seeded


def known_methods() -> list[str]:
    """Canonical names of every built-in estimator, in registration order."""
    return [name for name, estimator in builtins_loaded().items() if not estimator.plugin]


def parse_methods(spec: str | Sequence) -> list[str]:
    """Canonical method names from "sg,sg-sq,var", "all", "captum:Saliency", "package.module:function" or a
    list of such strings and estimator functions (`function(model, images, target)`, registered as plug-ins).

    "all" means every built-in; short forms (sg, sg-sq, var) mean the -grad ones; duplicates are
    dropped, order kept. Unknown names raise UserError (a ValueError) listing the known ones.
    """
    parts = [spec] if isinstance(spec, str) or callable(spec) else list(spec)
    names = []
    for part in parts:
        if callable(part):
            from roarfast.methods.plugins import register_plugin

            names.append(register_plugin(part))
            continue
        if not isinstance(part, str):
            raise UserError(f"methods should be names or estimator functions, got {type(part).__name__}")
        for item in part.split(","):
            item = item.strip()
            if not item:
                continue
            names.extend(_canonical(item))
    if not names:
        raise UserError(f"no method given; known: {_known_text()}")
    return list(dict.fromkeys(names))


def _canonical(item: str) -> list[str]:
    if item.startswith(CAPTUM_PREFIX):
        from roarfast.methods.captum_adapter import check_captum_name

        check_captum_name(item[len(CAPTUM_PREFIX):])
        return [item]
    if item in builtins_loaded():  # a plug-in registered earlier in this process (names are case-sensitive)
        return [item]
    if item.startswith(OBJECT_PREFIX):
        raise UserError(f"--method {item}: this estimator was a Python function given to roarfast.Study; the command "
                        f"line cannot import it: pass the same function to roarfast.Study(run_dir, methods=[...]), "
                        f"or move it into a module and name it package.module:function")
    if is_import_path(item):
        from roarfast.methods.plugins import register_plugin

        return [register_plugin(item)]
    name = item.lower()
    if name == "all":
        return known_methods()
    name = ALIASES.get(name, name)
    if name not in _ESTIMATORS:
        raise UserError(f"unknown method {item!r}; known: {_known_text()}")
    return [name]


def _known_text() -> str:
    aliases = ", ".join(f"{short} (= {full})" for short, full in ALIASES.items())
    return (f"{' '.join(known_methods())}; short forms {aliases}; {CAPTUM_PREFIX}<ClassName>; "
            f"package.module:function; all")
