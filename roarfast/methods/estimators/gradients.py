"""Gradient estimators on the normalized input: grad, ig (integrated gradients), gb (guided backprop); the
math is roarfast.methods.gradients'."""

from roarfast.methods.declaration import RELU_MODULES, register

#: each gradient estimator's declaration (what it reads, needs of the model, whether torch.compile keeps it
#: right); the SmoothGrad family of each (ensembles.py) reads and needs the same
BASES = {
    "grad": {"reads": (), "requires": (), "compilable": True},
    "ig": {"reads": ("ig_steps", "ig_baseline"), "requires": (), "compilable": True},
    "gb": {"reads": (), "requires": (RELU_MODULES,), "compilable": False},  # its ReLU hooks: dropped when compiled
}
#: the papers each comes from (Simonyan et al. 2014, Sundararajan et al. 2017, Springenberg et al. 2015)
CITES = {"grad": ("simonyan2014deep",), "ig": ("sundararajan2017axiomatic",), "gb": ("springenberg2015striving",)}


def _attribution(model, batch, target, params, base: str):
    # late: loads torch, and the --method listing imports this module
    from roarfast.methods.gradients import input_attribution

    return input_attribution(model, batch.x, target, params, base)


@register("grad", "vanilla gradient d logit / d x", target_mode="own", order=1, cites=CITES["grad"], **BASES["grad"])
def grad(model, batch, target, params):
    """Vanilla gradient d logit_target / d x -> Tensor[B, C, H, W]."""
    return _attribution(model, batch, target, params, "grad")


@register("ig", "integrated gradients from the baseline (black)", order=1, cites=CITES["ig"], **BASES["ig"])
def ig(model, batch, target, params):
    """Integrated gradients from params.ig_baseline -> Tensor[B, C, H, W]."""
    return _attribution(model, batch, target, params, "ig")


@register("gb", "guided backprop (needs nn.ReLU modules)", target_mode="own", order=1, cites=CITES["gb"],
          **BASES["gb"])
def gb(model, batch, target, params):
    """Guided backprop -> Tensor[B, C, H, W]."""
    return _attribution(model, batch, target, params, "gb")
