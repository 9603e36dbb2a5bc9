"""Method names: canonical forms, short forms, "all", unknown names; registering a new estimator."""

import pytest
import torch

from roarfast.errors import UserError
from roarfast.methods import ExplainBatch, MethodParams, compute_maps, known_methods, parse_methods, register
from roarfast.methods import registry

BUILT_INS = ["grad", "ig", "gb", "sg-grad", "sg-sq-grad", "var-grad", "sg-ig", "sg-sq-ig", "var-ig",
             "sg-gb", "sg-sq-gb", "var-gb", "random", "sobel", "gradcam", "oracle"]


def test_known_methods_are_the_design_names():
    assert sorted(known_methods()) == sorted(BUILT_INS)


def test_short_forms_mean_the_grad_ensembles_and_order_is_kept():
    assert parse_methods("var, sg,SG-SQ,grad") == ["var-grad", "sg-grad", "sg-sq-grad", "grad"]
    assert parse_methods(["sg", "sg-grad", "sobel"]) == ["sg-grad", "sobel"]


def test_all_is_every_built_in():
    assert parse_methods("all") == known_methods()
    assert parse_methods("all,captum:Saliency")[-1] == "captum:Saliency"


@pytest.mark.parametrize("spec", ["smoothgrad", "sg-xyz", "captum"])
def test_unknown_names_list_the_known_ones(spec):
    with pytest.raises(ValueError, match=f"unknown method '{spec}'.*grad ig gb.*sg-sq-gb.*captum:<ClassName>"):
        parse_methods(spec)


def test_empty_spec_is_refused():
    with pytest.raises(UserError, match="no method"):
        parse_methods(" , ")


def test_a_registered_estimator_is_computed_like_a_built_in(monkeypatch):
    monkeypatch.setattr(registry, "_ESTIMATORS", dict(registry._ESTIMATORS))

    @register("brightness", target="none")
    def brightness(model, batch, target, params):
        return batch.x.sum(1, keepdim=True)

    assert "brightness" in known_methods()
    x = torch.randn(2, 3, 4, 4)
    batch = ExplainBatch(x=x, target=torch.zeros(2, dtype=torch.int64), index=torch.arange(2))
    maps = compute_maps(torch.nn.Identity(), batch, "brightness", MethodParams())
    assert torch.equal(maps["brightness"], x.sum(1, keepdim=True))
    with pytest.raises(ValueError, match="already taken"):
        register("brightness")(brightness)


@pytest.mark.parametrize("field, value, match", [
    ("n_samples", 0, "n_samples should be a positive int"),
    ("target", "argmax", "target should be one of predicted, label"),
    ("noise_level", -0.1, "noise_level should be >= 0"),
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
