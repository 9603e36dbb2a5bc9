"""roarfast.data.headers: an image's size from its file's first bytes, the same as PIL's for every JPEG kind
(baseline, progressive, with a large EXIF thumbnail before the frame header, restart markers, greyscale,
CMYK), PNG, other formats through PIL, and None for a file no reader recognises."""

import io

import numpy as np
import pytest
from PIL import Image

from roarfast.data import headers


def picture(width: int, height: int, mode: str = "RGB", seed: int = 0) -> Image.Image:
    pixels = np.random.default_rng(seed).integers(0, 256, (height, width, 3), dtype=np.uint8)
    return Image.fromarray(pixels).convert(mode)


def big_exif() -> bytes:
    """An EXIF block over HEAD_BYTES (a thumbnail-sized blob in its user comment), so the frame header lies
    beyond the first read."""
    exif = Image.Exif()
    exif[0x9286] = b"ASCII\0\0\0" + bytes(np.random.default_rng(1).integers(0, 256, 3 * headers.HEAD_BYTES,
                                                                            dtype=np.uint8))
    return exif.tobytes()


@pytest.mark.parametrize("size, mode, options", [
    ((32, 32), "RGB", {}),
    ((37, 21), "RGB", {"progressive": True}),
    ((64, 48), "RGB", {"exif": "big"}),
    ((40, 30), "RGB", {"restart_marker_blocks": 1}),
    ((33, 17), "L", {}),
    ((20, 24), "CMYK", {}),
])
def test_a_jpeg_size_matches_pil(tmp_path, size, mode, options):
    if options.get("exif") == "big":
        options = {"exif": big_exif()}
    path = tmp_path / "image.jpg"
    picture(*size, mode).save(path, "JPEG", quality=90, **options)
    if "exif" in options:
        assert path.read_bytes().find(b"\xff\xc0") > headers.HEAD_BYTES  # the frame header is past the first read
    assert headers.image_size(path) == Image.open(path).size == size


@pytest.mark.parametrize("fmt, suffix", [("PNG", "png"), ("BMP", "bmp"), ("WEBP", "webp"), ("GIF", "gif")])
def test_other_formats_match_pil(tmp_path, fmt, suffix):
    path = tmp_path / f"image.{suffix}"
    picture(45, 26).save(path, fmt)
    assert headers.image_size(path) == Image.open(path).size == (45, 26)


def test_a_file_no_reader_recognises_has_no_size(tmp_path):
    (tmp_path / "notes.jpg").write_bytes(b"not an image at all")
    truncated = io.BytesIO()
    picture(16, 16).save(truncated, "JPEG")
    (tmp_path / "cut.jpg").write_bytes(truncated.getvalue()[:20])  # SOI and part of the first segment
    assert headers.image_size(tmp_path / "notes.jpg") is None
    assert headers.image_size(tmp_path / "cut.jpg") is None
