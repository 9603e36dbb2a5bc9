"""Classifier architectures: the built-ins (MODELS, registry.py: each declared with its description and recipe
block in a module of builtins/, its factory in another module of this package; build_model builds one by name)
and every form --model takes (resolve_model: built-in, package.module:factory, timm:<name>, a Python object ->
ModelSpec).

Light on purpose (torch is imported with a built-in's module, when it is built): the CLI builds its --model help
from MODELS.
"""

from roarfast.models.registry import MODELS, ModelEntry, build_model
from roarfast.models.spec import ModelSpec, check_source, resolve_model

__all__ = ["MODELS", "ModelEntry", "ModelSpec", "build_model", "check_source", "resolve_model"]
