"""random (batching-invariant per image), sobel (against a hand-built edge), oracle (the mask)."""

import pytest
import torch

from roarfast.errors import UserError
from roarfast.methods import ExplainBatch, compute_maps
from tests.test_methods_gradients import tiny_cnn


def batch_of(x, index, seed=0, gt_mask=None):
    return ExplainBatch(x=x, target=torch.zeros(x.shape[0], dtype=torch.int64), index=index, gt_mask=gt_mask,
                        seed=seed)


def test_random_is_fixed_per_image_whatever_the_batching():
    x = torch.randn(6, 3, 5, 5)
    index = torch.tensor([0, 1, 2, 3, 4, 5]) + 100
    whole = compute_maps(tiny_cnn(), batch_of(x, index), ["random"])["random"]
    assert whole.shape == (6, 3, 5, 5) and whole.dtype == torch.float32
    # Other batchings, other orders, other pixel values: image i keeps its scores.
    parts = [compute_maps(tiny_cnn(), batch_of(torch.randn(len(rows), 3, 5, 5), index[rows]), ["random"])["random"]
             for rows in ([4, 1], [5], [0, 3, 2])]
    assert torch.equal(parts[0], whole[[4, 1]])
    assert torch.equal(parts[1], whole[[5]])
    assert torch.equal(parts[2], whole[[0, 3, 2]])
    # Distinct images and distinct seeds get distinct rankings.
    assert not torch.equal(whole[0], whole[1])
    other_seed = compute_maps(tiny_cnn(), batch_of(x, index, seed=1), ["random"])["random"]
    assert not torch.equal(other_seed, whole)


def test_sobel_responds_only_at_a_vertical_step_edge():
    size, edge = 8, 4
    x = torch.zeros(2, 3, size, size)
    x[0, :, :, edge:] = 1.0  # vertical edge between columns 3 and 4, all channels
    x[1, 1, :, edge:] = 2.0  # one channel only, twice the step
    sobel = compute_maps(tiny_cnn(), batch_of(x, torch.arange(2)), ["sobel"])["sobel"]
    assert sobel.shape == (2, 1, size, size)
    # Hand count: Gx at columns edge-1 and edge sees the step through weights 1+2+1 = 4 per unit step;
    # Gy is 0 everywhere (rows are identical, borders replicated); channels sum.
    expected = torch.zeros(2, 1, size, size)
    expected[0, 0, :, edge - 1:edge + 1] = 3 * 4.0
    expected[1, 0, :, edge - 1:edge + 1] = 2 * 4.0
    torch.testing.assert_close(sobel, expected)


def test_sobel_combines_both_directions_as_a_magnitude():
    x = torch.zeros(1, 1, 6, 6)
    x[0, 0, 3:, 3:] = 1.0  # a corner: both a horizontal and a vertical edge meet at (3, 3)
    sobel = compute_maps(tiny_cnn(channels=1), batch_of(x, torch.arange(1)), ["sobel"])["sobel"]
    # At pixel (2, 2) the 3x3 window holds only the corner value 1 at its bottom-right: Gx = Gy = 1.
    assert sobel[0, 0, 2, 2].item() == pytest.approx(2 ** 0.5)
    # At (3, 3) the window's rows are 0,0,0 / 0,1,1 / 0,1,1: Gx = 2*1 + 1*1 = 3, Gy = 3 by symmetry.
    assert sobel[0, 0, 3, 3].item() == pytest.approx(18 ** 0.5)
    # Flat regions, dark or bright, give nothing.
    assert sobel[0, 0, 0, 0].item() == 0.0 and sobel[0, 0, 5, 5].item() == 0.0


def test_oracle_returns_the_ground_truth_mask():
    mask = torch.rand(3, 7, 7) > 0.5
    maps = compute_maps(tiny_cnn(), batch_of(torch.randn(3, 3, 7, 7), torch.arange(3), gt_mask=mask), ["oracle"])
    assert maps["oracle"].dtype == torch.float32
    assert torch.equal(maps["oracle"], mask.float().unsqueeze(1))


def test_oracle_without_masks_says_so():
    with pytest.raises(UserError, match="ground-truth"):
        compute_maps(tiny_cnn(), batch_of(torch.randn(2, 3, 7, 7), torch.arange(2)), ["oracle"])
