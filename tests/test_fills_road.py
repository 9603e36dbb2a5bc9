"""--fill road (roarfast.fills.road): the loader's imputed split against scipy's solve plus the reference
Philox noise, filled once (every batch and epoch alike), KAR's removed set, bad fills and ranks."""

import pytest
import torch

from roarfast import _reference as ref
from roarfast.data.loader import DeviceLoader
from roarfast.errors import UserError
from roarfast.fills import FILLS, removed_pixels, resolve_fill
from roarfast.fills.road import ROAD, ROAD_NOISE

MEAN, STD = (0.4, 0.5, 0.6), (0.2, 0.25, 0.3)


def split(n=6, h=8, w=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    images = torch.randint(0, 256, (n, 3, h, w), dtype=torch.uint8, generator=g)
    ranks = torch.stack([torch.randperm(h * w, generator=g) for _ in range(n)]).view(n, h, w).to(torch.uint16)
    return images, torch.arange(n) % 2, ranks


def expected(images, ranks, fraction, keep):
    """Independently: the removed set from the ranks by hand, scipy's solve, the reference noise, normalized."""
    n, c, h, w = images.shape
    k = int(fraction * h * w)
    removed = ranks.long() >= k if keep else ranks.long() < k
    x = ref.impute(images.double() / 255, removed)
    z = ref.impute_noise_normals(torch.arange(n), c * h * w, 0).view(n, c, h, w).double()
    x = torch.where(removed.unsqueeze(1), x + ROAD_NOISE * z, images.double() / 255)
    return (x - torch.tensor(MEAN).view(1, 3, 1, 1)) / torch.tensor(STD).view(1, 3, 1, 1)


@pytest.mark.parametrize("keep", [False, True], ids=["roar", "kar"])
def test_road_loader_imputes_the_removed_pixels(keep):
    images, labels, ranks = split()
    loader = DeviceLoader(images, labels, MEAN, STD, "cpu", ranks=ranks, fraction=0.5, keep=keep, fill="road")
    index = torch.tensor([4, 0, 2])
    got = loader.gather(index)
    torch.testing.assert_close(got.double(), expected(images, ranks, 0.5, keep)[index], atol=1e-4, rtol=0)


def test_road_loader_fills_each_image_the_same_in_every_batch():
    images, labels, ranks = split()
    loader = DeviceLoader(images, labels, MEAN, STD, "cpu", ranks=ranks, fraction=0.7, fill="road")
    g = torch.Generator().manual_seed(3)
    epochs = [torch.cat([x for x, _ in loader.batches(torch.arange(6), 4, shuffle=True, generator=g)])
              for _ in range(2)]
    whole = loader.gather(torch.arange(6))
    for x in epochs:  # shuffled order: match each row to the whole split's rows
        assert all(any(torch.equal(row, w) for w in whole) for row in x)


def test_road_streamed_equals_in_memory(tmp_path):
    """The streamed path imputes per batch with the noise keyed by sample index: the same images as the
    in-memory loader's whole-split fill, in any batch order."""
    from roarfast.data import load_dataset
    from roarfast.data.loader import split_loader
    from tests.test_data_streamed import CROP, RESIZE, _write_tree

    root = _write_tree(tmp_path / "tree")
    memory, streamed = (load_dataset("imagefolder", root, resize=RESIZE, crop=CROP, device="cpu", stream=stream)
                        for stream in (False, True))
    g = torch.Generator().manual_seed(0)
    n = len(memory.train)
    ranks = torch.stack([torch.randperm(CROP * CROP, generator=g) for _ in range(n)]).view(n, CROP, CROP)
    loaders = [split_loader(ds, "train", "cpu", ranks=ranks.to(torch.int32), fraction=0.6, fill="road")
               for ds in (memory, streamed)]
    order = torch.randperm(n, generator=g)
    (x_memory, _, i_memory), (x_stream, _, i_stream) = (
        next(iter(loader.batches(order, n, with_index=True))) for loader in loaders)
    assert torch.equal(i_memory, i_stream)
    torch.testing.assert_close(x_stream, x_memory, atol=1e-5, rtol=0)


def test_removed_pixels_counts_and_value_ranks():
    _, _, ranks = split(n=2, h=4, w=5)
    assert removed_pixels(ranks, 0.3, keep=False).sum((1, 2)).tolist() == [6, 6]
    assert removed_pixels(ranks, 0.3, keep=True).sum((1, 2)).tolist() == [14, 14]
    with pytest.raises(UserError, match="needs pixel ranks"):
        removed_pixels(torch.zeros(2, 3, 4, 5, dtype=torch.int32), 0.3, keep=False)


def test_fill_names():
    assert resolve_fill("road") is ROAD and ROAD.values(MEAN, STD) is None  # computed: no constant to give
    with pytest.raises(ValueError, match=", ".join(FILLS.names)):
        resolve_fill("roads")
    images, labels, ranks = split()
    with pytest.raises(ValueError, match="unknown fill 'mean'"):
        DeviceLoader(images, labels, MEAN, STD, "cpu", ranks=ranks, fraction=0.5, fill="mean")


@pytest.mark.parametrize("fraction, keep", [(1.0, False), (0.0, True)], ids=["roar-100%", "kar-none-kept"])
def test_road_fills_a_wholly_removed_image_with_the_dataset_mean(fraction, keep):
    """No kept neighbour anywhere: every pixel takes the dataset's channel mean (0 after normalization, like
    the default fill) plus the noise, not black (-mean / std after normalization)."""
    images, _, ranks = split(n=3)
    ids = torch.arange(3)
    got = ROAD.apply(images, ranks, fraction, keep, mean=torch.tensor(MEAN), std=torch.tensor(STD), ids=ids)
    z = ref.impute_noise_normals(ids, 3 * 8 * 8, 0).view(3, 3, 8, 8).double()
    torch.testing.assert_close(got.double(), ROAD_NOISE * z / torch.tensor(STD).view(1, 3, 1, 1), atol=1e-5, rtol=0)
