"""captum:<ClassName>: built as documented, equal to calling Captum directly; clear errors otherwise."""

import builtins

import pytest
import torch
import torch.nn.functional as F

from roarfast.errors import UserError
from roarfast.methods import MethodParams, black_baseline, compute_maps, parse_methods
from tests.test_methods_gradients import MEAN, STD, assert_relative, leaf, predicted, tiny_batch, tiny_cnn

captum_attr = pytest.importorskip("captum.attr")


def test_saliency_uses_captum_defaults_and_the_predicted_class():
    model, batch = tiny_cnn(), tiny_batch()
    ours = compute_maps(model, batch, ["captum:Saliency", "grad"])
    # Captum's Saliency defaults to abs=True: the absolute value of our plain gradient.
    assert_relative(ours["captum:Saliency"], ours["grad"].abs())


def test_integrated_gradients_gets_the_black_baseline_and_steps():
    model, batch = tiny_cnn(), tiny_batch()
    params = MethodParams(ig_baseline=black_baseline(MEAN, STD), ig_steps=9)
    ours = compute_maps(model, batch, ["captum:IntegratedGradients"], params)["captum:IntegratedGradients"]
    baseline = torch.tensor(black_baseline(MEAN, STD)).view(1, 3, 1, 1).expand_as(batch.x)
    ref = captum_attr.IntegratedGradients(model.eval()).attribute(
        leaf(batch.x), baselines=baseline, target=predicted(model, batch.x), n_steps=9)
    assert_relative(ours, ref)


def test_layer_method_gets_the_cam_layer_and_is_upsampled():
    model, batch = tiny_cnn(), tiny_batch()
    ours = compute_maps(model, batch, ["captum:LayerGradCam"])["captum:LayerGradCam"]
    cam = captum_attr.LayerGradCam(model.eval(), model[3]).attribute(
        leaf(batch.x), target=predicted(model, batch.x))
    assert ours.shape == (3, 1, 8, 8)
    assert_relative(ours, F.interpolate(cam, size=(8, 8), mode="bilinear", align_corners=False))


def test_unknown_class_lists_captum_classes():
    with pytest.raises(UserError, match="captum:Salency is not a captum.attr attribution class.*Saliency"):
        parse_methods("captum:Salency")


@pytest.mark.parametrize("name, why", [("NoiseTunnel", "sg-"), ("NeuronGradient", "class logit"),
                                       ("GradientAttribution", "base class"), ("Attribution", "base class")])
def test_unsupported_classes_say_why(name, why):
    with pytest.raises(UserError, match=why):
        parse_methods(f"captum:{name}")


def test_missing_captum_says_how_to_install(monkeypatch):
    real_import = builtins.__import__

    def no_captum(name, *args, **kwargs):
        if name.startswith("captum"):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_captum)
    with pytest.raises(UserError, match="pip install captum"):
        parse_methods("captum:Saliency")
