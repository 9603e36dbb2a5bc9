"""Every built-in estimator and fill, as their registries list them (a new one is tested here without editing a
list): what every consumer relies on. An estimator's maps are float32 [B, C or 1, H, W] and finite, an image's
the same in any batch (its index, not its place in the batch, keys whatever it draws), and they change with the
seed exactly when its record says it draws random numbers; a fill replaces exactly the units a ROAR or KAR
fraction removes, normalizes the rest as the loaders do, and fills an image alike in any batch."""

from dataclasses import replace

import pytest
import torch

from roarfast import ops
from roarfast.fills import FILLS, ConstantFill, removed_pixels, resolve_fill
from roarfast.methods import ExplainBatch, MethodParams, black_baseline, compute_maps, known_methods, registry
from tests.test_methods_gradients import MEAN, STD, tiny_cnn

#: every estimator's values kept small: two noisy samples, two IG steps
PARAMS = MethodParams(samples=2, ig_steps=2, ig_baseline=black_baseline(MEAN, STD), seed=1)


def images(rows: int = 4, size: int = 8) -> ExplainBatch:
    gen = torch.Generator().manual_seed(0)
    return ExplainBatch(x=torch.randn(rows, 3, size, size, generator=gen), target=torch.arange(rows) % 4,
                        index=torch.arange(10, 10 + rows), gt_mask=torch.rand(rows, size, size, generator=gen) > 0.7)


def tail(batch: ExplainBatch, start: int) -> ExplainBatch:
    """The rows from `start` on, as a batch of their own (the same indices)."""
    return ExplainBatch(x=batch.x[start:], target=batch.target[start:], index=batch.index[start:],
                        gt_mask=batch.gt_mask[start:])


@pytest.mark.parametrize("name", known_methods())
def test_every_builtin_estimator_gives_finite_maps_per_image_seeded_as_declared(name):
    record = registry.get(name)
    model = tiny_cnn() if record.uses_model else None
    batch = images()
    maps = compute_maps(model, batch, [name], PARAMS)[name]
    assert maps.dtype == torch.float32 and maps.shape in ((4, 3, 8, 8), (4, 1, 8, 8))
    assert bool(torch.isfinite(maps).all())
    # the last two images in a batch of their own: the same maps, up to the model's float rounding
    torch.testing.assert_close(compute_maps(model, tail(batch, 2), [name], PARAMS)[name], maps[2:],
                               rtol=1e-5, atol=1e-6)
    assert torch.equal(compute_maps(model, batch, [name], PARAMS)[name], maps)
    other_seed = compute_maps(model, batch, [name], replace(PARAMS, seed=2))[name]
    assert (not torch.equal(other_seed, maps)) == record.seeded


@pytest.mark.parametrize("keep", [False, True], ids=["roar", "kar"])
@pytest.mark.parametrize("name", FILLS.names)
def test_every_builtin_fill_replaces_exactly_the_units_a_fraction_removes(name, keep):
    fill = resolve_fill(name)
    gen = torch.Generator().manual_seed(0)
    pixels = torch.randint(0, 256, (3, 3, 8, 8), dtype=torch.uint8, generator=gen)
    ranks = ops.rank(torch.rand(3, 8, 8, generator=gen))
    ids = torch.tensor([4, 5, 6])
    fill.check_dataset(MEAN, STD)
    out = fill.apply(pixels, ranks, 0.25, keep, mean=MEAN, std=STD, ids=ids)
    plain = (pixels.float() / 255 - torch.tensor(MEAN).view(1, 3, 1, 1)) / torch.tensor(STD).view(1, 3, 1, 1)
    removed = removed_pixels(ranks, 0.25, keep).unsqueeze(1).expand_as(plain)
    assert out.dtype == torch.float32 and out.shape == plain.shape and bool(torch.isfinite(out).all())
    torch.testing.assert_close(out[~removed], plain[~removed], rtol=1e-6, atol=1e-6)
    assert not torch.allclose(out[removed], plain[removed])
    if isinstance(fill, ConstantFill):  # what the loaders fuse with the normalization: its declared values
        torch.testing.assert_close(out, torch.where(removed, torch.tensor(fill.values(MEAN, STD)).view(1, 3, 1, 1),
                                                    plain))
    # the last image alone, under its index: filled alike (whatever a fill draws follows the image)
    alone = fill.apply(pixels[2:], ranks[2:], 0.25, keep, mean=MEAN, std=STD, ids=ids[2:])
    assert torch.equal(alone, out[2:])
