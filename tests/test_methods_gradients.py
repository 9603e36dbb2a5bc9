"""grad, ig, gb against Captum's Saliency(abs=False), IntegratedGradients(riemann_middle), GuidedBackprop;
the model context (eval mode, frozen parameters, restored after); the explained class."""

import pytest
import torch
from torch import nn

from roarfast.errors import UserError
from roarfast.methods import ExplainBatch, MethodParams, black_baseline, compute_maps

captum_attr = pytest.importorskip("captum.attr")

MEAN, STD = (0.5, 0.4, 0.3), (0.2, 0.25, 0.3)


def tiny_cnn(seed: int = 0, num_classes: int = 4, channels: int = 3) -> nn.Module:
    """conv + nn.ReLU + linear, float32, with BatchNorm and Dropout so eval mode matters."""
    torch.manual_seed(seed)
    model = nn.Sequential(
        nn.Conv2d(channels, 6, 3, padding=1), nn.BatchNorm2d(6), nn.ReLU(),
        nn.Conv2d(6, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Dropout(0.5), nn.Linear(8 * 4 * 4, num_classes),
    )
    model[1].running_mean.uniform_(-0.2, 0.2)
    model[1].running_var.uniform_(0.5, 2.0)
    model.cam_layer = "3"
    return model


def tiny_batch(batch: int = 3, seed: int = 1, size: int = 8, channels: int = 3) -> ExplainBatch:
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(batch, channels, size, size, generator=gen)
    labels = torch.randint(0, 4, (batch,), generator=gen)
    return ExplainBatch(x=x, target=labels, index=torch.arange(batch) + 10, seed=seed)


def assert_relative(actual: torch.Tensor, expected: torch.Tensor, rel: float = 1e-5):
    """Equal up to `rel` of the reference's largest magnitude (elementwise rtol fails near zero)."""
    assert actual.shape == expected.shape and actual.dtype == torch.float32
    expected = expected.detach().float()
    torch.testing.assert_close(actual, expected, rtol=rel, atol=rel * float(expected.abs().max()))


def leaf(x: torch.Tensor) -> torch.Tensor:
    """A copy of x that requires grad, as Captum expects its inputs."""
    return x.clone().requires_grad_(True)


def predicted(model, x):
    with torch.no_grad():
        return model.eval()(x).argmax(1)


PARAMS = MethodParams(ig_baseline=black_baseline(MEAN, STD))


def test_grad_equals_captum_saliency():
    model, batch = tiny_cnn(), tiny_batch()
    ours = compute_maps(model, batch, ["grad"], PARAMS)["grad"]
    ref = captum_attr.Saliency(model.eval()).attribute(leaf(batch.x), target=predicted(model, batch.x), abs=False)
    assert_relative(ours, ref)


@pytest.mark.parametrize("steps", [25, 7])
def test_ig_equals_captum_riemann_middle_from_black(steps):
    model, batch = tiny_cnn(), tiny_batch()
    # A small chunk budget splits the steps over several passes; the sum must not change.
    params = MethodParams(ig_baseline=black_baseline(MEAN, STD), ig_steps=steps, max_chunk_elements=500)
    ours = compute_maps(model, batch, ["ig"], params)["ig"]
    baseline = torch.tensor(black_baseline(MEAN, STD)).view(1, 3, 1, 1).expand_as(batch.x).contiguous()
    ref = captum_attr.IntegratedGradients(model.eval()).attribute(
        leaf(batch.x), baselines=baseline, target=predicted(model, batch.x), n_steps=steps, method="riemann_middle")
    assert_relative(ours, ref)


def test_ig_without_baseline_is_refused():
    with pytest.raises(UserError, match="ig_baseline"):
        compute_maps(tiny_cnn(), tiny_batch(), ["ig"], MethodParams())


def test_gb_equals_captum_guided_backprop():
    model, batch = tiny_cnn(), tiny_batch()
    ours = compute_maps(model, batch, ["gb"], PARAMS)["gb"]
    ref = captum_attr.GuidedBackprop(model.eval()).attribute(leaf(batch.x), target=predicted(model, batch.x))
    assert_relative(ours, ref)
    plain = compute_maps(model, batch, ["grad"], PARAMS)["grad"]
    assert not torch.allclose(ours, plain), "guided backprop should differ from the plain gradient"


def test_gb_hooks_are_removed_and_inplace_relu_restored():
    model, batch = tiny_cnn(), tiny_batch()
    model[2].inplace = True
    before = compute_maps(model, batch, ["grad"], PARAMS)["grad"]
    compute_maps(model, batch, ["gb"], PARAMS)
    assert model[2].inplace is True
    assert all(not module._backward_hooks for module in model.modules())
    assert torch.equal(compute_maps(model, batch, ["grad"], PARAMS)["grad"], before)


def test_gb_without_relu_modules_says_why():
    model = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.Tanh(), nn.Flatten(), nn.Linear(4 * 8 * 8, 4))
    with pytest.raises(UserError, match="nn.ReLU"):
        compute_maps(model, tiny_batch(), ["gb"], PARAMS)


def test_label_target_explains_the_label_not_the_prediction():
    model, batch = tiny_cnn(), tiny_batch(batch=6)
    labels = (predicted(model, batch.x) + 1) % 4
    batch.target = labels
    ours = compute_maps(model, batch, ["grad"], MethodParams(target="label"))["grad"]
    ref = captum_attr.Saliency(model.eval()).attribute(leaf(batch.x), target=labels, abs=False)
    assert_relative(ours, ref)


def test_model_mode_and_parameter_flags_are_restored():
    model, batch = tiny_cnn(), tiny_batch()
    model.train()
    model[0].weight.requires_grad_(False)
    flags = [p.requires_grad for p in model.parameters()]
    maps = compute_maps(model, batch, ["grad", "ig", "gb", "gradcam"], PARAMS)
    assert model.training and all(m.training for m in model.modules())
    assert [p.requires_grad for p in model.parameters()] == flags
    assert all(p.grad is None for p in model.parameters()), "gradients should go to the input only"
    assert all(not m.requires_grad for m in maps.values())
    # Eval mode inside: the result equals the eval-mode reference despite Dropout and BatchNorm.
    target = predicted(tiny_cnn(), batch.x)
    ref = captum_attr.Saliency(tiny_cnn().eval()).attribute(leaf(batch.x), target=target, abs=False)
    assert_relative(maps["grad"], ref)
