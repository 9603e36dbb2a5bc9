"""Grad-CAM against Captum's LayerGradCam (ReLU) upsampled bilinearly; layer choice and errors."""

import pytest
import torch
import torch.nn.functional as F

from roarfast.errors import UserError
from roarfast.methods import MethodParams, compute_maps
from tests.test_methods_gradients import assert_relative, leaf, predicted, tiny_batch, tiny_cnn

captum_attr = pytest.importorskip("captum.attr")


def captum_gradcam(model, batch, layer, target):
    cam = captum_attr.LayerGradCam(model.eval(), layer).attribute(
        leaf(batch.x), target=target, relu_attributions=True)
    return F.interpolate(cam, size=batch.x.shape[2:], mode="bilinear", align_corners=False)


@pytest.mark.parametrize("layer_name", [None, "0"])
def test_gradcam_equals_captum_layer_gradcam_upsampled(layer_name):
    model, batch = tiny_cnn(), tiny_batch(batch=5)
    ours = compute_maps(model, batch, ["gradcam"], MethodParams(gradcam_layer=layer_name))["gradcam"]
    layer = model.get_submodule(layer_name or model.cam_layer)
    ref = captum_gradcam(model, batch, layer, predicted(model, batch.x))
    assert ours.shape == (5, 1, 8, 8)
    assert_relative(ours, ref)
    assert (ours >= 0).all() and ours.abs().sum() > 0


def test_gradcam_of_the_label():
    model, batch = tiny_cnn(), tiny_batch(batch=5)
    batch.target = (predicted(model, batch.x) + 1) % 4
    ours = compute_maps(model, batch, ["gradcam"], MethodParams(target="label"))["gradcam"]
    assert_relative(ours, captum_gradcam(model, batch, model[3], batch.target))


def test_gradcam_unknown_layer_lists_modules():
    with pytest.raises(UserError, match="'nope' is not a module.*modules: 0, 1, 2"):
        compute_maps(tiny_cnn(), tiny_batch(), ["gradcam"], MethodParams(gradcam_layer="nope"))


def test_gradcam_without_cam_layer_takes_the_last_conv():
    model, batch = tiny_cnn(), tiny_batch(batch=5)
    del model.cam_layer
    ours = compute_maps(model, batch, ["gradcam"])["gradcam"]
    assert_relative(ours, captum_gradcam(model, batch, model[3], predicted(model, batch.x)))  # [3]: the last Conv2d
    first = compute_maps(model, batch, ["gradcam"], MethodParams(gradcam_layer="0"))["gradcam"]
    assert not torch.allclose(ours, first)  # the choice matters: the first conv gives other maps


def test_gradcam_without_cam_layer_or_conv_is_refused():
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * 8 * 8, 4))
    with pytest.raises(UserError, match="--cam-layer: Grad-CAM needs a conv layer.*no cam_layer attribute and no "
                                        "nn.Conv2d"):
        compute_maps(model, tiny_batch(), ["gradcam"])


def test_gradcam_refuses_a_layer_without_a_spatial_output():
    with pytest.raises(UserError, match=r"Tensor\[B, K, h, w\]"):
        compute_maps(tiny_cnn(), tiny_batch(), ["gradcam"], MethodParams(gradcam_layer="8"))
