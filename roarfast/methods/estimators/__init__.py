"""The built-in estimators, one module per family; the resolver (roarfast.methods.declaration.ESTIMATORS)
imports every module here at its first lookup, and each registers its estimators with `register`. A new
built-in is one module here (and its test): its function, its record (what it reads, whether it uses the
model or draws random numbers, what it needs of the model) and any parameter of its own, declared in
`register(..., parameters=[Parameter(...)])` and set by users with `--method-arg NAME=VALUE`.

These modules import torch inside their functions (or call modules that do): the command line lists the
built-ins from here, and its --help must not import torch.
"""
