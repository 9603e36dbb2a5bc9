"""Rank store: round trips, resume after a kill, identity checks on write and read, locking."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from roarfast.errors import UserError
from roarfast.store import RankStore

REPO = Path(__file__).resolve().parents[1]


def writer_args(**overrides):
    args = dict(
        shape=(10, 4, 5),
        dtype="uint16",
        chunk_size=4,
        params={"noise_level": 0.15, "n": 15},
        checkpoint_sha256="c" * 64,
        dataset_fingerprint="d" * 64,
    )
    args.update(overrides)
    return args


def random_ranks(shape, dtype, seed=0):
    """Per-image random permutations of the units, as ops.rank would produce."""
    rng = np.random.default_rng(seed)
    units = int(np.prod(shape[1:]))
    return np.stack([rng.permutation(units) for _ in range(shape[0])]).reshape(shape).astype(dtype)


def write_chunks(writer, ranks, chunks, maps=None):
    for i in chunks:
        start, stop = writer.chunk_rows(i)
        writer.write_chunk(i, ranks[start:stop], None if maps is None else maps[start:stop])


def test_round_trip_torch_chunks_out_of_order_with_maps(tmp_path):
    store = RankStore(tmp_path)
    ranks = torch.from_numpy(random_ranks((10, 4, 5), np.uint16))
    maps = torch.randn(10, 4, 5, dtype=torch.float32)
    writer = store.open_writer("sg-sq", "train", keep_maps=True, **writer_args())
    assert writer.pending_chunks() == [0, 1, 2]
    assert writer.chunk_rows(2) == (8, 10)
    write_chunks(writer, ranks, [2, 0], maps)
    assert writer.pending_chunks() == [1] and not writer.complete
    write_chunks(writer, ranks, [1], maps)
    assert writer.complete and writer.pending_chunks() == []
    writer.close()

    record = store.read("sg-sq", "train", dataset_fingerprint="d" * 64, checkpoint_sha256="c" * 64)
    assert isinstance(record.ranks, np.memmap)
    np.testing.assert_array_equal(record.ranks, ranks.numpy())
    with pytest.raises(ValueError):
        record.ranks[0, 0, 0] = 1
    np.testing.assert_array_equal(record.maps, maps.numpy().astype(np.float16))
    rows = record.rows(torch.tensor([7, 1]))
    assert rows.dtype == torch.uint16 and torch.equal(rows, ranks[[7, 1]])
    assert torch.equal(record.tensor(), ranks)
    assert torch.equal(record.rows(slice(4, 8)), ranks[4:8])
    assert record.manifest["params"] == {"noise_level": 0.15, "n": 15}
    # A plain .npy file: numpy reads it without the store.
    np.testing.assert_array_equal(np.load(tmp_path / "sg-sq/train/ranks.npy"), ranks.numpy())


def test_round_trip_int32_value_units(tmp_path):
    store = RankStore(tmp_path)
    ranks = random_ranks((5, 3, 4, 4), np.int32, seed=1)
    writer = store.open_writer("grad", "test", **writer_args(shape=ranks.shape, dtype=torch.int32, chunk_size=2))
    write_chunks(writer, ranks, writer.pending_chunks())
    writer.close()
    record = store.read("grad", "test")
    assert record.ranks.dtype == np.int32 and record.maps is None
    np.testing.assert_array_equal(record.ranks, ranks)
    assert record.rows(3).dtype == torch.int32


KILLED_WRITER = textwrap.dedent(
    """
    import os, sys, time
    import numpy as np
    import roarfast.store as store
    import roarfast.records.ranks as manifests

    run_dir, marker, stall_at = sys.argv[1], sys.argv[2], sys.argv[3]
    ranks = np.load(run_dir + "/source.npy")

    def stall_on_call(function, call):
        calls = []

        def stalled(*args):
            calls.append(args)
            if len(calls) == call:
                open(marker, "w").close()
                time.sleep(600)
            return function(*args)

        return stalled

    if stall_at == "manifest":
        # Manifest writes: 1 at creation, then one per chunk; the 4th would mark chunk 2 done.
        manifests.write_record = stall_on_call(manifests.write_record, 4)
    else:
        # One data sync per chunk: the 3rd is chunk 2's, after its bytes were handed to the kernel.
        os.fdatasync = stall_on_call(os.fdatasync, 3)
    writer = store.RankStore(run_dir).open_writer(
        "sg", "train", shape=ranks.shape, dtype="uint16", chunk_size=3, params={"n": 15},
        checkpoint_sha256="c" * 64, dataset_fingerprint="d" * 64)
    for i in writer.pending_chunks():
        start, stop = writer.chunk_rows(i)
        writer.write_chunk(i, ranks[start:stop])
    """
)


@pytest.mark.parametrize("stall_at", ["data", "manifest"])
def test_resume_after_sigkill_mid_chunk(tmp_path, stall_at):
    ranks = random_ranks((11, 6, 6), np.uint16, seed=2)
    np.save(tmp_path / "source.npy", ranks)
    marker = tmp_path / "stalled"
    command = [sys.executable, "-c", KILLED_WRITER, str(tmp_path), str(marker), stall_at]
    child = subprocess.Popen(command, cwd=REPO)
    try:
        for _ in range(600):
            if marker.exists() or child.poll() is not None:
                break
            time.sleep(0.1)
        assert marker.exists(), f"writer exited early with {child.poll()}"
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    assert child.returncode == -signal.SIGKILL

    # The kill came while chunk 2 was being written: chunks 0 and 1 are done and intact, 2 is pending.
    writer = RankStore(tmp_path).open_writer(
        "sg", "train", **writer_args(shape=ranks.shape, chunk_size=3, params={"n": 15})
    )
    assert writer.pending_chunks() == [2, 3]
    on_disk = np.load(tmp_path / "sg/train/ranks.npy", mmap_mode="r")
    np.testing.assert_array_equal(on_disk[:6], ranks[:6])
    with pytest.raises(UserError, match="incomplete .*2/4 chunks"):
        RankStore(tmp_path).read("sg", "train")
    write_chunks(writer, ranks, writer.pending_chunks())
    writer.close()
    np.testing.assert_array_equal(RankStore(tmp_path).read("sg", "train").ranks, ranks)


def test_resume_after_abandoned_writer_keeps_its_chunk_size(tmp_path):
    store = RankStore(tmp_path)
    ranks = random_ranks((10, 4, 5), np.uint16, seed=3)
    writer = store.open_writer("var", "train", **writer_args())
    write_chunks(writer, ranks, [0, 2])
    del writer  # dropped without close(), as a crashed loop would leave it

    resumed = store.open_writer("var", "train", **writer_args(chunk_size=7))
    assert resumed.chunk_size == 4 and resumed.pending_chunks() == [1]
    write_chunks(resumed, ranks, resumed.pending_chunks())
    assert resumed.complete
    resumed.close()
    np.testing.assert_array_equal(store.read("var", "train").ranks, ranks)


def test_reopening_a_complete_store_has_nothing_pending(tmp_path):
    store = RankStore(tmp_path)
    ranks = random_ranks((10, 4, 5), np.uint16)
    with store.open_writer("sg", "test", **writer_args()) as writer:
        write_chunks(writer, ranks, writer.pending_chunks())
    with store.open_writer("sg", "test", **writer_args()) as writer:
        assert writer.complete and writer.pending_chunks() == []


@pytest.mark.parametrize(
    "change, stored, requested",
    [
        ({"dataset_fingerprint": "e" * 64}, "d" * 64, "e" * 64),
        ({"checkpoint_sha256": "f" * 64}, "c" * 64, "f" * 64),
        ({"params": {"noise_level": 0.2, "n": 15}}, "'noise_level': 0.15", "'noise_level': 0.2"),
        ({"shape": (12, 4, 5)}, "[10, 4, 5]", "[12, 4, 5]"),
        ({"dtype": "int32"}, "uint16", "int32"),
    ],
)
def test_writer_refuses_other_ranks_unless_forced(tmp_path, change, stored, requested):
    store = RankStore(tmp_path)
    with store.open_writer("sg", "train", **writer_args()) as writer:
        write_chunks(writer, random_ranks((10, 4, 5), np.uint16), [0])
    with pytest.raises(UserError) as error:
        store.open_writer("sg", "train", **writer_args(**change))
    before, after = str(error.value).split(", requested ", 1)
    assert stored in before.split("stored ", 1)[1] and requested in after and "--force" in after

    with store.open_writer("sg", "train", force=True, **writer_args(**change)) as writer:
        assert writer.pending_chunks() == list(range(writer.num_chunks))
        assert writer.manifest["chunks_done"] == []


def test_param_order_and_tuples_do_not_change_identity(tmp_path):
    store = RankStore(tmp_path)
    with store.open_writer("ig", "train", **writer_args(params={"steps": 25, "baseline": (0, 0, 0)})) as writer:
        write_chunks(writer, random_ranks((10, 4, 5), np.uint16), [1])
    with store.open_writer("ig", "train", **writer_args(params={"baseline": [0, 0, 0], "steps": 25})) as writer:
        assert writer.pending_chunks() == [0, 2]


def test_read_refuses_other_dataset_or_model_with_both_fingerprints(tmp_path):
    store = RankStore(tmp_path)
    with store.open_writer("sg", "train", **writer_args()) as writer:
        write_chunks(writer, random_ranks((10, 4, 5), np.uint16), writer.pending_chunks())
    with pytest.raises(UserError, match=f"stored fingerprint {'d' * 64}, current dataset {'x' * 64}"):
        store.read("sg", "train", dataset_fingerprint="x" * 64)
    with pytest.raises(UserError, match=f"stored checkpoint sha256 {'c' * 64}, current checkpoint {'y' * 64}"):
        store.read("sg", "train", checkpoint_sha256="y" * 64)
    with pytest.raises(UserError, match="no ranks for method 'sg', split 'test'"):
        store.read("sg", "test")


def test_model_independent_ranks_match_any_checkpoint(tmp_path):
    store = RankStore(tmp_path)
    with store.open_writer("random", "train", **writer_args(checkpoint_sha256=None, params={"seed": 0})) as w:
        write_chunks(w, random_ranks((10, 4, 5), np.uint16), w.pending_chunks())
    record = store.read("random", "train", dataset_fingerprint="d" * 64, checkpoint_sha256="z" * 64)
    assert record.manifest["checkpoint_sha256"] is None


def test_second_writer_is_refused_while_the_first_is_open(tmp_path):
    store = RankStore(tmp_path)
    writer = store.open_writer("sg", "train", **writer_args())
    with pytest.raises(UserError, match="another writer"):
        store.open_writer("sg", "train", **writer_args())
    writer.close()
    store.open_writer("sg", "train", **writer_args()).close()


def test_write_chunk_checks_shape_dtype_index_and_maps(tmp_path):
    store = RankStore(tmp_path)
    ranks = random_ranks((10, 4, 5), np.uint16)
    with store.open_writer("sg", "train", **writer_args()) as writer:
        with pytest.raises(UserError, match=r"must be uint16 \[4, 4, 5\], got int32 \[4, 4, 5\]"):
            writer.write_chunk(0, ranks[:4].astype(np.int32))
        with pytest.raises(UserError, match=r"must be uint16 \[2, 4, 5\], got uint16 \[4, 4, 5\]"):
            writer.write_chunk(2, ranks[:4])
        with pytest.raises(UserError, match=r"chunk must be an int in \[0, 3\), got 3"):
            writer.write_chunk(3, ranks[:2])
        with pytest.raises(UserError, match="keep_maps=False"):
            writer.write_chunk(0, ranks[:4], maps=np.zeros((4, 4, 5), np.float32))
        assert writer.pending_chunks() == [0, 1, 2]
    with store.open_writer("sg", "test", keep_maps=True, **writer_args()) as writer:
        with pytest.raises(UserError, match="needs maps"):
            writer.write_chunk(0, ranks[:4])
        writer.write_chunk(0, ranks[:4], maps=torch.ones(4, 4, 5, dtype=torch.bfloat16))


@pytest.mark.parametrize(
    "bad, match",
    [
        ({"dtype": "int64"}, r"dtype must be one of \('uint16', 'int32'\)"),
        ({"shape": (10, 5)}, r"shape must be \[N,H,W\] or \[N,C,H,W\]"),
        ({"chunk_size": 0}, "chunk_size must be a positive int, got 0"),
        ({"dataset_fingerprint": ""}, "dataset_fingerprint must be a non-empty str"),
    ],
)
def test_open_writer_rejects_bad_arguments(tmp_path, bad, match):
    with pytest.raises(UserError, match=match):
        RankStore(tmp_path).open_writer("sg", "train", **writer_args(**bad))


def test_bad_method_names_are_refused(tmp_path):
    for name in ("", "../escape", ".hidden"):
        with pytest.raises(UserError, match="method must be a non-empty name"):
            RankStore(tmp_path).path(name, "train")


def test_methods_and_status_list_complete_stores(tmp_path):
    store = RankStore(tmp_path)
    ranks = random_ranks((10, 4, 5), np.uint16)
    for method, split, chunks in [
        ("sg", "train", [0, 1, 2]),
        ("sg", "test", [0, 1, 2]),
        ("random", "test", [0, 1, 2]),
        ("ig", "train", [0, 1, 2]),
        ("ig", "test", [1]),
    ]:
        with store.open_writer(method, split, **writer_args()) as writer:
            write_chunks(writer, ranks, chunks)
    assert store.methods() == ["sg"]
    assert store.methods("test") == ["random", "sg"]
    assert store.methods("train") == ["ig", "sg"]
    status = {(s["method"], s["split"]): s for s in store.status()}
    assert len(status) == 5
    assert status[("ig", "test")]["chunks_done"] == 1 and status[("ig", "test")]["num_chunks"] == 3
    assert not status[("ig", "test")]["complete"] and status[("sg", "train")]["complete"]
    assert RankStore(tmp_path / "empty").methods() == [] and RankStore(tmp_path / "empty").status() == []


def test_a_long_method_name_is_stored_under_a_bounded_directory_and_listed_in_full(tmp_path):
    store = RankStore(tmp_path)
    long = "a_package.a_module_with_a_long_name:" + "estimator_" * 40  # 435 characters: no file name is so long
    ranks = random_ranks((10, 4, 5), np.uint16)
    for split in ("train", "test"):
        with store.open_writer(long, split, **writer_args()) as writer:
            write_chunks(writer, ranks, [0, 1, 2])
    (directory,) = [p.name for p in tmp_path.iterdir()]
    assert len(directory.encode()) <= 100 and directory.startswith("a_package.a_module_with_a_long_name:estimator_")
    assert store.manifest(long, "test")["method"] == long
    assert store.methods() == [long] and store.methods("test") == [long]
    assert {s["method"] for s in store.status()} == {long}
    assert np.array_equal(store.read(long, "train").ranks, ranks)
    # another long name with the same first characters gets its own directory
    other = long + "x"
    with store.open_writer(other, "test", **writer_args()) as writer:
        write_chunks(writer, ranks, [0, 1, 2])
    assert len(list(tmp_path.iterdir())) == 2 and store.methods("test") == sorted([long, other])


def test_manifest_replacement_leaves_no_temp_files(tmp_path):
    store = RankStore(tmp_path)
    with store.open_writer("sg", "train", **writer_args()) as writer:
        write_chunks(writer, random_ranks((10, 4, 5), np.uint16), [0, 1])
    directory = tmp_path / "sg/train"
    assert sorted(p.name for p in directory.iterdir()) == [".lock", "manifest.json", "ranks.npy"]
    manifest = json.loads((directory / "manifest.json").read_text())
    assert manifest["chunks_done"] == [[0, 2]] and manifest["complete"] is False


def test_truncated_ranks_file_is_refused_on_resume(tmp_path):
    store = RankStore(tmp_path)
    with store.open_writer("sg", "train", **writer_args()) as writer:
        write_chunks(writer, random_ranks((10, 4, 5), np.uint16), [0])
    path = tmp_path / "sg/train/ranks.npy"
    os.truncate(path, path.stat().st_size - 2)
    with pytest.raises(UserError, match="start this store over with --force"):
        store.open_writer("sg", "train", **writer_args())


def damage(record_dir: Path, row: int, rows: int = 1, seed: int = 0) -> None:
    """Random bytes over `rows` rows from `row` of ranks.npy, in place (dd conv=notrunc)."""
    path = record_dir / "ranks.npy"
    array = np.load(path, mmap_mode="r")
    row_bytes = array[0].nbytes
    offset = array.offset + row * row_bytes
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(np.random.default_rng(seed).integers(0, 256, rows * row_bytes, dtype=np.uint8).tobytes())


def test_every_chunk_is_verified_as_it_is_read_and_a_damaged_one_is_named(tmp_path):
    store = RankStore(tmp_path, run_dir="runs/x")
    ranks = random_ranks((10, 4, 5), np.uint16)
    writer = store.open_writer("grad", "train", **writer_args())
    write_chunks(writer, ranks, [0, 1, 2])
    writer.close()
    assert all(isinstance(c, str) for c in store.manifest("grad", "train")["checksums"])
    damage(store.path("grad", "train"), row=5)  # chunk 1 holds rows 4-7
    record = store.read("grad", "train")
    assert torch.equal(record.rows([0, 9]), torch.from_numpy(ranks[[0, 9]]))  # chunks 0 and 2 are intact
    for read in (lambda: record.rows([1, 6]), record.tensor, lambda: record.verify(np.array([4]))):
        with pytest.raises(UserError, match=r"grad/train/ranks.npy: chunk 1 \(rows 4-7\) does not match the checksum "
                                            r"recorded when it was written .*`roarfast extract --force --method grad "
                                            r"--run-dir runs/x` repairs it"):
            read()


def test_ranks_outside_the_image_are_refused_even_without_a_checksum(tmp_path, caplog):
    """A store written before checksums: its chunks' range is checked, and a note says once that nothing
    more is; a rank >= H*W (the damage a checksum would have caught) is refused naming the row."""
    store = RankStore(tmp_path)
    ranks = random_ranks((10, 4, 5), np.uint16)
    writer = store.open_writer("grad", "train", **writer_args())
    write_chunks(writer, ranks, [0, 1, 2])
    writer.close()
    manifest_path = store.path("grad", "train") / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    del manifest["checksums"], manifest["checksum"], manifest["record_sha256"]
    manifest_path.write_text(json.dumps({**manifest, "format": 1}))  # as written before checksums and digests
    with caplog.at_level("WARNING"):
        assert torch.equal(store.read("grad", "train").tensor(), torch.from_numpy(ranks))
        store.read("grad", "train").tensor()
    notes = [r.getMessage() for r in caplog.records if "before rank checksums" in r.getMessage()]
    assert len(notes) == 1 and "only its ranks' range is checked" in notes[0]
    array = np.load(store.path("grad", "train") / "ranks.npy", mmap_mode="r+")
    array[9, 3, 4] = 20  # one past the last of 4 x 5 pixels
    array.flush()
    with pytest.raises(UserError, match=r"row 9 \(chunk 2\) holds ranks outside \[0, 20\) \(max 20\): the file is "
                                        r"damaged; `roarfast extract --force --method grad` repairs it"):
        store.read("grad", "train").rows([9])
    assert torch.equal(store.read("grad", "train").rows([0, 5]), torch.from_numpy(ranks[[0, 5]]))


def test_a_full_disk_while_writing_a_chunk_is_one_line_and_keeps_the_chunks_before(tmp_path, monkeypatch):
    import errno

    from roarfast.store import writer as writer_module

    store = RankStore(tmp_path)
    ranks = random_ranks((10, 4, 5), np.uint16)
    writer = store.open_writer("grad", "train", **writer_args())
    write_chunks(writer, ranks, [0])

    def full(fd, data, position):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(writer_module.os, "pwrite", full)
    with pytest.raises(UserError, match=r"cannot write .*grad/train/ranks.npy: No space left on device; the chunks "
                                        r"written before are intact; rerun to resume; free space there and rerun"):
        write_chunks(writer, ranks, [1])
    monkeypatch.undo()
    writer.close()
    writer = store.open_writer("grad", "train", **writer_args())
    assert writer.pending_chunks() == [1, 2]  # chunk 0 survived; the rerun resumes after it
    write_chunks(writer, ranks, [1, 2])
    writer.close()
    assert torch.equal(store.read("grad", "train").tensor(), torch.from_numpy(ranks))
