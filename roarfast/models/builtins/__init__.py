"""The built-in models, one module per family: each declares its models (a ModelEntry each: the name, a one-line
description, the recipe block it is tuned with, its factory's import path) and registers them with
roarfast.models.registry.MODELS, which imports every module here at its first lookup. `order` places a family in
the listing (--model help, `roarfast list models`); within a module, its models follow in the order it
registers them.

A new built-in is one module here (its entry and recipe block), its factory in a module of roarfast.models, and
its test. These modules import no torch (the factories' modules do, when a model is built): the command line lists
the built-ins from here, and its --help must not import torch.
"""
