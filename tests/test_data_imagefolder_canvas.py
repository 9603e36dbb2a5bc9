"""The JPEG canvas geometry with an off-centre feature, for DALI and the CPU decoder: a square squash or an
off-centre crop moves it, while the README's "shorter side resized, then center crop" puts it where the
hand-worked numbers say."""

import numpy as np
import pytest
import torch

from tests.test_data_imagefolder import JPEG_TOLERANCE, _solid, canvas_of, decoder  # noqa: F401 (a fixture)

BACKGROUND, STRIPE = (200, 30, 30), (30, 30, 200)


@pytest.mark.parametrize("wide", [True, False])
def test_off_centre_stripe_lands_where_shorter_side_resize_and_center_crop_put_it(tmp_path, wide, decoder):
    """A 20x40 image (or 40x20), background with a stripe over long-axis columns [20, 30).

    Shorter side 20 -> 16 scales by 0.8: the stripe spans resized columns [16, 24); the center crop of
    12 from 32 starts at column 10, so the stripe covers canvas columns [6, 14): the right half.
    A square squash (16x16, long axis scaled by 0.4) would put it at resized [8, 12), canvas [6, 10)
    (crop from column 2), leaving canvas columns 10-11 background; a top-left crop shows background only.
    """
    image = _solid(BACKGROUND, 20, 40)
    image[:, 20:30] = STRIPE
    if not wide:
        image = np.ascontiguousarray(image.transpose(1, 0, 2))
    canvas = canvas_of(tmp_path, image, wide)
    # 2 px either side of the stripe's edge at canvas column 6 are left out (antialiased resize blurs it)
    assert (canvas[:, :4] - torch.tensor(BACKGROUND)).abs().max() <= JPEG_TOLERANCE
    assert (canvas[:, 8:] - torch.tensor(STRIPE)).abs().max() <= JPEG_TOLERANCE
