"""roarfast.data.headers: an image's size from its file's first bytes, the same as PIL's for every JPEG kind
(baseline, progressive, with a large EXIF thumbnail before the frame header, restart markers, greyscale,
CMYK), PNG, other formats through PIL, and None for a file no reader recognises; each kind of bad file (empty,
truncated, damaged, unreadable, not an image) named by its header and by the check the decoders make on its
bytes, and no whole file taken for a bad one."""

import errno
import io
import os
import pickle
import re

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
    assert headers.read_header(path).size == Image.open(path).size == size


@pytest.mark.parametrize("fmt, suffix", [("PNG", "png"), ("BMP", "bmp"), ("WEBP", "webp"), ("GIF", "gif")])
def test_other_formats_match_pil(tmp_path, fmt, suffix):
    path = tmp_path / f"image.{suffix}"
    picture(45, 26).save(path, fmt)
    assert headers.read_header(path).size == Image.open(path).size == (45, 26)


def test_a_file_no_reader_recognises_has_no_size(tmp_path):
    (tmp_path / "notes.jpg").write_bytes(b"not an image at all")
    truncated = io.BytesIO()
    picture(16, 16).save(truncated, "JPEG")
    (tmp_path / "cut.jpg").write_bytes(truncated.getvalue()[:20])  # SOI and part of the first segment
    assert headers.read_header(tmp_path / "notes.jpg").size is None
    assert headers.read_header(tmp_path / "cut.jpg").size is None


def encoded(fmt: str, size=(24, 16), **options) -> bytes:
    out = io.BytesIO()
    picture(*size).save(out, fmt, **options)
    return out.getvalue()


def test_every_whole_file_passes_its_checks(tmp_path):
    """No false alarm: every format and JPEG kind whole, and a JPEG followed by other data longer than the tail
    read (a phone's motion photo appends a video after the end marker)."""
    wholes = {"a.jpg": encoded("JPEG"), "p.jpg": encoded("JPEG", progressive=True),
              "r.jpg": encoded("JPEG", restart_marker_blocks=1), "e.jpg": encoded("JPEG", exif=big_exif()),
              "a.png": encoded("PNG"), "a.bmp": encoded("BMP"), "a.webp": encoded("WEBP"), "a.tif": encoded("TIFF"),
              "motion.jpg": encoded("JPEG") + b"\0ftypmp42" + bytes(3 * headers.TAIL_BYTES)}
    for name, data in wholes.items():
        (tmp_path / name).write_bytes(data)
        assert headers.read_header(tmp_path / name) == headers.Header((24, 16)), name
        assert bytes(headers.read_checked(tmp_path / name)) == data


def without_end(data: bytes) -> bytes:
    return data[:data.rindex(b"\xff\xd9")]


@pytest.mark.parametrize("name, make, problem", [
    ("empty.jpg", lambda: b"", "empty: 0 bytes"),
    ("end.jpg", lambda: without_end(encoded("JPEG")), "truncated: no JPEG end-of-image marker after its image data"),
    # the end marker of the EXIF thumbnail before the image data is not the image's end
    ("thumb.jpg", lambda: without_end(encoded("JPEG", exif=b"Exif\0\0" + encoded("JPEG", (8, 8)))),
     "truncated: no JPEG end-of-image marker after its image data"),
    ("half.jpg", lambda: encoded("JPEG")[:encoded("JPEG").index(b"\xff\xdb") + 10],
     r"truncated: \d+ bytes, shorter than its JPEG headers say"),
    ("junk.jpg", lambda: b"\xff\xd8" + b"\x00" * 64, "damaged: no JPEG marker at byte 2, where its segments lead"),
    ("cut.png", lambda: encoded("PNG")[:-12], r"truncated: no PNG end chunk \(IEND\)"),
    ("cut.bmp", lambda: encoded("BMP")[:200], r"truncated: 200 bytes where its BMP header says 1,\d+"),
    ("cut.webp", lambda: encoded("WEBP")[:30], r"truncated: 30 bytes where its WebP header says \d+"),
    ("notes.jpg", lambda: b"a text file, named as an image\n", "not an image: neither JPEG, PNG, BMP, TIFF nor WebP"),
])
def test_each_kind_of_bad_file_is_named_by_its_header_and_by_the_decoders_guard(tmp_path, name, make, problem):
    path = tmp_path / name
    path.write_bytes(make())
    assert re.fullmatch(problem, headers.read_header(path).problem)
    with pytest.raises(headers.BadImageFile) as err:  # the check each decoder makes on the bytes it read
        headers.read_checked(path)
    assert re.fullmatch(problem, err.value.problem) and str(err.value).startswith(f"{path}: ")
    assert "\n" not in str(err.value)


def test_an_unreadable_file_is_named(tmp_path, monkeypatch):
    path = tmp_path / "locked.jpg"
    path.write_bytes(encoded("JPEG"))
    deny(path, monkeypatch)
    assert headers.read_header(path) == headers.Header(None, "unreadable: Permission denied")
    with pytest.raises(headers.BadImageFile, match="locked.jpg: unreadable: Permission denied"):
        headers.read_checked(path)


def deny(path, monkeypatch) -> None:
    """Makes `path` unreadable: its mode for a user; for root, who reads any file whatever its mode, the refusal
    a user meets is made for this path alone, where the checks open it (os.open, numpy.fromfile)."""
    if os.geteuid() != 0:
        path.chmod(0)
        return
    real_open, real_fromfile = os.open, np.fromfile

    def refuse(file):
        if os.fspath(file) == os.fspath(path):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), os.fspath(file))

    monkeypatch.setattr(os, "open", lambda file, *args, **kwargs: refuse(file) or real_open(file, *args, **kwargs))
    monkeypatch.setattr(np, "fromfile", lambda file, *args, **kwargs: refuse(file) or real_fromfile(file, *args,
                                                                                                     **kwargs))


def test_a_bad_file_s_error_crosses_to_another_process_whole(tmp_path):
    err = headers.BadImageFile(tmp_path / "x.jpg", "empty: 0 bytes")
    again = pickle.loads(pickle.dumps(err))  # as a cell's worker or a Ray task hands it to the driver
    assert (type(again), again.path, again.problem, str(again)) == (type(err), err.path, err.problem, str(err))
