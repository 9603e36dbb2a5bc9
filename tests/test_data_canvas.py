"""The canvas of an image tree and its limits (issue 30, item 7, on the data side): a canvas over the largest side
refused in one line naming the option before anything is allocated, by the load and the dry run's outline alike;
the canvas taken from the images kept (an undecodable 20000 px PNG skipped with skip_bad leaves a 32 px tree at
32 px); every bad data option value one line."""

import struct
import zlib

import numpy as np
import pytest
from PIL import Image

from roarfast.data import load_dataset, outline_dataset
from roarfast.data import imagefolder, in_memory
from roarfast.data.canvas import MAX_SIDE
from roarfast.errors import UserError
from tests.test_cli_errors import fails_with_one_line


@pytest.fixture
def tree(tmp_path, monkeypatch):
    """A 32 px tree: train/{a,b}/ 4 JPEGs each, val/{a,b}/ 2 each; nothing may be decoded unless a test allows it."""
    monkeypatch.setenv("ROARFAST_CACHE_DIR", str(tmp_path / "cache"))
    rng = np.random.default_rng(0)
    for split, count in (("train", 4), ("val", 2)):
        for cls in ("a", "b"):
            (tmp_path / split / cls).mkdir(parents=True)
            for i in range(count):
                Image.fromarray(rng.integers(0, 256, (32, 32, 3), dtype=np.uint8)).save(tmp_path / split / cls /
                                                                                         f"{i}.jpg")
    return tmp_path


def _no_decode(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("decoded")

    monkeypatch.setattr(imagefolder, "decode_split", refuse)
    monkeypatch.setattr(imagefolder, "measure_split", refuse)


def _png_header_only(path, side: int):
    """A PNG whose header says side x side and whose data holds almost nothing: undecodable."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", side, side, 8, 2, 0, 0, 0)
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"\0" * 100))
                     + chunk(b"IEND", b""))


@pytest.mark.parametrize("options, says", [
    ({"resize": 100000}, "--data-option resize=100000 is over 4096 px, the largest canvas roarfast makes (every image "
                         "is resized to it before the crop, 48 MiB an image at 4096 px, times a decode batch); ask "
                         "for at most 4096"),
    ({"crop": 100000}, "--data-option crop=100000 is over 4096 px, the largest canvas roarfast makes (one image of it "
                       "is 192 MiB as the model's float32 input, a network's activations far more); ask for at most "
                       "4096"),
    ({"resize": 5000, "crop": 32}, "--data-option resize=5000 is over 4096 px"),
])
def test_a_canvas_too_large_is_refused_naming_the_option_before_anything_is_allocated(tree, monkeypatch, options,
                                                                                       says):
    _no_decode(monkeypatch)
    for load in (load_dataset, outline_dataset):
        with pytest.raises(UserError) as err:
            load("imagefolder", tree, device="cpu", stream=False, **options)
        assert str(err.value).startswith(says)


def test_the_largest_canvas_is_allowed(tree):
    assert outline_dataset("imagefolder", tree, resize=MAX_SIDE, crop=MAX_SIDE)["shape"] == (3, MAX_SIDE, MAX_SIDE)


def test_images_over_the_largest_side_are_refused_naming_their_size(tmp_path, monkeypatch):
    monkeypatch.setenv("ROARFAST_CACHE_DIR", str(tmp_path / "cache"))
    for split in ("train", "val"):
        for cls in ("a", "b"):
            (tmp_path / split / cls).mkdir(parents=True)
            Image.new("RGB", (MAX_SIDE + 4, MAX_SIDE + 4), (10, 20, 30)).save(tmp_path / split / cls / "0.png")
    _no_decode(monkeypatch)
    with pytest.raises(UserError, match=r"imagefolder: the images are 4100 px, over 4096 px, .*; ask for a smaller one "
                                        r"with --data-option resize=N crop=N"):
        load_dataset("imagefolder", tmp_path, device="cpu")
    assert outline_dataset("imagefolder", tmp_path, resize=256, crop=224)["shape"] == (3, 224, 224)


def test_canvases_that_would_not_fit_in_memory_are_refused_with_stream_false(tree, monkeypatch):
    _no_decode(monkeypatch)
    monkeypatch.setattr(in_memory, "available_memory", lambda: 12 * 3 * 32 * 32 - 1)
    with pytest.raises(UserError, match=r"--data-option stream=false holds the canvases in memory: 12 images of "
                                        r"3x32x32 take 0.0 GiB, more than the 0.0 GiB available; stream=auto \(or "
                                        r"true\) decodes them batch by batch"):
        load_dataset("imagefolder", tree, device="cpu", stream=False)


def test_an_undecodable_huge_png_skipped_leaves_the_canvas_of_the_images_kept(tree):
    _png_header_only(tree / "train" / "a" / "huge.png", 20000)
    outlined = outline_dataset("imagefolder", tree, skip_bad=True)
    assert outlined["shape"] == (3, 32, 32) and outlined["train"] == 9  # counted: the outline decodes nothing
    ds = load_dataset("imagefolder", tree, device="cpu", skip_bad=True)
    assert ds.train.shape == (3, 32, 32) and len(ds.train) == 8
    with pytest.raises(UserError, match=r"cannot decode 1 image\(s\) in .*train: a/huge.png"):
        load_dataset("imagefolder", tree, device="cpu")


def test_a_tree_of_two_sizes_that_decode_gets_the_imagenet_canvas(tree):
    Image.fromarray(np.zeros((40, 40, 3), dtype=np.uint8)).save(tree / "train" / "b" / "wide.png")
    assert outline_dataset("imagefolder", tree)["shape"] == (3, 224, 224)


@pytest.mark.parametrize("option, says", [
    ("resize=100000", "--data-option resize=100000 is over 4096 px"),
    ("crop=0", "--data-option crop should be a positive int, got 0"),
    ("resize=abc", "--data-option resize should be a positive int, got 'abc'"),
    ("test_split=train", "--data-option test_split=train: the held-out split is a folder of"),
    ("test_split=../elsewhere", "--data-option test_split=../elsewhere: the held-out split is a folder of"),
    ("test_split=5", "--data-option test_split=5: the held-out split is a folder of"),
    ("stream=sometimes", "imagefolder: stream should be auto, true or false, got 'sometimes'"),
    ("skip_bad=maybe", "--data-option skip_bad should be true or false, got 'maybe'"),
    ("device=tpu", "imagefolder device should be one of auto, cpu, gpu, got 'tpu'"),
    ("batch_size=-1", "--data-option batch_size should be a positive int, got -1"),
])
def test_every_bad_data_option_is_one_line(tree, tmp_path, option, says):
    line = fails_with_one_line(["extract", "--run-dir", str(tmp_path / "run"), "--method", "random", "--dataset",
                                "imagefolder", "--data-dir", str(tree), "--data-option", option, "--device", "cpu",
                                "--no-progress"])
    assert line.startswith(f"Error: {says}")
