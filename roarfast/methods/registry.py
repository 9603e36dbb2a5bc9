"""The estimator registry: method names -> the functions that compute their maps.

An estimator is `fn(model, batch, target, params) -> Tensor[B, C, H, W] or Tensor[B, 1, H, W]`
(float32, unreduced), registered with `@register("name")`. `target` is an int64 Tensor[B] of
explained classes, found once by compute_maps. Two registrations save that forward pass:
`target="own"` (the estimator accepts target=None, meaning the predicted class, and takes the argmax
from its own forward) and `target="none"` (the estimator ignores the classes).

Estimators that share work (the SmoothGrad family: one set of noisy gradients gives SG, SG-SQ and
VAR) register together with `@register_shared(*names)` as
`fn(model, batch, target, params, names) -> dict[name, Tensor]`.
"""

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from roarfast.errors import UserError

CAPTUM_PREFIX = "captum:"
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


_ESTIMATORS: dict[str, Estimator] = {}


def register(name: str, target: str = "given", compilable: bool = False, seeded: bool = True):
    """Decorator: registers `fn(model, batch, target, params) -> Tensor` under `name`; `target` is one of
    TARGET_MODES; `compilable` says its maps stay right when the model is torch.compile'd; seeded=False
    says they do not depend on params.seed."""

    def decorate(fn):
        _add(Estimator(name, fn, target, compilable=compilable, seeded=seeded))
        return fn

    return decorate


def register_shared(*names: str, target: str = "given", compilable: bool = False, seeded: bool = True):
    """Decorator: registers `fn(model, batch, target, params, names) -> dict[str, Tensor]` computing any
    subset of `names` from one piece of shared work."""

    def decorate(fn):
        for name in names:
            _add(Estimator(name, fn, target, shared=tuple(names), compilable=compilable, seeded=seeded))
        return fn

    return decorate


def _add(estimator: Estimator):
    if estimator.target not in TARGET_MODES:
        raise ValueError(f"target should be one of {', '.join(TARGET_MODES)}, got {estimator.target!r}")
    if estimator.name in _ESTIMATORS or estimator.name in ALIASES or estimator.name.startswith(CAPTUM_PREFIX):
        raise ValueError(f"estimator name {estimator.name!r} is already taken")
    _ESTIMATORS[estimator.name] = estimator


def get(name: str) -> Estimator:
    """The registered estimator of a canonical built-in name."""
    return _ESTIMATORS[name]


def compilable(name: str) -> bool:
    """Whether `name`'s maps stay right under torch.compile (Captum methods: not checked, so no)."""
    return not name.startswith(CAPTUM_PREFIX) and get(name).compilable


def seeded(name: str) -> bool:
    """Whether `name`'s maps depend on the seed (Captum methods: assumed so, e.g. NoiseTunnel)."""
    return name.startswith(CAPTUM_PREFIX) or get(name).seeded


def known_methods() -> list[str]:
    """Canonical names of every built-in estimator, in registration order."""
    return list(_ESTIMATORS)


def parse_methods(spec: str | Sequence[str]) -> list[str]:
    """Canonical method names from "sg,sg-sq,var", "all", "captum:Saliency" or a list of such strings.

    "all" means every built-in; short forms (sg, sg-sq, var) mean the -grad ones; duplicates are
    dropped, order kept. Unknown names raise UserError (a ValueError) listing the known ones.
    """
    parts = [spec] if isinstance(spec, str) else list(spec)
    names = []
    for part in parts:
        if not isinstance(part, str):
            raise UserError(f"methods should be strings, got {type(part).__name__}")
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
    name = item.lower()
    if name == "all":
        return known_methods()
    name = ALIASES.get(name, name)
    if name not in _ESTIMATORS:
        raise UserError(f"unknown method {item!r}; known: {_known_text()}")
    return [name]


def _known_text() -> str:
    aliases = ", ".join(f"{short} (= {full})" for short, full in ALIASES.items())
    return f"{' '.join(known_methods())}; short forms {aliases}; {CAPTUM_PREFIX}<ClassName>; all"
