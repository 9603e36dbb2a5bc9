"""DeviceLoader: masking aligned with the sample index, masking before augmentation, shifts and flips
that are exact copies, every sample once per epoch, seeded determinism."""

import itertools

import pytest
import torch

from roarfast import _reference as ref
from roarfast import ops
from roarfast.data.loader import Augment, DeviceLoader, augment
from tests.conftest import devices

MEAN, STD = (0.4, 0.5, 0.6), (0.2, 0.25, 0.3)


def _data(n=23, side=6, seed=0):
    gen = torch.Generator().manual_seed(seed)
    images = torch.randint(0, 256, (n, 3, side, side), dtype=torch.uint8, generator=gen)
    labels = torch.randint(0, 5, (n,), generator=gen)
    # each image its own permutation, so a ranks/image mix-up changes which pixels are masked
    ranks = torch.stack([torch.randperm(side * side, generator=gen) for _ in range(n)]).view(n, side, side)
    return images, labels, ranks.to(torch.int32)


def _shifted_copies(x, pad):
    """Every translate-by-(dy, dx) and flipped version of x (Tensor[C, H, W]) with zero padding."""
    c, h, w = x.shape
    padded = torch.nn.functional.pad(x, (pad, pad, pad, pad))
    for dy, dx, flip in itertools.product(range(2 * pad + 1), range(2 * pad + 1), (False, True)):
        window = padded[:, dy:dy + h, dx:dx + w]
        yield window.flip(-1) if flip else window


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("keep", [False, True])
@pytest.mark.parametrize("rank_dtype", [torch.int32, torch.uint16])  # uint16: the store's dtype up to 256x256
def test_masked_batches_equal_reference_on_same_ranks(device, keep, rank_dtype):
    images, labels, ranks = _data()
    ranks = ranks.to(rank_dtype)
    fill = (0.1, -0.2, 0.3)
    loader = DeviceLoader(images, labels, MEAN, STD, device, ranks=ranks, fraction=0.4, keep=keep, fill=fill)
    order = torch.randperm(23, generator=torch.Generator().manual_seed(1))
    got_x, got_y = zip(*loader.batches(order, batch_size=5))
    got_x, got_y = torch.cat(got_x).cpu(), torch.cat(got_y).cpu()
    expected = ref.mask_normalize(images[order], ranks[order], 0.4, fill, keep, mean=MEAN, std=STD)
    torch.testing.assert_close(got_x, expected, rtol=1e-6, atol=1e-6)
    assert torch.equal(got_y, labels[order])
    # 0.4 * 36 pixels = 14 replaced (ROAR) or kept (KAR) per image, all channels together
    replaced = (got_x == torch.tensor(fill).view(1, 3, 1, 1)).all(1).flatten(1).sum(1)
    assert torch.equal(replaced, torch.full((23,), 36 - 14 if keep else 14))


def test_unmasked_is_plain_normalization():
    images, labels, _ = _data()
    loader = DeviceLoader(images, labels, MEAN, STD, "cpu")
    x, _ = next(loader.batches(torch.arange(4), 4))
    expected = (images[:4].float() / 255 - torch.tensor(MEAN).view(1, 3, 1, 1)) / torch.tensor(STD).view(1, 3, 1, 1)
    torch.testing.assert_close(x, expected)


def test_masking_happens_before_augmentation():
    """Each augmented sample is a shift/flip of the MASKED canvas, with zero (= mean) padding."""
    images, labels, ranks = _data(n=12)
    loader = DeviceLoader(images, labels, MEAN, STD, "cpu", ranks=ranks, fraction=0.5)
    gen = torch.Generator().manual_seed(3)
    index = torch.arange(12)
    (x, y), = loader.batches(index, 12, augment_spec=Augment(flip=True, translate=2), generator=gen)
    masked = ref.mask_normalize(images, ranks, 0.5, (0.0, 0.0, 0.0), mean=MEAN, std=STD)
    for i in range(12):
        assert any(torch.equal(x[i], c) for c in _shifted_copies(masked[i], 2)), f"sample {i}"


def test_augment_uses_every_shift_and_flip():
    x = torch.arange(400 * 1 * 5 * 5, dtype=torch.float32).view(400, 1, 5, 5)
    out = augment(x, Augment(flip=True, translate=1), torch.Generator().manual_seed(0))
    seen = set()
    for i in range(400):
        copies = list(_shifted_copies(x[i], 1))
        matches = [j for j, c in enumerate(copies) if torch.equal(out[i], c)]
        assert matches, f"sample {i} is not a shifted/flipped copy"
        seen.add(matches[0])
    assert len(seen) == 18  # 3 x 3 shifts x 2 flips
    unchanged = augment(x, Augment(flip=False, translate=0), torch.Generator().manual_seed(0))
    assert torch.equal(unchanged, x)


def test_augment_is_one_gather_in_either_layout():
    """The same shifts and flips of a contiguous and of a channels_last batch (from equal generators), the
    padding zero, the result channels_last (what training takes, no layout copy after it)."""
    x = torch.randn(64, 3, 6, 6)
    spec = Augment(flip=True, translate=2)
    plain = augment(x, spec, torch.Generator().manual_seed(5))
    last = augment(x.contiguous(memory_format=torch.channels_last), spec, torch.Generator().manual_seed(5))
    assert torch.equal(plain, last) and last.is_contiguous(memory_format=torch.channels_last)
    for i in range(64):
        assert any(torch.equal(plain[i], c) for c in _shifted_copies(x[i], 2)), f"sample {i}"


def test_shuffled_epoch_covers_each_index_once_and_is_seeded():
    images, labels, _ = _data(n=23)
    labels = torch.arange(23)  # label = sample index
    loader = DeviceLoader(images, labels, MEAN, STD, "cpu")
    index = torch.tensor([0, 2, 3, 5, 7, 11, 13, 17, 19, 22])

    def epoch(seed, drop_last=False):
        gen = torch.Generator().manual_seed(seed)
        return [y for _, y in loader.batches(index, 4, shuffle=True, generator=gen, drop_last=drop_last)]

    ys = torch.cat(epoch(0))
    assert torch.equal(ys.sort().values, index) and not torch.equal(ys, index)
    assert torch.equal(ys, torch.cat(epoch(0)))
    assert not torch.equal(ys, torch.cat(epoch(1)))
    assert [len(y) for y in epoch(0, drop_last=True)] == [4, 4]


def test_misaligned_ranks_are_refused():
    images, labels, ranks = _data(n=5)
    with pytest.raises(ValueError, match="ranks should be"):
        DeviceLoader(images, labels, MEAN, STD, "cpu", ranks=ranks[:4], fraction=0.5)


@pytest.mark.parametrize("device", devices())
def test_rank_rows_and_int32_keep_every_uint16_bit(device):
    # values above 32767 are negative as int16 bits: the helpers must give them back unchanged
    ranks = torch.tensor([[0, 1, 32767], [32768, 65534, 65535], [7, 40000, 3]], dtype=torch.int32)
    stored = ranks.to(torch.uint16).to(device)
    rows = torch.tensor([2, 0, 1, 1], device=device)
    gathered = ops.rank_rows(stored, rows)
    assert gathered.dtype == torch.uint16 and gathered.device == stored.device
    assert torch.equal(ops.ranks_as_int32(gathered).cpu(), ranks[[2, 0, 1, 1]])
    assert torch.equal(ops.ranks_as_int32(ranks.to(device)).cpu(), ranks)
