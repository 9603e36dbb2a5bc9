"""Classifier architectures: the built-ins (MODELS: one module each in this package, registering its
networks with their descriptions and tuned recipes; build_model builds one by name) and every form
--model takes (resolve_model: built-in, package.module:factory, timm:<name>, a Python object -> ModelSpec).

Light on purpose (torch is imported with the built-ins' modules, at the first lookup): the CLI imports
MODELS to build its --model help when the help is shown.
"""

from roarfast.models.registry import MODELS, ModelEntry, build_model
from roarfast.models.spec import ModelSpec, check_source, resolve_model

__all__ = ["MODELS", "ModelEntry", "ModelSpec", "build_model", "check_source", "resolve_model"]
