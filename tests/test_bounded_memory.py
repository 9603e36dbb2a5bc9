"""Memory bounded by the work, not the dataset: a rank store's rows are read as a batch asks for them (those rows
and no more, nothing left mapped), and a streamed split's mask-only control reads one batch's rows at a time
instead of its whole store, yielding what the same loader yields with the ranks in memory; a dry run's peak for a
worker stops growing with the dataset once its batches are full, and counts an evaluation's tensors alive at once."""

import os
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from roarfast.data.base import FileSet, ImageSet
from roarfast.errors import UserError
from roarfast.data.loader import pattern_loader
from roarfast.data.stream import DECODE_BATCH
from roarfast.planning.costs import (CPU_HEAP_FACTOR, DECODER_PROCESS_BYTES, INDEX_BYTES, Target, evaluation_bytes,
                                     streamed_bytes, training_memory)
from roarfast.recipe import Recipe
from roarfast.store import RankStore
from roarfast.store import record as record_module

N, SIDE, CHUNK, BATCH = 40, 8, 8, 5


@pytest.fixture
def record(tmp_path):
    """A complete store of N random rank rows of SIDE x SIDE pixels in chunks of CHUNK, read back."""
    rng = np.random.default_rng(0)
    ranks = np.stack([rng.permutation(SIDE * SIDE) for _ in range(N)]).reshape(N, SIDE, SIDE).astype(np.uint16)
    store = RankStore(tmp_path)
    writer = store.open_writer("random", "train", shape=ranks.shape, dtype="uint16", chunk_size=CHUNK, params={},
                               checkpoint_sha256=None, dataset_fingerprint="d" * 64)
    for chunk in range(N // CHUNK):
        start, stop = writer.chunk_rows(chunk)
        writer.write_chunk(chunk, torch.from_numpy(ranks[start:stop]))
    writer.close()
    return store.read("random", "train"), ranks


def test_rows_read_those_rows_alone_and_leave_nothing_mapped(record, monkeypatch):
    rec, ranks = record
    reads = []
    real = os.preadv

    def counted(fd, buffers, offset):
        reads.append(sum(len(b) for b in buffers))
        return real(fd, buffers, offset)

    monkeypatch.setattr(record_module.os, "preadv", counted)
    rec.verify()  # every chunk checked, one chunk a read
    assert max(reads) <= CHUNK * SIDE * SIDE * 2
    reads.clear()
    index = [33, 3, 4, 5, 17]
    np.testing.assert_array_equal(rec.rows(torch.tensor(index)).numpy(), ranks[index])
    assert sum(reads) == len(index) * SIDE * SIDE * 2  # the five rows, no page of the rest
    maps = Path("/proc/self/maps")
    if maps.exists():  # a map's touched pages would count in the process's resident memory
        assert str(rec.directory / "ranks.npy") not in maps.read_text()


def test_a_chunk_is_checked_a_few_rows_at_a_time_and_damage_still_found(record, monkeypatch):
    rec, ranks = record
    reads, real = [], os.preadv

    def counted(fd, buffers, offset):
        reads.append(sum(len(b) for b in buffers))
        return real(fd, buffers, offset)

    monkeypatch.setattr(record_module, "VERIFY_ROWS", 3)
    monkeypatch.setattr(record_module.os, "preadv", counted)
    rec.verify()  # chunks of 8 rows, read 3 rows at a time: the checksum of the pieces is the chunk's
    assert max(reads) == 3 * SIDE * SIDE * 2 and sum(reads) == ranks.nbytes
    path = rec.directory / "ranks.npy"
    data = bytearray(path.read_bytes())
    data[-SIDE * SIDE * 2 * 10 + 4] ^= 1  # row 30 (chunk 3) changed, its ranks still in range
    path.write_bytes(bytes(data))
    with pytest.raises(UserError, match="chunk 3 .*does not match the checksum"):
        RankStore(rec.directory.parent.parent).read("random", "train").verify()


def test_a_streamed_control_reads_one_batch_of_rows_at_a_time(record):
    rec, ranks = record
    labels = torch.arange(N) % 3
    streamed = FileSet(root=Path("/nonexistent"), files=[f"{i}.jpg" for i in range(N)], labels=labels,
                       classes=["a", "b", "c"], shape=(3, SIDE, SIDE), canvas={}, digest="0" * 64)
    held = ImageSet(images=torch.zeros(N, 3, SIDE, SIDE, dtype=torch.uint8), labels=labels, masks=None,
                    classes=["a", "b", "c"])
    taken = []
    take = rec.reader.take
    rec.reader.take = lambda index: taken.append(len(index)) or take(index)
    on_disk = pattern_loader(SimpleNamespace(split=lambda name: streamed), "train", "cpu", ranks=rec, fraction=0.4)
    in_memory = pattern_loader(SimpleNamespace(split=lambda name: held), "train", "cpu",
                               ranks=torch.from_numpy(ranks), fraction=0.4)
    assert on_disk.ranks is None and on_disk.prepared is None and not taken  # nothing of the store read ahead
    order = torch.randperm(N, generator=torch.Generator().manual_seed(0))
    for (x, y), (x_held, y_held) in zip(on_disk.batches(order, BATCH), in_memory.batches(order, BATCH), strict=True):
        torch.testing.assert_close(x, x_held, rtol=0, atol=0)
        assert torch.equal(y, y_held)
    assert taken and max(taken) <= BATCH and sum(taken) == N  # each row read once, a batch's rows a read


class _Split:
    def __init__(self, n: int):
        self.n, self.shape = n, (3, 224, 224)

    def __len__(self) -> int:
        return self.n


def _outline(images: int, streamed=None):
    """A dry run's outline of a 224-px tree of `images` train images (a tenth held out) and a tenth as many test,
    read with stream=`streamed` (None: auto)."""
    return SimpleNamespace(train=_Split(images), test=_Split(images // 10), val_images=images // 10,
                           train_index=range(images - images // 10), channels=3, image_size=224, streamed=streamed)


SHAPE = SimpleNamespace(parameters=1_000_000, activation_bytes=4e6)
CPU = Target("cpu", torch.device("cpu"), None, 16 * 2**30)  # the canvases of 200,000 images do not fit


def test_a_workers_planned_peak_stops_growing_at_its_batches():
    recipe = Recipe(batch_size=128, eval_batch_size=512)
    peak = {n: training_memory(SHAPE, recipe, _outline(n), CPU, evaluation=10e6) for n in (2_000, 200_000, 2_000_000)}
    # streamed: the batches, not the dataset; its labels and indices alone grow, INDEX_BYTES an image
    assert peak[2_000_000] - peak[200_000] == INDEX_BYTES * (2_200_000 - 220_000)
    assert peak[2_000] < peak[200_000]  # 200 images an evaluation batch where the split is smaller than 512
    # the evaluation batch is the peak here: 512 images x 10 MB x the CPU heap's factor, over 128 x 4 MB; one batch,
    # since an evaluation hands each batch's blocks back before the next (and the training steps' before the first)
    evaluation = 512 * 10e6 * CPU_HEAP_FACTOR
    assert evaluation < peak[200_000] < evaluation + 1.5 * 2**30


def test_a_streamed_tree_is_planned_as_its_batches_even_where_it_would_fit():
    recipe = Recipe(batch_size=128, eval_batch_size=512)
    canvases = 3 * 224 * 224  # uint8, both splits
    streamed = {n: training_memory(SHAPE, recipe, _outline(n, True), CPU, evaluation=10e6) for n in (6_000, 20_000)}
    held = {n: training_memory(SHAPE, recipe, _outline(n, False), CPU, evaluation=10e6) for n in (6_000, 20_000)}
    # stream=true: 20,000 images' canvases (3 GiB) fit in half of 16 GiB, yet only the indices grow with the images
    assert streamed[20_000] - streamed[6_000] == INDEX_BYTES * 15_400
    # stream=false holds the canvases: they grow by their bytes, and the batches they replace are the streamed ones
    assert held[20_000] - held[6_000] == (canvases + INDEX_BYTES) * 15_400
    batches = streamed_bytes(3, 224, 128, 512, DECODE_BATCH)  # an evaluation batch's
    assert held[20_000] - streamed[20_000] == canvases * 22_000 - batches - DECODER_PROCESS_BYTES
    # auto holds what fits half the memory, as a load with stream=auto would
    assert training_memory(SHAPE, recipe, _outline(20_000), CPU, evaluation=10e6) == held[20_000]


def test_an_evaluations_live_tensors_are_counted_as_they_are_freed():
    from torch import nn

    spec = SimpleNamespace(build=lambda classes, side, channels: nn.Sequential(
        nn.Conv2d(channels, 4, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(4 * side * side, classes)))
    data = SimpleNamespace(num_classes=10, image_size=8, channels=3)
    # the input (3 x 8 x 8), then the convolution's output and the ReLU's alive together (4 x 8 x 8 each); the
    # convolution's output is freed before the linear layer's small output is made
    assert evaluation_bytes(spec, data) == (3 * 64 + 2 * 4 * 64) * 4


def test_a_streamed_cell_reads_a_batch_of_rank_rows_at_a_time_and_keeps_no_store_open(tmp_path, monkeypatch):
    """A long-lived worker's cell on a streamed tree: every read of rank rows is a batch's (or a check's
    VERIFY_ROWS), never the split's; afterwards the trainer it keeps holds the records alone, and no store is
    mapped or open in the process."""
    from PIL import Image

    from roarfast.data import load_dataset
    from roarfast.recipe import effective_recipe
    from roarfast.rundir.directory import RunDir
    from roarfast.stages.basemodel import TrainOptions, run_train
    from roarfast.stages.cells import Cell, CellOptions, CellTrainer, cell_model
    from roarfast.stages.extract import ExtractOptions, run_extract
    from roarfast.store.record import RankRecord, RowReader

    rng = np.random.default_rng(0)
    for split, count in (("train", 12), ("val", 3)):
        for label, name in enumerate(("red", "green", "blue")):
            (tmp_path / "tree" / split / name).mkdir(parents=True)
            for i in range(count):
                pixels = rng.integers(0, 120, (36, 40, 3), dtype=np.uint8)
                pixels[..., label] += 120
                Image.fromarray(pixels).save(tmp_path / "tree" / split / name / f"{i}.jpg")
    ds = load_dataset("imagefolder", tmp_path / "tree", resize=36, crop=32, device="cpu", stream=True)
    run_dir = tmp_path / "run"
    run_train(run_dir, TrainOptions(model="fastnet", epochs=1, batch_size=8), dataset_obj=ds, device="cpu",
              progress=False)
    run_extract(run_dir, ExtractOptions(methods="random", batch_size=8), dataset_obj=ds, device="cpu", progress=False)
    run = RunDir(run_dir)
    spec = cell_model(run, ds, "cpu")
    recipe = effective_recipe(spec, "cpu", ds, CellOptions(epochs=1, recipe={"batch_size": 4, "eval_batch_size": 5}))
    trainer = CellTrainer(run, ds, spec, recipe, "dataset-mean", "cpu")
    read, real = [], RowReader.__getitem__

    def counted(reader, index):
        rows = real(reader, index)
        read.append(1 if isinstance(index, (int, np.integer)) else len(rows))
        return rows

    monkeypatch.setattr(record_module, "VERIFY_ROWS", 6)
    monkeypatch.setattr(RowReader, "__getitem__", counted)
    monkeypatch.setattr(RowReader, "span", lambda reader, start, stop: counted(reader, range(start, stop)))
    trainer.train(Cell("random", "roar", 0.5, 0))
    assert read and max(read) <= 6 < len(ds.train)  # one image's row a sample (DALI's source), a check's 6 rows
    assert all(isinstance(r, RankRecord) for r in trainer._loaded["random"])  # kept: records, not their rows
    stores = [str(path) for path in run_dir.rglob("ranks.npy")]
    assert stores and not any(store in Path("/proc/self/maps").read_text() for store in stores)
    fds = Path("/proc/self/fd")
    assert not {os.path.realpath(fd) for fd in fds.iterdir() if fd.exists()} & set(stores)
