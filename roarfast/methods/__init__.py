"""Feature-importance estimators ("methods"): each turns a batch of normalized images into attribution
maps that ops.rank orders.

    from roarfast.methods import ExplainBatch, MethodParams, compute_maps, parse_methods
    maps = compute_maps(model, ExplainBatch(x, labels, index), parse_methods("sg,sg-sq,var"), MethodParams())

Built-ins: grad ig gb; sg-/sg-sq-/var- of each (short forms sg sg-sq var are the -grad ones); random sobel
oracle; gradcam (one module per family in estimators/); captum:<ClassName> for any captum.attr class
(captum_adapter.py); `package.module:function` or a function object for an estimator from outside
(plugins.py: function(model, images, target) -> maps). Each has a record (declaration.Estimator: what it
reads, whether it uses the model or draws random numbers, what it needs of the model, its code identity)
that every stage reads; registry.py resolves the names, and a stage holds what it resolved, with the
parameter values, in one selection.Selection (the identity of each method's ranks among them).

Adding an estimator is one module in estimators/ (and its test):

    from roarfast.methods.declaration import register
    from roarfast.methods.parameters import Parameter

    @register("my-method", "one line for --help", parameters=[Parameter("radius", 2, "blur radius", kind=int)])
    def my_method(model, batch, target, params):
        # batch: ExplainBatch (batch.x is Tensor[B, C, H, W], normalized); target: int64 Tensor[B]
        # of explained classes; params: MethodParams (params.args["radius"]: its own parameter).
        # The model is already in eval mode, parameters frozen. Import torch in here.
        return maps  # float32 Tensor[B, C, H, W] or Tensor[B, 1, H, W]; larger = more important

`roarfast extract --method my-method --method-arg radius=3` then computes, ranks and stores it like any other.

The package imports torch only when something that computes is asked for (compute_maps, ExplainBatch,
MethodParams, black_baseline), so that the CLI reads the resolver's names at once.
"""

import importlib

from roarfast.methods.declaration import register, register_shared
from roarfast.methods.registry import known_methods, parse_methods

#: what the package hands out from the modules that need torch (imported on first use)
_COMPUTING = {"compute_maps": "roarfast.methods.compute", "ExplainBatch": "roarfast.methods.params",
              "MethodParams": "roarfast.methods.params", "black_baseline": "roarfast.methods.params"}


def __getattr__(name):
    if name not in _COMPUTING:
        raise AttributeError(f"module 'roarfast.methods' has no attribute {name!r}")
    return getattr(importlib.import_module(_COMPUTING[name]), name)


__all__ = ["ExplainBatch", "MethodParams", "black_baseline", "compute_maps", "known_methods", "parse_methods",
           "register", "register_shared"]
