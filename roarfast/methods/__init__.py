"""Feature-importance estimators ("methods"): each turns a batch of normalized images into attribution
maps that ops.rank orders.

    from roarfast.methods import ExplainBatch, MethodParams, compute_maps, parse_methods
    maps = compute_maps(model, ExplainBatch(x, labels, index), parse_methods("sg,sg-sq,var"), MethodParams())

Built-ins: grad ig gb (gradients.py); sg-/sg-sq-/var- of each (ensembles.py; short forms sg sg-sq var
are the -grad ones); random sobel oracle (baselines.py); gradcam (gradcam.py); captum:<ClassName> for
any captum.attr class (captum_adapter.py).

Adding an estimator is one function and one register line, in a module imported below:

    @register("my-method")
    def my_method(model, batch, target, params):
        # batch: ExplainBatch (batch.x is Tensor[B, C, H, W], normalized); target: int64 Tensor[B]
        # of explained classes; params: MethodParams. The model is already in eval mode, parameters frozen.
        return maps  # float32 Tensor[B, C, H, W] or Tensor[B, 1, H, W]; larger = more important

`roarfast extract --method my-method` then computes, ranks and stores it like any other.
"""

# Import order is the order of known_methods().
from roarfast.methods import gradients, ensembles, baselines, gradcam  # noqa: F401,I001  (registers the built-ins)
from roarfast.methods.compute import compute_maps
from roarfast.methods.params import ExplainBatch, MethodParams, black_baseline
from roarfast.methods.registry import known_methods, parse_methods, register, register_shared

__all__ = ["ExplainBatch", "MethodParams", "black_baseline", "compute_maps", "known_methods", "parse_methods",
           "register", "register_shared"]
