"""An image tree decoded once (issue 32, item 1): a later load maps the cached canvases and decodes nothing, bit
for bit what the decode gave (DALI and the CPU decoder); a changed, added or removed file (one rewritten with its
size and modification time put back included) makes the split decode again; a damaged entry is noted and rebuilt,
never used; no room on the cache's disk, or a link at an entry's place, skips the cache in one line."""

import json
import logging
import os

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from PIL import Image

from roarfast.data import canvas_cache, load_dataset
from roarfast.data import imagefolder
from tests.test_data_imagefolder import block_dali, decoder  # noqa: F401 (a fixture)
from tests.test_data_streamed import split_calls


def _tree(root, per_class=(7, 3), ext="jpg", size=16):
    """root/{train,val}/{a,b,c}/<i>.<ext>: noise images of one size, `per_class` (train, val) of each class."""
    rng = np.random.default_rng(0)
    for split, count in zip(("train", "val"), per_class):
        for cls in ("a", "b", "c"):
            (root / split / cls).mkdir(parents=True, exist_ok=True)
            for i in range(count):
                Image.fromarray(rng.integers(0, 256, (size, size, 3), dtype=np.uint8)).save(
                    root / split / cls / f"{i}.{ext}")
    return root


def _disk(monkeypatch, total, free):
    """The cache's disk, as room_for sees it, of `total` bytes with `free` of them free (for canvas_cache only:
    the rest of roarfast, the run directory's write checks included, still sees the real disk)."""
    usage = SimpleNamespace(total=total, used=total - free, free=free)
    monkeypatch.setattr(canvas_cache, "shutil", SimpleNamespace(disk_usage=lambda path: usage))


@pytest.fixture
def decoded(tmp_path, monkeypatch):
    """The cache in tmp_path/cache, on a disk with room for it whatever the test machine's disk holds (CI's had
    16 GiB free, under a tenth of it); returns the list of split folders decoded into memory, one per decode."""
    monkeypatch.setenv("ROARFAST_CACHE_DIR", str(tmp_path / "cache"))
    _disk(monkeypatch, 1 << 40, 1 << 39)
    return split_calls(monkeypatch, "decode_split")


def _load(root, **options):
    return load_dataset("imagefolder", root, device="cpu", stream=False, **options)


def _entries(tmp_path, suffix=canvas_cache.ARRAY_SUFFIX):
    return sorted((tmp_path / "cache" / canvas_cache.KIND).glob(f"*{suffix}"))


def _same(one, other):
    for split in ("train", "test"):
        a, b = one.split(split), other.split(split)
        assert torch.equal(a.images, b.images) and torch.equal(a.labels, b.labels), split
    assert (one.fingerprint, one.mean, one.std) == (other.fingerprint, other.mean, other.std)


@pytest.mark.parametrize("ext", ["jpg", "png"])
def test_a_second_load_decodes_nothing_and_maps_the_canvases_of_the_first(tmp_path, decoded, decoder, ext):
    root = _tree(tmp_path / "tree", ext=ext)
    first = _load(root)
    assert decoded == ["train", "val"] and len(_entries(tmp_path)) == 2
    again = _load(root)
    assert decoded == ["train", "val"]  # nothing decoded
    _same(again, first)
    if Path("/proc/self/maps").exists():  # mapped from the cache's file, not read into a copy
        mapped = Path("/proc/self/maps").read_text()
        assert all(str(array) in mapped for array in _entries(tmp_path))
    again.train.images[0] = 0  # copy-on-write: the file keeps its canvases
    _same(_load(root), first)


def test_the_cached_canvases_are_the_decoders_own(tmp_path, decoded, monkeypatch):
    """DALI's canvases and the CPU decoder's differ: each has its own entry, and a load with either maps its own."""
    from roarfast.data.decode import dali_installed

    if not dali_installed():
        pytest.skip("nvidia-dali is not installed")
    root = _tree(tmp_path / "tree", size=20)
    with_dali = _load(root, resize=18, crop=16)
    block_dali(monkeypatch)
    on_cpu = _load(root, resize=18, crop=16)
    assert decoded == ["train", "val"] * 2 and len(_entries(tmp_path)) == 4
    assert with_dali.fingerprint != on_cpu.fingerprint
    _same(_load(root, resize=18, crop=16), on_cpu)
    assert len(decoded) == 4


def test_a_subset_and_another_canvas_are_entries_of_their_own(tmp_path, decoded):
    root = _tree(tmp_path / "tree")
    whole, subset, larger = _load(root), _load(root, num_train=6, num_test=3), _load(root, resize=20, crop=18)
    assert len(decoded) == 6 and len(_entries(tmp_path)) == 6
    _same(_load(root), whole)
    _same(_load(root, num_train=6, num_test=3), subset)
    _same(_load(root, resize=20, crop=18), larger)
    assert len(decoded) == 6


def _rewrite(path, seed):
    """A new picture in `path`, same format and size."""
    with Image.open(path) as image:
        size = image.size
    Image.fromarray(np.random.default_rng(seed).integers(0, 256, (size[1], size[0], 3), dtype=np.uint8)).save(path)


@pytest.mark.parametrize("change", ["changed", "added", "removed"])
def test_a_changed_added_or_removed_file_decodes_its_split_again(tmp_path, decoded, change):
    root = _tree(tmp_path / "tree")
    first = _load(root)
    target = root / "train" / "b" / "1.jpg"
    if change == "changed":
        _rewrite(target, 1)
    elif change == "added":
        _rewrite(root / "train" / "b" / "0.jpg", 2)  # a copy of a file, rewritten
        target = root / "train" / "b" / "9.jpg"
        Image.fromarray(np.zeros((16, 16, 3), dtype=np.uint8)).save(target)
    else:
        target.unlink()
    again = _load(root)
    assert decoded == ["train", "val", "train"]  # the split whose files changed, and only it
    assert torch.equal(again.test.images, first.test.images) and again.fingerprint != first.fingerprint
    assert len(again.train) == len(first.train) + {"changed": 0, "added": 1, "removed": -1}[change]
    _, files, _ = imagefolder.list_tree(root / "train")
    assert torch.equal(again.train.images, imagefolder.decode_split(root / "train", files, 16, 16)[0])
    _same(_load(root), again)


def test_a_file_rewritten_with_its_size_and_time_put_back_is_seen(tmp_path, decoded):
    """A BMP's size depends on its dimensions alone; cp -p, rsync -t or tar put the modification time back, but
    not the change time, which the key holds."""
    root = _tree(tmp_path / "tree", ext="bmp")
    first = _load(root)
    target = root / "train" / "a" / "2.bmp"
    before = target.stat()
    _rewrite(target, 3)
    os.utime(target, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert (target.stat().st_size, target.stat().st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    again = _load(root)
    assert decoded == ["train", "val", "train"] and again.fingerprint != first.fingerprint
    assert not torch.equal(again.train.images[2], first.train.images[2])


def _flip_array(path):
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))


def _truncate(path):
    path.write_bytes(path.read_bytes()[:-48])


def _flip_record(path):
    path.write_text(path.read_text().replace('"digest": "', '"digest": "0', 1))


@pytest.mark.parametrize("damage, suffix, says", [
    (_flip_array, ".u8", "does not match the xxh3 digest recorded when it was written"),
    (_truncate, ".u8", "bytes where its record says"),
    (_flip_record, ".json", "does not match the sha256 recorded in it when it was written"),
    (lambda path: path.unlink(), ".u8", "cannot be mapped"),
])
def test_a_damaged_entry_is_noted_and_decoded_again(tmp_path, decoded, caplog, damage, suffix, says):
    root = _tree(tmp_path / "tree")
    first = _load(root)
    records = {path: json.loads(path.read_text()) for path in _entries(tmp_path, ".json")}
    damage(next(path for path, record in records.items() if record["shape"][0] == len(first.train)).with_suffix(suffix))
    with caplog.at_level(logging.WARNING):
        again = _load(root)
    notes = [r.getMessage() for r in caplog.records if says in r.getMessage()]
    assert len(notes) == 1 and "note:" in notes[0]
    assert decoded == ["train", "val", "train"]  # never used: decoded again, and stored again
    _same(again, first)
    _same(_load(root), first)
    assert len(decoded) == 3


@pytest.mark.parametrize("total, free, fits", [
    (50 << 30, (5 << 30) + (1 << 20), True),  # a small disk: a tenth of it (5 GiB) stays free
    (50 << 30, (5 << 30) - (1 << 20), False),
    (2 << 40, 16 << 30, True),  # a large one nearly full (16 GiB free, as on CI): 8 GiB stays free, not 200
    (2 << 40, 8 << 30, False),
])
def test_the_cache_leaves_a_tenth_of_its_disk_free_at_most_8_gib(tmp_path, monkeypatch, total, free, fits):
    monkeypatch.setenv("ROARFAST_CACHE_DIR", str(tmp_path / "cache"))
    _disk(monkeypatch, total, free)
    assert canvas_cache.room_for(1 << 20, "a tree") is fits


def test_no_room_on_the_disk_skips_the_cache_in_one_line(tmp_path, decoded, monkeypatch, caplog):
    root = _tree(tmp_path / "tree")
    _disk(monkeypatch, 50 << 30, 1000)
    with caplog.at_level(logging.WARNING):
        first = _load(root)
    notes = [r.getMessage() for r in caplog.records if "not cached" in r.getMessage()]
    assert len(notes) == 1 and "leaves 5,120 MiB of its disk free" in notes[0] and "ROARFAST_CACHE_DIR" in notes[0]
    assert _entries(tmp_path) == []
    _same(_load(root), first)
    assert decoded == ["train", "val"] * 2  # decoded again each time


def test_a_link_at_an_entrys_place_is_not_written_through(tmp_path, decoded, caplog):
    root = _tree(tmp_path / "tree")
    first = _load(root)
    outside = tmp_path / "outside"
    outside.write_bytes(b"not roarfast's")
    for array in _entries(tmp_path):
        array.unlink()
        array.with_suffix(".json").unlink()
        array.symlink_to(outside)
    with caplog.at_level(logging.WARNING):
        again = _load(root)
    assert outside.read_bytes() == b"not roarfast's"
    notes = [r.getMessage() for r in caplog.records if "not cached" in r.getMessage()]
    assert len(notes) == 1 and "symbolic link" in notes[0]  # said once: the second split does not try
    _same(again, first)


def test_streamed_trees_keep_streaming_and_cache_no_canvases(tmp_path, decoded):
    root = _tree(tmp_path / "tree")
    streamed = load_dataset("imagefolder", root, device="cpu", stream=True)
    assert streamed.streamed and _entries(tmp_path) == [] and decoded == []


def test_a_dali_that_does_not_import_is_one_line_not_another_decoder(tmp_path, decoded, monkeypatch):
    """DALI is found without importing it (a cached load needs none of it); one found that does not import is
    said when a decode needs it, never swapped for the CPU decoder, whose canvases are another dataset."""
    import sys

    from roarfast.data import decode
    from roarfast.errors import UserError

    root = _tree(tmp_path / "tree")
    monkeypatch.setattr(decode, "dali_installed", lambda: True)
    monkeypatch.setitem(sys.modules, "nvidia.dali", None)
    with pytest.raises(UserError, match=r"NVIDIA DALI is installed but does not import \(.*\): reinstall it \(pip "
                                        r"install nvidia-dali-cuda130"):
        _load(root)
