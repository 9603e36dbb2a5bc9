"""An image's (width, height) from the first bytes of its file, without decoding it: JPEG's start-of-frame
segment and PNG's IHDR chunk are read here directly (a few microseconds a file, where opening it with PIL costs
about a hundred: 6 s for CIFAR-10's 60,000 JPEGs), any other format through PIL's header parser. An image
tree's shared size (roarfast.data.canvas.shared_size) reads every file's header this way.

The size is the stored one, as PIL's Image.size gives it: EXIF orientation is not applied.
"""

import struct
from pathlib import Path

#: the first bytes read of a file; a JPEG whose frame header lies further (a large EXIF thumbnail first) is
#: read on from where its segments say
HEAD_BYTES = 4096
_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
#: JPEG start-of-frame markers (baseline, extended, progressive, lossless; Huffman and arithmetic): every 0xC0-0xCF
#: but DHT (C4), JPG (C8) and DAC (CC)
_SOF = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}
#: JPEG markers that stand alone, with no length after them (TEM, RSTn)
_STANDALONE = frozenset([0x01, *range(0xD0, 0xD8)])


def image_size(path: Path) -> tuple[int, int] | None:
    """(width, height) of the image file at `path`, from its header; None when no reader recognises it (an
    undecodable file: the decode finds and names it)."""
    with open(path, "rb") as f:
        head = f.read(HEAD_BYTES)
        if head.startswith(_PNG_SIGNATURE) and head[12:16] == b"IHDR":
            return struct.unpack(">II", head[16:24])
        if head.startswith(b"\xff\xd8"):
            found = _jpeg_size(f, head)
            if found is not None:
                return found
    return _pil_size(path)


def _jpeg_size(f, head: bytes) -> tuple[int, int] | None:
    """Walks the JPEG's marker segments from just after SOI to its first start-of-frame; None when the file
    ends first or a segment is malformed."""
    data, pos = head, 2
    while True:
        while len(data) < pos + 9:  # a marker, its length and the frame header's first fields
            more = f.read(max(HEAD_BYTES, pos + 9 - len(data)))
            if not more:
                return None
            data += more
        if data[pos] != 0xFF:
            return None
        marker = data[pos + 1]
        if marker == 0xFF:  # fill bytes before a marker
            pos += 1
            continue
        if marker in _STANDALONE:
            pos += 2
            continue
        if marker in _SOF:
            height, width = struct.unpack(">HH", data[pos + 5:pos + 9])
            return width, height
        if marker in (0xD9, 0xDA):  # end of image, or scan data, before any frame header
            return None
        (length,) = struct.unpack(">H", data[pos + 2:pos + 4])
        if length < 2:
            return None
        pos += 2 + length


def _pil_size(path: Path) -> tuple[int, int] | None:
    from PIL import Image

    try:
        with Image.open(path) as image:
            return image.size
    except Exception:  # noqa: BLE001 - an undecodable file is found (and named) by the decode
        return None
