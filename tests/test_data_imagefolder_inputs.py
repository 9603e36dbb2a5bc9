"""Image trees without traps, for DALI and the CPU decoder: images that share one size keep it as the canvas
(read from their headers, cached), a larger canvas only when asked, ImageNet's for trees of varied sizes; 16-bit
PNGs scaled to 8 bits as the 8-bit file of the same picture decodes (never white), an image of no fixed range
refused naming its file; a one-class tree refused in one line."""

import struct
import zlib

import numpy as np
import pytest
import torch
from click.testing import CliRunner
from PIL import Image

from roarfast.cli import main
from roarfast.data import headers
from roarfast.data.builtin.imagefolder import load_imagefolder
from roarfast.data.cache import Listing
from roarfast.data.canvas import examine
from roarfast.errors import UserError
from tests.test_data_imagefolder import block_dali, decoder  # noqa: F401 (a fixture)


def write_png16(path, values: np.ndarray) -> None:
    """A 16-bit PNG (grey for [H, W], RGB for [H, W, 3] uint16 values), written by hand: PIL writes no 16-bit
    colour PNG."""
    rows = np.asarray(values, dtype=">u2")
    colour = 0 if rows.ndim == 2 else 2
    raw = b"".join(b"\0" + row.tobytes() for row in rows)

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", rows.shape[1], rows.shape[0], 16, colour, 0, 0, 0)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw))
                     + chunk(b"IEND", b""))


def tree_of(root, pictures: dict, ext="png"):
    """root/{train,val}/<class>/<i>.<ext> of {class: [uint8 array per image]} (the same images in both splits)."""
    for split in ("train", "val"):
        for cls, images in pictures.items():
            (root / split / cls).mkdir(parents=True, exist_ok=True)
            for i, pixels in enumerate(images):
                Image.fromarray(pixels).save(root / split / cls / f"{i}.{ext}")
    return root


def noise(height, width, seed, channels=3):
    shape = (height, width, channels) if channels > 1 else (height, width)
    return np.random.default_rng(seed).integers(0, 256, shape, dtype=np.uint8)


def test_images_of_one_size_keep_it_as_the_canvas(tmp_path, decoder):
    pictures = {"a": [noise(32, 32, 0), noise(32, 32, 1)], "b": [noise(32, 32, 2)]}
    train, _ = load_imagefolder(tree_of(tmp_path, pictures), device="cpu")
    assert train.images.shape == (3, 3, 32, 32)
    expected = torch.from_numpy(np.stack([pictures["a"][0], pictures["a"][1], pictures["b"][0]])).permute(0, 3, 1, 2)
    assert torch.equal(train.images, expected)  # lossless PNGs at their own size: the pixels themselves


def test_one_shared_oblong_size_keeps_its_shorter_side_and_a_larger_canvas_is_made_when_asked(tmp_path, decoder):
    pictures = {"a": [noise(24, 40, 0)], "b": [noise(24, 40, 1)]}
    root = tree_of(tmp_path, pictures)
    train, _ = load_imagefolder(root, device="cpu")
    assert train.images.shape[2:] == (24, 24)
    assert torch.equal(train.images[0], torch.from_numpy(pictures["a"][0][:, 8:32]).permute(2, 0, 1))  # center crop
    larger, _ = load_imagefolder(root, device="cpu", crop=48)
    assert larger.images.shape[2:] == (48, 48)


def test_a_tree_of_varied_sizes_gets_the_imagenet_canvas(tmp_path, decoder):
    train, _ = load_imagefolder(tree_of(tmp_path, {"a": [noise(30, 40, 0)], "b": [noise(36, 36, 1)]}), device="cpu")
    assert train.images.shape[2:] == (224, 224)


def test_the_shared_size_is_read_from_the_headers_once(tmp_path, monkeypatch):
    monkeypatch.setenv("ROARFAST_CACHE_DIR", str(tmp_path / "cache"))
    root = tree_of(tmp_path / "tree", {"a": [noise(32, 32, 0), noise(32, 32, 1)], "b": [noise(32, 32, 2)]})
    files = ["a/0.png", "a/1.png", "b/0.png"]
    opened = []
    original = headers.read_header
    monkeypatch.setattr(headers, "read_header", lambda path: opened.append(path) or original(path))
    assert examine(Listing.of(root / "train", files)) == ((32, 32), {}) and len(opened) == 3
    assert examine(Listing.of(root / "train", files)) == ((32, 32), {}) and len(opened) == 3  # cached
    Image.fromarray(noise(20, 32, 3)).save(root / "train" / "b" / "0.png")  # a changed file is read again
    assert examine(Listing.of(root / "train", files)).size is None and len(opened) > 3


def test_sixteen_bit_pngs_decode_as_their_eight_bit_pictures(tmp_path, decoder):
    grey, colour = noise(16, 16, 0, channels=1), noise(16, 16, 1)
    # below half a level, so 8 bits keep the value (none above 255 * 257, the 16-bit white)
    offsets = np.where(colour < 255, np.random.default_rng(2).integers(0, 128, colour.shape), 0)
    write_png16(tmp_path / "train" / "grey" / "0.png", grey.astype(np.uint16) * 257)
    write_png16(tmp_path / "train" / "colour" / "0.png", colour.astype(np.uint16) * 257 + offsets)
    for cls in ("grey", "colour"):
        (tmp_path / "val" / cls).mkdir(parents=True)
        (tmp_path / "val" / cls / "0.png").write_bytes((tmp_path / "train" / cls / "0.png").read_bytes())
    train, _ = load_imagefolder(tmp_path, device="cpu")
    colour_canvas, grey_canvas = train.images  # classes in sorted order
    assert torch.equal(grey_canvas, torch.from_numpy(grey).expand(3, 16, 16))
    assert (colour_canvas.int() - torch.from_numpy(colour).permute(2, 0, 1).int()).abs().max() <= 1
    assert (train.images == 255).float().mean() < 0.05  # the 16-bit values clipped would be white


def test_an_image_of_no_fixed_range_is_refused_naming_it(tmp_path, monkeypatch):
    block_dali(monkeypatch)
    tree_of(tmp_path, {"a": [noise(8, 8, 0)], "b": [noise(8, 8, 1)]})
    Image.fromarray(np.full((8, 8), 70000, dtype=np.int32), mode="I").save(tmp_path / "train" / "b" / "wide.tif")
    with pytest.raises(UserError, match=r"train/b/wide.tif: its pixels are 32-bit integers, which have no fixed "
                                        r"range to scale to 8 bits; save it with 8 or 16 bits a channel"):
        load_imagefolder(tmp_path, device="cpu")


def test_a_one_class_tree_is_refused_in_one_line(tmp_path):
    tree_of(tmp_path / "tree", {"only": [noise(8, 8, 0), noise(8, 8, 1)]})
    result = CliRunner().invoke(main, ["train", "--run-dir", str(tmp_path / "run"), "--dataset", "imagefolder",
                                       "--data-dir", str(tmp_path / "tree"), "--device", "cpu"])
    assert result.exit_code == 1 and result.output.strip().splitlines() == [
        f"Error: {tmp_path / 'tree' / 'train'} holds 1 class folder (only): a classifier needs at least 2 <class>/ "
        f"folders"]
