"""Exactly floor(fraction x N) units are removed (README, "Semantics"), at fractions where floor and
round disagree; expected counts are worked by hand, not taken from ops.units_for_fraction."""

import pytest
import torch

from roarfast import ops

#: (fraction, units, floor(fraction * units)) where round() would give one more
FLOOR_CASES = [(0.7, 1024, 716),  # 716.8
               (0.55, 10, 5)]  # 5.5: round half up and Python's round-half-even both give 6


@pytest.mark.parametrize("fraction, units, k", FLOOR_CASES)
def test_units_for_fraction_is_the_floor(fraction, units, k):
    assert ops.units_for_fraction(fraction, units) == k


def test_floor_of_the_decimal_fraction():
    # 0.29 * 100 is 28.999999999999996 in floating point: the fraction the user wrote removes 29
    assert ops.units_for_fraction(0.29, 100) == 29


@pytest.mark.parametrize("keep", [False, True])
@pytest.mark.parametrize("fraction, side, k", [(0.7, 32, 716), (0.55, None, 5)])
def test_mask_at_a_fraction_replaces_floor_units(fraction, side, k, keep):
    """ROAR replaces ranks 0..k-1, KAR all others; 10 units as a 2x5 image."""
    h, w = (side, side) if side else (2, 5)
    ranks = torch.randperm(h * w, generator=torch.Generator().manual_seed(3)).view(1, h, w)
    images = torch.ones(1, 3, h, w)
    out = ops.mask(images, ranks.to(torch.int32), fraction, [0.0] * 3, keep=keep)
    replaced = (out == 0.0).all(1)[0]
    expected = ranks[0] >= k if keep else ranks[0] < k
    assert torch.equal(replaced, expected)
    assert int(replaced.sum()) == (h * w - k if keep else k)


def test_mask_normalize_at_a_fraction_replaces_floor_units():
    images = torch.full((2, 3, 32, 32), 255, dtype=torch.uint8)
    ranks = torch.stack([torch.randperm(1024, generator=torch.Generator().manual_seed(s)) for s in (0, 1)])
    out = ops.mask_normalize(images, ranks.view(2, 32, 32).to(torch.int32), 0.7, [0.0] * 3,
                             mean=[0.5] * 3, std=[0.5] * 3)  # kept pixels normalize to 1.0, replaced ones are 0.0
    assert (out == 0.0).all(1).flatten(1).sum(1).tolist() == [716, 716]
    assert (out == 1.0).all(1).flatten(1).sum(1).tolist() == [308, 308]
