"""Memory bounded by the work, not the dataset: a rank store's rows are read as a batch asks for them (those rows
and no more, nothing left mapped), and a streamed split's mask-only control reads one batch's rows at a time
instead of its whole store, yielding what the same loader yields with the ranks in memory."""

import os
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from roarfast.data.base import FileSet, ImageSet
from roarfast.data.loader import pattern_loader
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
