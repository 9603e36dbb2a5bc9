"""StreamLoader (DALI streaming of a JPEG tree, CPU pipeline here) against the in-memory path: the same
canvas, masked with the same ranks row by row, in DeviceLoader's order; every sample once per epoch;
misaligned ranks refused. The streamed splits come from load_imagefolder(stream=True)."""


import numpy as np
import pytest
import torch
from PIL import Image

from roarfast import ops
from roarfast.data.builtin.imagefolder import load_imagefolder
from roarfast.data.loader import Augment, DeviceLoader
from roarfast.data.stream import StreamLoader
from roarfast.store import RankStore

# The GPU machine cannot carry DALI (480 MB): its cuda test here skips there; CI and users install it.
pytest.importorskip("nvidia.dali", reason="nvidia-dali is not installed")

RESIZE, CROP = 20, 16
MEAN, STD = (0.5, 0.4, 0.3), (0.2, 0.25, 0.3)
FILL = (0.5, -1.0, 2.0)
FRACTION = 0.3


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    """train: 3 classes, 20 noise images of varied sizes and aspect ratios; val: 2 of the classes, 7 images."""
    root = tmp_path_factory.mktemp("tree")
    rng = np.random.default_rng(0)
    for split, counts in (("train", {"ant": 7, "bee": 6, "cow": 7}), ("val", {"ant": 4, "cow": 3})):
        for cls, count in counts.items():
            (root / split / cls).mkdir(parents=True)
            for i in range(count):
                height, width = rng.integers(18, 48, 2)
                pixels = rng.integers(0, 256, (height, width, 3), dtype=np.uint8)
                Image.fromarray(pixels).save(root / split / cls / f"{i:02d}.jpg", quality=90)
    train, test = load_imagefolder(root, resize=RESIZE, crop=CROP, device="cpu", stream=False)
    streamed = dict(zip(("train", "test"), load_imagefolder(root, resize=RESIZE, crop=CROP, device="cpu",
                                                            stream=True)))
    return streamed, {"train": train, "test": test}


def _ranks(n: int, units=(CROP, CROP), dtype=torch.uint16, seed=1) -> torch.Tensor:
    """Random ranks per image, Tensor[n, *units]: a permutation, its upper half moved above 32767 (beyond
    int16, the full uint16 range of a 224 canvas) where the dtype allows, keeping the order."""
    g = torch.Generator().manual_seed(seed)
    size = int(np.prod(units))
    ranks = torch.stack([torch.randperm(size, generator=g) for _ in range(n)]).view(n, *units)
    if dtype == torch.uint16:
        ranks = ranks + (ranks >= size // 2) * 40000
    return ranks.to(dtype)


def _loader(streamed, split, ranks, **kw):
    return StreamLoader(streamed[split], MEAN, STD, "cpu", ranks=ranks, fraction=FRACTION, fill=FILL, num_threads=1,
                        **kw)


@pytest.mark.parametrize("split", ["train", "test"])
@pytest.mark.parametrize("shuffle", [False, True])
@pytest.mark.parametrize("units,dtype", [((CROP, CROP), torch.uint16), ((3, CROP, CROP), torch.int32)])
def test_streamed_batches_equal_masked_in_memory_canvas(tree, split, shuffle, units, dtype):
    streamed, sets = tree
    images = sets[split]
    n = images.images.shape[0]
    ranks = _ranks(n, units, dtype)
    loader = _loader(streamed, split, ranks)
    assert len(loader) == n and loader.classes == ["ant", "bee", "cow"]
    seen = []
    generator = torch.Generator().manual_seed(3)
    for x, y, index in loader.batches(torch.arange(n), 6, shuffle=shuffle, generator=generator, with_index=True):
        expected = ops.mask_normalize(images.images[index], ranks[index], FRACTION, FILL, mean=MEAN, std=STD)
        assert x.dtype == torch.float32 and x.shape == (index.shape[0], 3, CROP, CROP)
        assert torch.equal(x, expected)
        assert torch.equal(y, images.labels[index])
        seen.append(index)
    seen = torch.cat(seen)
    assert sorted(seen.tolist()) == list(range(n))  # each sample once, the last batch partial
    assert (seen.tolist() != list(range(n))) == shuffle


def test_same_batches_as_device_loader_with_augmentation_and_subset(tree):
    """Equally seeded generators: the same shuffle of a subset, the same drop_last, the same augmentation."""
    streamed, sets = tree
    train = sets["train"]
    ranks = _ranks(train.images.shape[0])
    subset = torch.tensor([0, 2, 3, 5, 7, 8, 11, 12, 13, 16, 18, 19])
    memory = DeviceLoader(train.images, train.labels, MEAN, STD, "cpu", ranks=ranks, fraction=FRACTION, fill=FILL)
    spec = Augment(flip=True, translate=2)
    for epoch in range(2):
        kw = dict(shuffle=True, augment_spec=spec, drop_last=True)
        expected = list(memory.batches(subset, 5, generator=torch.Generator().manual_seed(epoch), **kw))
        got = list(_loader(streamed, "train", ranks).batches(subset, 5, generator=torch.Generator().manual_seed(epoch),
                                                         **kw))
        assert len(got) == len(expected) == 2
        for (x, y), (x_ref, y_ref) in zip(got, expected):
            assert torch.equal(x, x_ref) and torch.equal(y, y_ref)


def test_shards_split_each_batch(tree):
    streamed, sets = tree
    loader = _loader(streamed, "train", None)
    everything = torch.arange(len(loader))
    shards = [list(loader.batches(everything, 8, shard=(rank, 2), with_index=True)) for rank in range(2)]
    assert [len(s) for s in shards] == [3, 3]
    for t, ((_, _, first), (_, _, second)) in enumerate(zip(*shards)):
        assert first.tolist() == list(range(8 * t, min(8 * t + 8, 20), 2))
        assert second.tolist() == list(range(8 * t + 1, min(8 * t + 8, 20), 2))


def test_unmasked_without_ranks(tree):
    streamed, sets = tree
    test = sets["test"]
    (x, y, index), = _loader(streamed, "test", None).batches(torch.arange(7), 7, with_index=True)
    assert torch.equal(x, ops.mask_normalize(test.images, None, mean=MEAN, std=STD))
    assert index.tolist() == list(range(7)) and torch.equal(y, test.labels)


def test_ranks_from_the_rank_store(tree, tmp_path):
    """A RankRecord is read row by row from its memory map (the store holds real ranks: in [0, H*W))."""
    streamed, sets = tree
    train = sets["train"]
    ranks = _ranks(20, seed=5, dtype=torch.int32).to(torch.uint16)
    writer = RankStore(tmp_path).open_writer("random", "train", shape=ranks.shape, dtype="uint16", chunk_size=20,
                                             params={}, checkpoint_sha256=None, dataset_fingerprint="f")
    writer.write_chunk(0, ranks)
    writer.close()
    record = RankStore(tmp_path).read("random", "train")
    index = torch.tensor([19, 4, 0])
    (x, _), = _loader(streamed, "train", record).batches(index, 3)
    assert torch.equal(x, ops.mask_normalize(train.images[index], ranks[index], FRACTION, FILL, mean=MEAN, std=STD))


def test_damaged_ranks_are_refused_before_a_batch_reads_them(tree, tmp_path):
    """The StreamLoader reads rank rows from the memory map: it verifies the chunks of its order first."""
    from roarfast.errors import UserError
    from tests.test_store import damage

    streamed, _ = tree
    ranks = _ranks(20, seed=5, dtype=torch.int32).to(torch.uint16)
    store = RankStore(tmp_path)
    writer = store.open_writer("random", "train", shape=ranks.shape, dtype="uint16", chunk_size=10, params={},
                               checkpoint_sha256=None, dataset_fingerprint="f")
    writer.write_chunk(0, ranks[:10])
    writer.write_chunk(1, ranks[10:])
    writer.close()
    damage(store.path("random", "train"), row=12)
    loader = _loader(streamed, "train", store.read("random", "train"))
    assert len(list(loader.batches(torch.arange(10), 5))) == 2  # chunk 0 is intact
    with pytest.raises(UserError, match=r"random/train/ranks.npy: chunk 1 \(rows 10-19\) does not match"):
        next(loader.batches(torch.tensor([3, 15]), 2))


@pytest.mark.cuda
def test_mixed_gpu_decoder_matches_in_memory_gpu_canvas(tree):
    streamed, _ = tree
    train, _ = load_imagefolder(streamed["train"].root.parent, resize=RESIZE, crop=CROP, device="gpu", stream=False)
    ranks = _ranks(20)
    loader = StreamLoader(streamed["train"], MEAN, STD, "cuda", ranks=ranks, fraction=FRACTION, fill=FILL)
    for x, y, index in loader.batches(torch.arange(20), 8, shuffle=True, with_index=True,
                                      generator=torch.Generator("cuda").manual_seed(0)):
        assert x.is_cuda and y.is_cuda
        rows = index.cpu()
        expected = ops.mask_normalize(train.images[rows].cuda(), ranks[rows].cuda(), FRACTION, FILL, mean=MEAN,
                                      std=STD)
        assert torch.equal(x, expected) and torch.equal(y.cpu(), train.labels[rows])


@pytest.mark.parametrize("shape", [(19, CROP, CROP), (21, CROP, CROP), (20, CROP, CROP + 1), (20, 24, 24),
                                   (20, 2, CROP, CROP), (20 * CROP * CROP,)])
def test_misaligned_ranks_refused(tree, shape):
    streamed, _ = tree
    with pytest.raises(ValueError, match=rf"ranks should be \[20, {CROP}, {CROP}\] or \[20, 3, {CROP}, {CROP}\]"):
        _loader(streamed, "train", torch.zeros(shape, dtype=torch.int32))


def test_misaligned_rank_record_named(tree, tmp_path):
    streamed, _ = tree
    writer = RankStore(tmp_path).open_writer("sobel", "test", shape=(7, CROP, CROP), dtype="uint16", chunk_size=7,
                                             params={}, checkpoint_sha256=None, dataset_fingerprint="f")
    writer.write_chunk(0, _ranks(7))
    writer.close()
    with pytest.raises(ValueError, match=r"ranks of 'sobel'/'test' should be \[20, .*got \[7, 16, 16\]"):
        _loader(streamed, "train", RankStore(tmp_path).read("sobel", "test"))


def test_refuses_a_split_in_memory(tree):
    _, sets = tree
    with pytest.raises(ValueError, match="files should be a FileSet"):
        StreamLoader(sets["train"], MEAN, STD, "cpu")


def test_a_large_batch_is_decoded_in_pieces_and_joined_unchanged(tree, monkeypatch):
    """An evaluation-sized batch goes through the decoder DECODE_BATCH images at a time (its buffers hold a piece,
    not the batch) and comes out as the one batch the in-memory loader gathers, augmentation included."""
    from roarfast.data import stream as stream_module

    streamed, sets = tree
    train = sets["train"]
    ranks = _ranks(train.images.shape[0])
    widths, real = [], stream_module.canvas_batches

    def recorded(decoder, split_dir, files, plan, *args, **kwargs):
        widths.extend(len(rows) for rows in plan)
        return real(decoder, split_dir, files, plan, *args, **kwargs)

    monkeypatch.setattr(stream_module, "DECODE_BATCH", 4)
    monkeypatch.setattr(stream_module, "canvas_batches", recorded)
    memory = DeviceLoader(train.images, train.labels, MEAN, STD, "cpu", ranks=ranks, fraction=FRACTION, fill=FILL)
    kw = dict(shuffle=True, augment_spec=Augment(flip=True, translate=2), with_index=True)
    index = torch.arange(train.images.shape[0])
    expected = list(memory.batches(index, 9, generator=torch.Generator().manual_seed(5), **kw))
    got = list(_loader(streamed, "train", ranks).batches(index, 9, generator=torch.Generator().manual_seed(5), **kw))
    assert widths == [4, 4, 1, 4, 4, 1, 2]  # batches of 9, 9 and 2 images, each in pieces of at most 4
    assert [len(y) for _, y, _ in got] == [9, 9, 2]
    for (x, y, rows), (x_ref, y_ref, rows_ref) in zip(got, expected, strict=True):
        assert torch.equal(rows, rows_ref) and torch.equal(y, y_ref) and torch.equal(x, x_ref)
