"""What roarfast reads of a Captum attribution class, apart from the class itself: its `Outline` (its first sentence,
the parameters of the `__init__` and `attribute()` an instance calls, which of captum.attr's base classes it
extends, whether it is abstract), why roarfast refuses it (`refusal`) and the estimator's record made from it
(`captum_record`). The adapter (captum_adapter.py) outlines an imported class (`outline_of_class`); `roarfast list`
outlines the installed captum from its source files (captum_source.py), which loads neither captum nor torch.
Both make the record here, so what is listed is what --method takes.
"""

import inspect
import re
from dataclasses import dataclass

from roarfast.common.resolver import SCHEME
from roarfast.methods.declaration import CONV_LAYER, Estimator, parameters_of

PREFIX = "captum:"
#: classes that wrap or underlie another method: no single-call default exists (neuron and LLM classes are
#: refused by their base classes)
UNSUPPORTED = {
    "NoiseTunnel": "it wraps another method; the built-in sg-*, sg-sq-*, var-* compute the same ensembles",
    "LimeBase": "it is the base of captum:Lime and captum:KernelShap, which take it from there",
}
#: captum.attr's base classes an outline says whether a class extends: the attribution classes' root, the layer
#: classes' (their maps are upsampled), those roarfast refuses (FOREIGN), the classes that take propagation rules
BASES = ("Attribution", "LayerAttribution", "NeuronAttribution", "LLMAttribution", "LLMGradientAttribution", "LRP")
#: bases whose classes do not attribute a class logit of an image model
FOREIGN = ("NeuronAttribution", "LLMAttribution", "LLMGradientAttribution")
#: what roarfast passes itself: the model (and layer), the images, the classes, and the arguments it reads as
#: its own parameters; the rest of a signature is the user's to pass
SUPPLIED = {"self", "forward_func", "model", "layer", "device_ids", "inputs", "target", "additional_forward_args",
            "return_convergence_delta", "n_steps", "baselines"}
#: the shared parameter each of Captum's arguments reads
READS = {"layer": "gradcam_layer", "n_steps": "ig_steps", "baselines": "ig_baseline"}
#: the argument of LRP classes that names the rules of modules Captum has no default rule for
RULES = "rules"
#: where a sentence ends: . ! or ? before a space and a capital (not "et. al." nor "e.g. the")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z`\"'(])")


@dataclass(frozen=True)
class Outline:
    """A captum.attr class as roarfast reads it: `name`, its docstring (`doc`, cleaned), the named parameters
    of the `__init__` and the `attribute()` an instance calls ((name, has a default) each, in order; no *args,
    **kwargs; `attribute` None where nothing callable is found), the BASES it extends and whether it is abstract."""

    name: str
    doc: str
    init: tuple
    attribute: tuple | None
    bases: frozenset
    abstract: bool = False

    @property
    def description(self) -> str:
        """"captum.attr.<name>: <its docstring's first sentence>", whole, on one line."""
        paragraph = " ".join(self.doc.split("\n\n", 1)[0].split())
        return f"captum.attr.{self.name}: " + _SENTENCE_END.split(paragraph, 1)[0]


def outline_of_class(cls, attr) -> Outline:
    """The Outline of class `cls` of the imported captum.attr `attr`."""
    attribute = getattr(cls, "attribute", None)
    return Outline(cls.__name__, inspect.cleandoc(cls.__doc__ or ""), _parameters(cls.__init__),
                   _parameters(attribute) if callable(attribute) else None,
                   frozenset(b for b in BASES if issubclass(cls, getattr(attr, b, ()))), inspect.isabstract(cls))


def _parameters(function) -> tuple:
    return tuple((arg, p.default is not inspect.Parameter.empty)
                 for arg, p in inspect.signature(function).parameters.items()
                 if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD))


def refusal(outline: Outline) -> str | None:
    """Why captum:<name> cannot be used (None: it can), as attribution_class says it after "captum:<name> "; the
    first reason of: no attribution class, a base class (nothing to call), unsupported, foreign."""
    if "Attribution" not in outline.bases or outline.abstract:
        return "is not a captum.attr attribution class"
    if outline.attribute is None:  # Attribution, GradientAttribution, ...: bases, nothing to call
        return ("is a base class of Captum's attributions, with no attribute() to call: name one of its subclasses "
                "(`roarfast list estimators` lists them)")
    if outline.name in UNSUPPORTED:
        return f"is not supported: {UNSUPPORTED[outline.name]}"
    if outline.bases & set(FOREIGN):
        return "is not supported: it does not attribute a class logit of an image model"
    return None


def needs_rules(outline: Outline) -> bool:
    return "LRP" in outline.bases  # LayerLRP too


def captum_record(outline: Outline, compute=None, code=None) -> Estimator:
    """The estimator record of captum:<name> from its outline: what it reads (--cam-layer, --ig-steps, the IG
    baseline), the arguments the user passes (--method-arg; those without a default required), its target.
    `compute` and `code`: the adapter's (None for a listing's record, which computes nothing)."""
    init, attribute = dict(outline.init), dict(outline.attribute or ())
    both = {**init, **attribute}
    reads = [READS[arg] for arg in ("layer", "n_steps", "baselines") if arg in both]
    arguments = {arg: f"{outline.name}.__init__" for arg in init if arg not in SUPPLIED}
    arguments.update({arg: f"{outline.name}.attribute" for arg in attribute if arg not in SUPPLIED})
    if needs_rules(outline):
        arguments[RULES] = f"roarfast's rules of {outline.name}: {{module type or name: rule class}}"
    required = tuple(arg for arg in arguments if arg != RULES and not both[arg])
    target_mode = "given" if "target" in attribute else "none"
    return Estimator(PREFIX + outline.name, compute, outline.description, parameters_of(reads, (), target_mode),
                     arguments=arguments, required=required, seeded=True, target_mode=target_mode,
                     requires=(CONV_LAYER,) if "layer" in init else (), form=SCHEME,
                     **({} if code is None else {"code": code}))
