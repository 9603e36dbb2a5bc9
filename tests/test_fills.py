"""Fills as objects (roarfast.fills): the built-ins the resolver finds, what each says of itself, how a name,
values or a Fill become a Fill, the checks a fill makes of a dataset and of ranks, and what the loaders do with
a computed fill (per batch, or once for a split held in memory, keyed by the sample index either way)."""

import subprocess
import sys

import pytest
import torch

from roarfast.errors import UserError
from roarfast.fills import (DEFAULT_FILL, FILLS, ROAD_FILL, ConstantFill, Fill, Values, removed_pixels,
                            resolve_fill)

MEAN, STD = (0.4, 0.5, 0.6), (0.2, 0.25, 0.3)


def test_the_builtins_in_listing_order_each_a_fill_with_a_description():
    # the design's fills in their order (a new one may join them; tests/test_every_builtin.py tests it)
    assert [name for name in FILLS.names if name in (DEFAULT_FILL, "imagenet-mean", "zero", ROAD_FILL)] == \
        [DEFAULT_FILL, "imagenet-mean", "zero", ROAD_FILL]
    assert FILLS.names[0] == DEFAULT_FILL
    for name in FILLS.names:
        fill = resolve_fill(name)
        assert isinstance(fill, Fill) and fill.name == name and fill.description
        assert name in FILLS
    assert "blur" not in FILLS and None not in FILLS


def test_constant_fills_give_values_computed_ones_do_not():
    constants = {name: resolve_fill(name).values(MEAN, STD) for name in FILLS.names}
    assert constants[ROAD_FILL] is None
    assert constants[DEFAULT_FILL] == (0.0, 0.0, 0.0)
    assert constants["zero"] == pytest.approx((-2.0, -2.0, -2.0))  # -mean / std
    assert all(isinstance(resolve_fill(n), ConstantFill) for n in FILLS.names if n != ROAD_FILL)


def test_the_fill_modules_import_no_torch():
    """The CLI builds --fill from the resolver: finding every built-in must not import torch."""
    code = "import sys; from roarfast.fills import FILLS; FILLS.names; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_resolve_fill_takes_a_fill_a_name_values_or_none():
    road = resolve_fill(ROAD_FILL)
    assert resolve_fill(road) is road
    assert resolve_fill(None) is resolve_fill(DEFAULT_FILL)
    values = resolve_fill((0.5, -1, 2))
    assert isinstance(values, Values) and values.values(MEAN, STD) == (0.5, -1.0, 2.0)
    with pytest.raises(UserError, match=f"unknown fill 'blur'; known: {', '.join(FILLS.names)}$"):
        resolve_fill("blur")
    with pytest.raises(ValueError, match="fill should be a Fill, a name"):
        resolve_fill(3)


def test_a_fill_refuses_what_it_cannot_serve():
    with pytest.raises(UserError, match="--fill imagenet-mean needs 3-channel images, the dataset has 1"):
        resolve_fill("imagenet-mean").check_dataset((0.5,), (0.2,))
    resolve_fill(ROAD_FILL).check_dataset((0.5,), (0.2,))  # imputes any number of channels
    message = (r"--fill road imputes whole pixels and needs pixel ranks \[N, H, W\], but grad's are \(4, 3, 8, 8\) "
               r"\(extract with --granularity pixel\)")
    with pytest.raises(UserError, match=message):
        resolve_fill(ROAD_FILL).check_ranks((4, 3, 8, 8), "grad's")
    resolve_fill(ROAD_FILL).check_ranks((4, 8, 8))
    resolve_fill(DEFAULT_FILL).check_ranks((4, 3, 8, 8))  # a constant replaces single values as well


def test_removed_pixels_refuses_value_ranks():
    with pytest.raises(UserError, match="needs pixel ranks"):
        removed_pixels(torch.zeros(2, 3, 4, 4, dtype=torch.int32), 0.5, keep=False)


class SampleIndex(Fill):
    """Each removed pixel (all channels) becomes the index of its image in the split, in normalized units: the
    `ids` a loader hands a fill, made visible. `calls`: the images of each call."""

    name = "sample-index"
    description = "the image's index"

    def __init__(self):
        self.calls = []

    def apply(self, images, ranks, fraction, keep, *, mean, std, ids, out_dtype=None, channels_last=False):
        from roarfast import ops

        self.calls.append(len(images))
        x = ops.mask_normalize(images, None, mean=mean, std=std)
        index = ids.to(x.dtype).view(-1, 1, 1, 1).expand_as(x)
        return torch.where(removed_pixels(ranks, fraction, keep).unsqueeze(1), index, x).to(out_dtype or x.dtype)


class SampleIndexOnce(SampleIndex):
    whole_split_chunk = 4  # 10 images: three calls, the last one short


def _split(n=10, side=6):
    g = torch.Generator().manual_seed(0)
    images = torch.randint(0, 256, (n, 3, side, side), dtype=torch.uint8, generator=g)
    ranks = torch.stack([torch.randperm(side * side, generator=g) for _ in range(n)]).view(n, side, side)
    return images, torch.arange(n) % 2, ranks.to(torch.int32)


@pytest.mark.parametrize("fill_class, room, calls", [(SampleIndex, 0, []), (SampleIndex, None, [10]),
                                                      (SampleIndexOnce, 0, [4, 4, 2])],
                         ids=["per-batch", "small-split-once", "whole-split"])
def test_a_computed_fill_is_keyed_by_the_sample_index(monkeypatch, fill_class, room, calls):
    """Per batch (a split too large to prepare once), once for a small split (in one call of up to
    PREPARED_CHUNK images), or once when the fill asks (whole_split_chunk images a call, however large the
    split), always at construction, not once per epoch: in any order, every image's removed pixels get its
    own index and its kept pixels are normalized as they are."""
    from roarfast import ops
    from roarfast.data import loader as loader_module
    from roarfast.data.loader import DeviceLoader

    if room is not None:
        monkeypatch.setattr(loader_module, "PREPARED_MAX_BYTES", room)
    fill = fill_class()
    images, labels, ranks = _split()
    loader = DeviceLoader(images, labels, MEAN, STD, "cpu", ranks=ranks, fraction=0.25, fill=fill)
    assert fill.calls == calls
    order = torch.randperm(10, generator=torch.Generator().manual_seed(1))
    for _ in range(2):  # two epochs
        x, _, rows = (torch.cat(parts) for parts in zip(*loader.batches(order, 3, with_index=True)))
        removed = (ranks[rows] < 9).unsqueeze(1).expand_as(x)  # floor(0.25 x 36) pixels removed
        index = rows.view(-1, 1, 1, 1).float().expand_as(x)
        assert torch.equal(x, torch.where(removed, index, ops.mask_normalize(images[rows], None, mean=MEAN, std=STD)))
    assert fill.calls == (calls or [3, 3, 3, 1] * 2)


@pytest.mark.parametrize("ranked, keep", [(False, False), (True, False), (True, True)])
@pytest.mark.parametrize("out_dtype, channels_last", [(torch.float32, False), (torch.bfloat16, True)])
def test_a_split_prepared_once_gives_the_batches_masked_each_time(monkeypatch, ranked, keep, out_dtype,
                                                                 channels_last):
    """The dataset-mean fill (and no ranks: normalization alone) prepared once, in chunks, gives bit for bit
    the batches masked as they are gathered, in the same dtype and memory format, shuffled and augmented."""
    from roarfast.data import loader as loader_module
    from roarfast.data.augment import Augment
    from roarfast.data.loader import DeviceLoader

    images, labels, ranks = _split(n=11)
    options = dict(ranks=ranks if ranked else None, fraction=0.3, keep=keep, out_dtype=out_dtype,
                   channels_last=channels_last)
    monkeypatch.setattr(loader_module, "PREPARED_CHUNK", 4)  # 11 images: three chunks
    once = DeviceLoader(images, labels, MEAN, STD, "cpu", **options)
    monkeypatch.setattr(loader_module, "PREPARED_MAX_BYTES", 0)
    each = DeviceLoader(images, labels, MEAN, STD, "cpu", **options)
    assert once.prepared is not None and each.prepared is None
    spec = Augment(flip=True, translate=1)
    for epoch in range(2):
        batches = [list(loader.batches(torch.arange(11), 4, shuffle=True, augment_spec=spec, with_index=True,
                                       generator=torch.Generator().manual_seed(epoch))) for loader in (once, each)]
        for (x_once, y_once, rows_once), (x_each, y_each, rows_each) in zip(*batches):
            assert torch.equal(rows_once, rows_each) and torch.equal(y_once, y_each)
            assert x_once.dtype == x_each.dtype == out_dtype
            assert x_once.is_contiguous(memory_format=torch.channels_last) == channels_last
            assert torch.equal(x_once, x_each)


def test_a_computed_fill_streamed_is_keyed_by_the_sample_index(tmp_path):
    """The streamed loader fills every batch with the sample indices as ids: the in-memory loader's images."""
    from roarfast.data import load_dataset
    from roarfast.data.loader import split_loader
    from tests.test_data_streamed import CROP, RESIZE, _write_tree

    root = _write_tree(tmp_path / "tree")
    memory, streamed = (load_dataset("imagefolder", root, resize=RESIZE, crop=CROP, device="cpu", stream=stream)
                        for stream in (False, True))
    n = len(memory.train)
    g = torch.Generator().manual_seed(0)
    ranks = torch.stack([torch.randperm(CROP * CROP, generator=g) for _ in range(n)]).view(n, CROP, CROP)
    order = torch.randperm(n, generator=g)
    (x_memory, _, rows), (x_stream, _, rows_stream) = (
        next(iter(split_loader(ds, "train", "cpu", ranks=ranks.to(torch.int32), fraction=0.4,
                               fill=SampleIndex()).batches(order, n, with_index=True))) for ds in (memory, streamed))
    assert torch.equal(rows, rows_stream)
    removed = (ranks[rows] < int(0.4 * CROP * CROP)).unsqueeze(1).expand_as(x_stream)
    assert torch.equal(x_stream[removed], rows.view(-1, 1, 1, 1).expand_as(x_stream)[removed].float())
    torch.testing.assert_close(x_stream, x_memory, atol=1e-5, rtol=0)
