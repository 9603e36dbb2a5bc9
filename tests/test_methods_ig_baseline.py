"""The IG baseline is black (the normalized value of a 0 pixel, -mean/std per channel), from the dataset's
own statistics in extraction; the documented defaults (15 samples, noise level 0.15, 25 IG steps) hold in
the library and on the command line. Expected values are worked by hand."""

import math

import pytest
import torch
from torch import nn

from roarfast.data.base import ImageSet, make_dataset
from roarfast.stages.extract import ExtractOptions
from roarfast.methods import ExplainBatch, MethodParams, black_baseline, compute_maps
from roarfast.methods.selection import Selection


def test_black_baseline_hand_worked():
    assert black_baseline((0.5, 0.25, 0.4), (0.25, 0.5, 0.2)) == pytest.approx((-2.0, -0.5, -2.0))


def test_ig_of_a_linear_model_is_zero_on_black_pixels():
    """logit_t = w_t . x + b: IG = (x - baseline) * w_t exactly (the path's gradient is constant), so a
    pixel that is black in pixel space (normalized -mean/std) gets zero attribution and the others
    (x + mean/std) * w_t."""
    mean, std = (0.5, 0.25, 0.4), (0.25, 0.5, 0.2)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Flatten(), nn.Linear(3 * 2 * 2, 2))
    pixels = torch.tensor([[[[0.0, 1.0], [0.5, 0.0]]] * 3])  # [1, 3, 2, 2] in [0, 1]; black at (0,0), (1,1)
    x = (pixels - torch.tensor(mean).view(1, 3, 1, 1)) / torch.tensor(std).view(1, 3, 1, 1)
    batch = ExplainBatch(x=x, target=torch.tensor([1]), index=torch.tensor([0]))
    params = MethodParams(ig_baseline=black_baseline(mean, std), ig_steps=4, target="label")
    ig = compute_maps(model, batch, ["ig"], params)["ig"]
    black = torch.tensor([[-2.0, -0.5, -2.0]]).view(1, 3, 1, 1)  # -mean/std by hand
    expected = (x - black) * model[1].weight[1].detach().view(1, 3, 2, 2)
    torch.testing.assert_close(ig, expected, rtol=1e-5, atol=1e-6)
    assert ig[0, :, 0, 0].abs().max() < 1e-6 and ig[0, :, 1, 1].abs().max() < 1e-6


def test_extraction_gives_ig_the_black_baseline_of_the_training_split():
    """Train pixels per channel: half 255 (mean 1/2, std 1/2), a quarter 255 (mean 1/4, std sqrt(3)/4),
    three quarters 255 (mean 3/4, std sqrt(3)/4): black = -1, -1/sqrt(3), -sqrt(3). The test split is
    all white and must not count."""
    on = torch.tensor([[1, 1, 0, 0], [1, 0, 0, 0], [1, 1, 1, 0]], dtype=torch.uint8) * 255  # [C, 4 pixels]
    train = ImageSet(images=on.view(1, 3, 2, 2).repeat(4, 1, 1, 1), labels=torch.tensor([0, 1, 0, 1]),
                     masks=None, classes=["a", "b"])
    test = ImageSet(images=torch.full((2, 3, 2, 2), 255, dtype=torch.uint8), labels=torch.tensor([0, 1]),
                    masks=None, classes=["a", "b"])
    ds = make_dataset("fabricated", train, test, {})
    params = Selection.resolve("ig", ExtractOptions(), 0).method_params(ds, torch.device("cpu"), "auto")
    assert params.ig_baseline == pytest.approx((-1.0, -1.0 / math.sqrt(3.0), -math.sqrt(3.0)), rel=1e-6)


def test_documented_defaults_in_the_library():
    """The documented defaults (README, "Semantics"): n = 15 samples, noise level 0.15, 25 IG steps."""
    for samples, noise, steps in ((ExtractOptions().samples, ExtractOptions().noise_level, ExtractOptions().ig_steps),
                                  (MethodParams().samples, MethodParams().noise_level, MethodParams().ig_steps)):
        assert (samples, noise, steps) == (15, 0.15, 25)
    ds = make_dataset("fabricated", *(ImageSet(images=torch.zeros(2, 3, 2, 2, dtype=torch.uint8),
                                               labels=torch.tensor([0, 1]), masks=None, classes=["a", "b"])
                                      for _ in range(2)), {})
    params = Selection.resolve("ig", ExtractOptions(), 0).method_params(ds, torch.device("cpu"), "auto")
    assert (params.samples, params.noise_level, params.ig_steps) == (15, 0.15, 25)


def test_documented_defaults_on_the_command_line():
    from roarfast.cli import main

    defaults = {p.name: p.default for p in main.commands["extract"].params}
    assert (defaults["samples"], defaults["noise_level"], defaults["ig_steps"]) == (15, 0.15, 25)
