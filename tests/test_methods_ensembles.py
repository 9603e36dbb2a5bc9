"""The SmoothGrad family (SG, SG-SQ, VAR of grad, ig, gb): equal to a plain-PyTorch ensemble fed the same
ops.noise samples; rank-equivalent to Captum's NoiseTunnel at many samples; one pass per chunk."""

import pytest
import torch
from torch import nn

from roarfast import ops
from roarfast.methods import MethodParams, black_baseline, compute_maps
from roarfast.methods.ensembles import noisy_samples
from tests.test_methods_gradients import MEAN, STD, assert_relative, leaf, predicted, tiny_batch, tiny_cnn

captum_attr = pytest.importorskip("captum.attr")

BASES = ("grad", "ig", "gb")
BASELINE = black_baseline(MEAN, STD)


def base_reference(model, x, target, base, steps):
    """The base estimator by Captum (independent of roarfast's gradient code), float64 result."""
    x = leaf(x)
    if base == "grad":
        maps = captum_attr.Saliency(model).attribute(x, target=target, abs=False)
    elif base == "gb":
        maps = captum_attr.GuidedBackprop(model).attribute(x, target=target)
    else:
        baseline = torch.tensor(BASELINE).view(1, -1, 1, 1).expand_as(x)
        maps = captum_attr.IntegratedGradients(model).attribute(
            x, baselines=baseline, target=target, n_steps=steps, method="riemann_middle")
    return maps.detach().double()


def spearman(a: torch.Tensor, b: torch.Tensor) -> float:
    """Spearman correlation of two flat score vectors (no ties expected in float maps)."""
    ra = a.flatten().argsort().argsort().double()
    rb = b.flatten().argsort().argsort().double()
    ra, rb = ra - ra.mean(), rb - rb.mean()
    return float((ra * rb).sum() / (ra.norm() * rb.norm()))


@pytest.mark.parametrize("base", BASES)
@pytest.mark.parametrize("chunk_elements", [10**9, 700])
def test_ensemble_equals_a_plain_pytorch_reference_on_the_same_noise(base, chunk_elements):
    model, batch = tiny_cnn(), tiny_batch(batch=3)
    params = MethodParams(samples=7, ig_steps=4, ig_baseline=BASELINE, max_chunk_elements=chunk_elements)
    names = [f"sg-{base}", f"sg-sq-{base}", f"var-{base}"]
    ours = compute_maps(model, batch, names, params)

    target = predicted(model.eval(), batch.x)
    samples = noisy_samples(batch, params, base, params.samples).view(params.samples, *batch.x.shape)
    grads = torch.stack([base_reference(model, s, target, base, params.ig_steps) for s in samples])
    assert_relative(ours[names[0]], grads.mean(0))
    assert_relative(ours[names[1]], (grads * grads).mean(0))
    assert_relative(ours[names[2]], grads.var(0, unbiased=False))


class PixelGain(nn.Module):
    """Multiplies the input by fixed per-pixel gains spread over [1/span, span]: pixels then differ in
    importance by more than the Monte Carlo error of 256 samples, so ranks are comparable across noise
    draws (on the bare random CNN two Captum runs agree only to Spearman ~0.97)."""

    def __init__(self, size: int, span: float = 4.0, seed: int = 3):
        super().__init__()
        gen = torch.Generator().manual_seed(seed)
        self.register_buffer("gain", span ** (2 * torch.rand(1, 1, size, size, generator=gen) - 1))

    def forward(self, x):
        return x * self.gain


@pytest.mark.parametrize("base", BASES)
def test_ensemble_ranks_pixels_like_captum_noise_tunnel(base):
    """Independent noise on each side, n=256: the per-pixel (sum of squares over channels) maps agree in rank.
    Sigma matters: with Captum's stdevs at 2x or 0.5x the right sigma, SG falls to Spearman 0.93-0.97 here."""
    samples = 256
    model, batch = nn.Sequential(PixelGain(8), tiny_cnn()), tiny_batch(batch=2)
    params = MethodParams(samples=samples, ig_steps=5, ig_baseline=BASELINE)
    ours = compute_maps(model, batch, [f"sg-{base}", f"sg-sq-{base}", f"var-{base}"], params)
    target = predicted(model.eval(), batch.x)
    tunnels = {"grad": captum_attr.Saliency(model), "gb": captum_attr.GuidedBackprop(model),
               "ig": captum_attr.IntegratedGradients(model)}
    extra = {"ig": {"baselines": torch.tensor(BASELINE).view(1, -1, 1, 1), "n_steps": 5,
                    "method": "riemann_middle"},
             "grad": {"abs": False}}.get(base, {})
    torch.manual_seed(0)
    for b in range(batch.x.shape[0]):
        x = leaf(batch.x[b:b + 1])
        # Captum's stdevs are absolute and per call, so each image goes alone with its own sigma.
        sigma = params.noise_level * float(x.detach().max() - x.detach().min())
        for stat, nt_type in (("sg", "smoothgrad"), ("sg-sq", "smoothgrad_sq"), ("var", "vargrad")):
            ref = captum_attr.NoiseTunnel(tunnels[base]).attribute(
                x, nt_type=nt_type, nt_samples=samples, nt_samples_batch_size=samples, stdevs=sigma,
                target=target[b:b + 1], **extra)
            rho = spearman(ours[f"{stat}-{base}"][b].pow(2).sum(0), ref[0].detach().pow(2).sum(0))
            assert rho >= 0.98, f"{stat}-{base} image {b}: Spearman {rho:.3f}"


def test_one_forward_per_chunk_and_all_statistics_from_one_sample_set():
    model, batch = tiny_cnn(), tiny_batch(batch=3)
    calls = []
    model.register_forward_hook(lambda module, inputs, output: calls.append(inputs[0].shape[0]))
    per_sample = batch.x.numel()
    params = MethodParams(samples=15, max_chunk_elements=6 * per_sample)
    compute_maps(model, batch, ["sg", "sg-sq", "var"], params)
    # One forward for the predicted class, then 15 samples x 3 images in chunks of at most 6 samples.
    assert calls == [3, 6 * 3, 6 * 3, 3 * 3]


def test_statistics_are_consistent():
    """VAR = SG-SQ - SG^2 >= 0 on the same samples, and VAR of a linear model's gradient is 0."""
    model, batch = tiny_cnn(), tiny_batch(batch=3)
    maps = compute_maps(model, batch, ["sg", "sg-sq", "var"], MethodParams(samples=9))
    assert (maps["var-grad"] >= 0).all()
    assert_relative(maps["var-grad"], maps["sg-sq-grad"] - maps["sg-grad"] ** 2, rel=1e-4)
    linear = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * 8 * 8, 4))
    lin = compute_maps(linear, batch, ["sg", "var"], MethodParams(samples=9))
    assert lin["var-grad"].abs().max() <= 1e-6 * lin["sg-grad"].abs().max()
    target = predicted(linear, batch.x)
    assert_relative(lin["sg-grad"], linear[1].weight.detach()[target].view(3, 3, 8, 8))
