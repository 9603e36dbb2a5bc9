"""What an image file's first and last bytes say, without decoding it: its (width, height), and whether it is
whole. Every file is checked here before a native decoder (DALI, PIL's libjpeg) sees it: an empty file crashed
DALI's CPU pipeline outright (a segfault, no message), and a JPEG cut short decodes with its missing rows grey and
no error, so a decoder must never be the first to learn that a file is bad.

A file is bad when it is empty, unreadable, not an image any decoder here reads, or truncated: shorter than its
JPEG segments, BMP or WebP header say, a JPEG with no end-of-image marker after its image data, a PNG with no
IEND chunk. What a whole file's decode still refuses (damaged image data) the decoders name in one line.

Cheap: a tree's files are read once each for their sizes (roarfast.data.canvas, cached by the listing), the head
(HEAD_BYTES) and the tail (TAIL_BYTES) of each, and the whole file only in the rare case where data follows a
JPEG's or PNG's end (a phone's motion photo). JPEG's start-of-frame segment and PNG's IHDR chunk are read here
directly (a few microseconds a file, where opening it with PIL costs about a hundred: 6 s for CIFAR-10's 60,000
JPEGs), other formats through PIL's header parser. The decoders check the bytes they read again the same way
(read_checked), in memory, so a file that changed after the tree was checked is named too.

The size is the stored one, as PIL's Image.size gives it: EXIF orientation is not applied.
"""

import io
import os
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from roarfast.errors import UserError

#: the first bytes read of a file; a JPEG whose frame header lies further (a large EXIF thumbnail first) is
#: read on from where its segments say
HEAD_BYTES = 4096
#: the last bytes read of a file, where its end marker is looked for
TAIL_BYTES = 4096
#: the version of these rules, in the keys of what a tree's cache keeps of them: a change checks every file again
RULES = 1
_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
#: a PNG's last chunk: length 0, IEND, its CRC
_PNG_END = b"\x00\x00\x00\x00IEND\xaeB`\x82"
_JPEG_END = b"\xff\xd9"
#: JPEG start-of-frame markers (baseline, extended, progressive, lossless; Huffman and arithmetic): every 0xC0-0xCF
#: but DHT (C4), JPG (C8) and DAC (CC)
_SOF = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}
#: JPEG markers that stand alone, with no length after them (TEM, RSTn)
_STANDALONE = frozenset([0x01, *range(0xD0, 0xD8)])
_START_OF_SCAN, _END_OF_IMAGE = 0xDA, 0xD9


@dataclass(frozen=True)
class Header:
    """What a file's header says: `size` (width, height), None where no reader tells it; `problem`, why no decoder
    may see the file ("empty: 0 bytes", "truncated: ..."), None for a whole file."""

    size: tuple[int, int] | None
    problem: str | None = None


class BadImageFile(UserError):
    """A file a decoder was about to read that is bad (Header.problem): one that changed after its tree was
    checked, since a tree's bad files are named or skipped when it is loaded."""

    def __init__(self, path, problem: str):
        self.path, self.problem = Path(path), problem
        super().__init__(f"{path}: {problem}; no decoder reads it: restore the file, or remove it and load the tree "
                         f"again (--data-option skip_bad=true leaves out the files a load finds bad)")

    def __reduce__(self):  # rebuilt from its fields where it crosses to another process (a cell's worker, Ray)
        return type(self), (self.path, self.problem)


class _Bytes:
    """A file's bytes held in memory, read as read_header reads a file."""

    def __init__(self, data):
        self.view = memoryview(data).cast("B")
        self.size = len(self.view)

    def read(self, offset: int, n: int) -> bytes:
        return bytes(self.view[offset:offset + n])

    def open(self):
        return io.BytesIO(self.view)


class _File:
    """An open file, read by offset (pread: no seek shared with anyone)."""

    def __init__(self, path: Path, fd: int):
        self.path, self.fd = path, fd
        self.size = os.fstat(fd).st_size

    def read(self, offset: int, n: int) -> bytes:
        return os.pread(self.fd, n, offset)

    def open(self):
        return open(self.path, "rb")


def read_header(path: Path) -> Header:
    """The Header of the image file at `path`, from its head and tail."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as err:
        return Header(None, f"unreadable: {err.strerror}")
    try:
        return _examine(_File(Path(path), fd))
    except OSError as err:
        return Header(None, f"unreadable: {err.strerror}")
    finally:
        os.close(fd)


def read_checked(path: Path) -> np.ndarray:
    """The bytes of the image file at `path` (uint8 array) for a decoder, after the checks read_header makes, on
    the bytes in memory; BadImageFile naming the file when they fail."""
    try:
        data = np.fromfile(path, dtype=np.uint8)
    except OSError as err:
        raise BadImageFile(path, f"unreadable: {err.strerror}") from None
    problem = _examine(_Bytes(data)).problem
    if problem is not None:
        raise BadImageFile(path, problem)
    return data


def _examine(source) -> Header:
    if source.size == 0:
        return Header(None, "empty: 0 bytes")
    head = source.read(0, HEAD_BYTES)
    if head.startswith(b"\xff\xd8"):
        return _jpeg(source, head)
    if head.startswith(_PNG_SIGNATURE):
        return _png(source, head)
    declared = None
    if head.startswith(b"BM") and len(head) >= 6:
        declared, kind = struct.unpack("<I", head[2:6])[0], "BMP"
    elif head.startswith(b"RIFF") and head[8:12] == b"WEBP":
        declared, kind = struct.unpack("<I", head[4:8])[0] + 8, "WebP"
    if declared is not None and declared > source.size:
        return Header(None, f"truncated: {source.size:,} bytes where its {kind} header says {declared:,}")
    return _pil(source)


def _cut(source) -> str:
    return f"truncated: {source.size:,} bytes, shorter than its JPEG headers say"


def _jpeg(source, head: bytes) -> Header:
    """Walks the JPEG's marker segments from just after SOI to its first scan (the frame header on the way gives
    the size), then looks for the end-of-image marker after the scan's data."""
    data, pos, size = head, 2, None

    def holds(end: int) -> bool:  # whether `data` reaches byte `end`, reading on as needed
        nonlocal data
        while len(data) < end:
            more = source.read(len(data), max(HEAD_BYTES, end - len(data)))
            if not more:
                return False
            data += more
        return True

    while True:
        if not holds(pos + 2):
            return Header(size, _cut(source))
        if data[pos] != 0xFF:
            return Header(size, f"damaged: no JPEG marker at byte {pos:,}, where its segments lead")
        marker = data[pos + 1]
        if marker == 0xFF:  # fill bytes before a marker
            pos += 1
            continue
        if marker in _STANDALONE:
            pos += 2
            continue
        if marker == _END_OF_IMAGE:
            return Header(size, "damaged: its JPEG ends before any image data")
        if not holds(pos + 4):
            return Header(size, _cut(source))
        (length,) = struct.unpack(">H", data[pos + 2:pos + 4])
        if length < 2:
            return Header(size, f"damaged: a JPEG segment {length} bytes long at byte {pos:,}")
        if marker in _SOF:
            if not holds(pos + 9):
                return Header(size, _cut(source))
            height, width = struct.unpack(">HH", data[pos + 5:pos + 9])
            size = width, height
        pos += 2 + length
        if marker == _START_OF_SCAN:
            if size is None:
                return Header(None, "damaged: JPEG image data before any frame header")
            if pos > source.size:
                return Header(size, _cut(source))
            # the entropy-coded data never holds FF D9 (a data byte FF is followed by 00): an end marker after
            # the scan's start ends the image, one embedded in a thumbnail lies before it
            whole = _ends_with(source, _JPEG_END, pos)
            return Header(size, None if whole else "truncated: no JPEG end-of-image marker after its image data")


def _png(source, head: bytes) -> Header:
    if len(head) < 24 or head[12:16] != b"IHDR":
        return Header(None, "truncated: no PNG header chunk (IHDR)" if len(head) < 24 else
                      "damaged: its PNG does not begin with a header chunk (IHDR)")
    size = struct.unpack(">II", head[16:24])
    whole = _ends_with(source, _PNG_END, 33)  # after the signature and IHDR
    return Header(size, None if whole else "truncated: no PNG end chunk (IEND)")


def _ends_with(source, marker: bytes, start: int) -> bool:
    """Whether `marker` occurs in the file after byte `start`: looked for in its tail, and in the rest only
    when the tail lacks it (data after the image's end: rare)."""
    tail_start = max(start, source.size - TAIL_BYTES)
    if source.read(tail_start, source.size - tail_start).find(marker) >= 0:
        return True
    # the rest, overlapping the tail by the marker's length less one (a marker across the boundary)
    return tail_start > start and source.read(start, tail_start - start + len(marker) - 1).find(marker) >= 0


def _pil(source) -> Header:
    """A format read through PIL's header parser (TIFF, BMP, WebP, ...): its size, or not an image."""
    from PIL import Image

    try:
        with source.open() as f, Image.open(f) as image:
            return Header(image.size)
    except Image.DecompressionBombError:  # PIL's guard against a huge image: DALI may decode it (its size unknown)
        return Header(None)
    except Exception:  # noqa: BLE001 - any failure to parse: no reader recognises it
        return Header(None, "not an image: neither JPEG, PNG, BMP, TIFF nor WebP")
