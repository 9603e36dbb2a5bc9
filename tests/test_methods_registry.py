"""Method names and records: canonical forms, short forms, "all", unknown names; every estimator's record
declares what it reads (with defaults), whether it uses the model or draws random numbers, what it needs of
the model, and its code; a new built-in with a parameter of its own is computed and recorded like any other."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from roarfast.errors import UserError
from roarfast.stages.extract import ExtractOptions
from roarfast.methods import ExplainBatch, MethodParams, compute_maps, known_methods, parse_methods, register
from roarfast.methods import registry
from roarfast.methods.declaration import CONV_LAYER, ESTIMATORS, RELU_MODULES
from roarfast.methods.parameters import Parameter
from roarfast.methods.selection import Selection
from roarfast.common.resolver import BUILTIN, SCHEME
from roarfast.version import __version__

METHODS = Path(__file__).resolve().parents[1] / "roarfast" / "methods"
#: the design's built-ins, in their listing order (a new built-in may join them anywhere)
DESIGN = ["grad", "ig", "gb", "sg-grad", "sg-sq-grad", "var-grad", "sg-ig", "sg-sq-ig", "var-ig",
          "sg-gb", "sg-sq-gb", "var-gb", "random", "sobel", "oracle", "gradcam"]


@pytest.fixture()
def scratch_registry(monkeypatch):
    """Built-ins registered inside a test are forgotten after it."""
    assert len(ESTIMATORS)  # the built-ins discovered before the copy
    monkeypatch.setattr(ESTIMATORS, "_entries", dict(ESTIMATORS._entries))


def test_known_methods_hold_the_design_names_in_their_order():
    assert [name for name in known_methods() if name in DESIGN] == DESIGN


def test_short_forms_mean_the_grad_ensembles_and_order_is_kept():
    assert parse_methods("var, sg,SG-SQ,grad") == ["var-grad", "sg-grad", "sg-sq-grad", "grad"]
    assert parse_methods(["sg", "sg-grad", "sobel"]) == ["sg-grad", "sobel"]


def test_all_is_every_built_in():
    assert parse_methods("all") == known_methods()
    assert parse_methods("all,captum:Saliency")[-1] == "captum:Saliency"


@pytest.mark.parametrize("spec", ["smoothgrad", "sg-xyz", "captum"])
def test_unknown_names_list_every_form(spec):
    with pytest.raises(ValueError, match=rf"unknown method '{spec}'; --method takes estimators, comma-separated: a "
                                         rf"built-in name \(grad \| ig \| gb .*sg-sq-gb.*\), captum:<name>.*"
                                         rf"package.module:function.*short forms sg \(= sg-grad\).*'all'"):
        parse_methods(spec)


def test_empty_spec_is_refused():
    with pytest.raises(UserError, match="no method"):
        parse_methods(" , ")


@pytest.mark.parametrize("name, reads, uses_model, seeded, target_mode, requires", [
    ("grad", ["target"], True, False, "own", ()),
    ("ig", ["ig_steps", "ig_baseline", "target"], True, False, "given", ()),
    ("gb", ["target"], True, False, "own", (RELU_MODULES,)),
    ("sg-sq-grad", ["samples", "noise_level", "target"], True, True, "given", ()),
    ("var-ig", ["samples", "noise_level", "ig_steps", "ig_baseline", "target"], True, True, "given", ()),
    ("sg-gb", ["samples", "noise_level", "target"], True, True, "given", (RELU_MODULES,)),
    ("random", [], False, True, "none", ()),
    ("sobel", [], False, False, "none", ()),
    ("oracle", [], False, False, "none", ()),
    ("gradcam", ["gradcam_layer", "target"], True, False, "own", (CONV_LAYER,)),
    ("captum:IntegratedGradients", ["ig_steps", "ig_baseline", "target"], True, True, "given", ()),
    ("captum:LayerGradCam", ["gradcam_layer", "target"], True, True, "given", (CONV_LAYER,)),
    ("captum:Saliency", ["target"], True, True, "given", ()),
    ("captum:LayerActivation", ["gradcam_layer"], True, True, "none", (CONV_LAYER,)),  # attribute() takes no target
])
def test_each_record_declares_what_the_estimator_reads_and_needs(name, reads, uses_model, seeded, target_mode,
                                                                 requires):
    record = registry.get(name)
    assert (record.parameter_names, record.uses_model, record.seeded, record.target_mode, record.requires) == \
        (reads, uses_model, seeded, target_mode, requires)
    assert record.ground_truth == (name == "oracle")


def test_builtin_records_carry_the_roarfast_version_and_captum_ones_captum_s():
    import captum

    assert registry.get("sg-sq").code == {"roarfast": __version__} and registry.get("sg-sq").form == BUILTIN
    record = registry.get("captum:IntegratedGradients")
    assert record.code == {"captum": captum.__version__, "class": "IntegratedGradients"} and record.form == SCHEME
    assert record.arguments["internal_batch_size"] == "IntegratedGradients.attribute"
    assert record.arguments["multiply_by_inputs"] == "IntegratedGradients.__init__"


def identity(method: str, options, seed: int) -> dict:
    (name,) = parse_methods(method)
    return Selection.resolve(method, options, seed).ranks_identity(name)


def test_ranks_identities_are_exactly_the_declared_parameters_with_their_values():
    options = ExtractOptions(samples=7, ig_steps=2, gradcam_layer="stage3")
    assert identity("ig", options, seed=3) == {
        "granularity": "pixel", "reduction": "sum_sq", "code": {"roarfast": __version__},
        "parameters": {"ig_steps": 2, "ig_baseline": "black", "target": "predicted"}}  # no seed: ig draws nothing
    assert identity("sg-sq", options, seed=3)["parameters"] == {"samples": 7, "noise_level": 0.15,
                                                                "target": "predicted"}
    assert identity("sg-sq", options, seed=3)["seed"] == 3
    assert identity("random", options, seed=3)["parameters"] == {}
    # a Captum class reads the steps like ig does (the fault of guessing from names: it did not)
    assert identity("captum:IntegratedGradients", options, seed=3)["parameters"]["ig_steps"] == 2
    assert identity("captum:LayerGradCam", options, seed=3)["parameters"]["gradcam_layer"] == "stage3"


def test_a_new_builtin_with_a_parameter_of_its_own_is_computed_and_recorded(scratch_registry):
    @register("brightness", "summed channels, scaled", uses_model=False, target_mode="none",
              parameters=[Parameter("scale", 2.0, "the factor", kind=float)])
    def brightness(model, batch, target, params):
        return batch.x.sum(1, keepdim=True) * params.args["scale"]

    assert "brightness" in known_methods() and ESTIMATORS["brightness"].options == {"scale": 2.0}
    x = torch.randn(2, 3, 4, 4)
    batch = ExplainBatch(x=x, target=torch.zeros(2, dtype=torch.int64), index=torch.arange(2))
    default = compute_maps(None, batch, "brightness")["brightness"]
    given = compute_maps(None, batch, "brightness", MethodParams(args={"scale": 3.0, "other": 1}))["brightness"]
    assert torch.equal(default, x.sum(1, keepdim=True) * 2.0) and torch.equal(given, x.sum(1, keepdim=True) * 3.0)
    options = ExtractOptions(method_args={"scale": 3.0})
    assert identity("brightness", options, 0)["parameters"] == {"scale": 3.0}
    with pytest.raises(ValueError, match="twice"):
        register("brightness")(brightness)


def test_a_builtin_s_own_parameter_may_not_take_a_shared_name():
    with pytest.raises(ValueError, match="taken by the shared parameters"):
        register("noisy", parameters=[Parameter("samples", 3, "")])(lambda model, batch, target, params: None)


@pytest.mark.parametrize("field, value, match", [
    ("samples", 0, "samples should be a positive int"),
    ("target", "argmax", "target should be one of predicted, label"),
    ("noise_level", -0.1, "noise_level should be a number >= 0"),
    ("autocast_dtype", torch.float64, "autocast_dtype"),
])
def test_bad_params_name_the_field(field, value, match):
    with pytest.raises(UserError, match=match):
        MethodParams(**{field: value})


def test_bad_batch_names_the_field():
    with pytest.raises(UserError, match=r"ExplainBatch.index should be an int64 Tensor\[2\]"):
        ExplainBatch(x=torch.randn(2, 3, 4, 4), target=torch.zeros(2, dtype=torch.int64), index=torch.arange(3))
    with pytest.raises(UserError, match=r"ExplainBatch.x should be a float Tensor\[B, C, H, W\]"):
        ExplainBatch(x=torch.randn(3, 4, 4), target=torch.zeros(3, dtype=torch.int64), index=torch.arange(3))


def test_model_free_methods_need_no_model_and_the_others_say_they_do():
    x = torch.randn(2, 3, 4, 4)
    batch = ExplainBatch(x=x, target=torch.zeros(2, dtype=torch.int64), index=torch.arange(2))
    maps = compute_maps(None, batch, "random,sobel")
    assert maps["random"].shape == (2, 3, 4, 4) and maps["sobel"].shape == (2, 1, 4, 4)
    with pytest.raises(UserError, match="methods grad, captum:Saliency explain a model"):
        compute_maps(None, batch, "sobel,grad,captum:Saliency")


def test_listing_the_builtins_imports_no_torch():
    code = ("import sys; from roarfast.methods.registry import known_methods, method_forms; known_methods(); "
            "method_forms(); print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_the_records_and_the_plugins_sit_below_the_resolver():
    """No import circle: what the resolver (registry.py) builds on never imports it."""
    modules = ("declaration", "parameters", "plugins", "identity", "captum_adapter")
    below = [*METHODS.glob("estimators/*.py"), *(METHODS / f"{name}.py" for name in modules)]
    for path in below:
        for node in ast.walk(ast.parse(path.read_text())):
            names = [f"{node.module}.{alias.name}" for alias in node.names] if isinstance(node, ast.ImportFrom) else \
                [alias.name for alias in node.names] if isinstance(node, ast.Import) else []
            assert not any(name.startswith("roarfast.methods.registry") for name in names), path
