"""The canvas an image tree is decoded to (shorter side resized to `resize`, center crop `crop` x `crop`):
the images' own size when every image kept shares one, read from the files' headers (roarfast.data.headers)
with the files that are bad (empty, truncated, unreadable, not an image) and cached; else ImageNet's evaluation
canvas; and the limits of the resize and crop options, refused in one line before anything is allocated.
"""

from pathlib import Path
from typing import NamedTuple

import numpy as np

from roarfast.data import cache, headers
from roarfast.data.decode import CPU_DECODER, DALI, canvas_batches
from roarfast.data.headers import BadImageFile
from roarfast.errors import UserError

#: the canvas of a tree whose images differ in size (ImageNet's evaluation canvas): shorter side resized to
#: DEFAULT_RESIZE, center crop DEFAULT_CROP; a tree whose images share one size keeps it (canvas_size)
DEFAULT_RESIZE, DEFAULT_CROP = 256, 224
#: the largest resize and crop: one 4096 px image is 192 MiB as the float32 the model takes (and each
#: attribution map), and a network's first activations about 1 GiB, so a larger canvas cannot be trained or
#: explained a batch at a time; far larger ones cannot even be allocated
MAX_SIDE = 4096
_SIZE_KIND = "imagefolder-size"
#: the cache's kind of a split's bad files (roarfast.data.headers)
_HEADERS_KIND = "imagefolder-headers"
#: the canvas a file is decoded to when only whether it decodes is asked
_PROBE_SIDE = 8


#: what a file that passes its header checks and still fails to decode is said to be
UNDECODABLE = "undecodable"


def undecodable(split_dir: Path, files: list[str], decoder: str = CPU_DECODER) -> dict[str, str]:
    """The files that are bad (names relative to split_dir) with why: their header checks first
    (roarfast.data.headers: no decoder sees a bad file), then whether `decoder` (decode.decoder_for) decodes
    them (UNDECODABLE): the decoder that decodes the tree decides, so that a file is left out of the canvas exactly
    when it is left out of the data (PIL's guard against decompression bombs refuses a 20000 px PNG that DALI
    decodes)."""
    bad = {}
    for name in files:
        problem = headers.read_header(split_dir / name).problem
        if problem is None and not _decodes(split_dir, name, decoder):
            problem = UNDECODABLE
        if problem is not None:
            bad[name] = problem
    return bad


def _decodes(split_dir: Path, name: str, decoder: str) -> bool:
    """Whether `decoder` decodes the file `name`: DALI to a canvas of a few pixels (decoding is what is tried),
    PIL as the CPU decoder opens it."""
    if decoder == DALI:
        try:
            for _ in canvas_batches(DALI, split_dir, [name], [np.array([0])], _PROBE_SIDE, _PROBE_SIDE):
                pass
        except (RuntimeError, BadImageFile):  # DALI's failure to decode a file; one that changed since checked
            return False
        return True
    from PIL import Image

    try:
        with Image.open(split_dir / name) as image:
            image.load()
    except Exception:  # noqa: BLE001 - any failure to decode marks the file bad
        return False
    return True


class Examined(NamedTuple):
    """What a split's headers say: `size`, the (short, long) sides every image kept shares (None when they
    differ: shared_size), and `bad`, the files no decoder may see (name -> why: headers.Header.problem)."""

    size: tuple | None
    bad: dict


def examine(listing: cache.Listing, decoder: str = CPU_DECODER) -> Examined:
    """The Examined of `listing`, for a load: every file's head and tail read once (roarfast.data.headers), the
    bad files cached (roarfast.data.cache) by the listing and the rules of the checks, the size by shared_size from
    the same reads."""
    key = listing.key(_HEADERS_KIND, {"header_rules": headers.RULES})
    record = cache.read(_HEADERS_KIND, key)
    if record is not None:
        return Examined(shared_size(listing, decoder), record["bad"])
    bad = {}

    def checked():  # each file's header, its problem noted as it is read
        for name in listing.files:
            header = headers.read_header(listing.folder / name)
            if header.problem is not None:
                bad[name] = header.problem
            yield name, header

    reads = checked()
    size = shared_size(listing, decoder, reads)  # reads until the size is settled ...
    for _ in reads:  # ... and the rest for their checks
        pass
    cache.write(_HEADERS_KIND, key, {"bad": bad})
    return Examined(size, bad)


def shared_size(listing: cache.Listing, decoder: str = CPU_DECODER, reads=None) -> tuple | None:
    """(short, long) sides every decodable image of `listing` shares, from the files' headers (`reads`: (name,
    Header) pairs in listing order, else read here), or None when they differ; cached by the listing, the decoder
    and the rules of the header checks. A dry run's outline asks this alone, so it reads only the headers that
    settle the size. Files with a bad header are left out, and only where the headers disagree are files decoded
    (by `decoder`, as the tree will be: undecodable), one of each size until one decodes: a size at which no file
    decodes is left out, as skip_bad leaves its files out (an undecodable 20000 px PNG among 32 px JPEGs does not
    make the canvas), and two sizes that decode settle it (a tree of varied photos decodes two files, one of a
    single size none)."""
    key = listing.key(_SIZE_KIND, {"decoder": decoder, "header_rules": headers.RULES})
    record = cache.read(_SIZE_KIND, key)
    if record is None:
        if reads is None:
            reads = ((name, headers.read_header(listing.folder / name)) for name in listing.files)
        record = {"size": _size_kept(listing.folder, reads, decoder)}
        cache.write(_SIZE_KIND, key, record)
    return None if record["size"] is None else tuple(record["size"])


def _size_kept(folder: Path, reads, decoder: str) -> list | None:
    """shared_size, measured from `reads`, consumed only as far as the size needs."""
    untried = {}  # size -> its files not yet decoded, in order
    counted = []  # sizes at which a file decodes
    for name, header in reads:
        if header.problem is not None or header.size is None:  # a bad file, or one no reader tells the size of
            continue
        size = tuple(sorted(header.size))  # EXIF orientation may swap the sides
        if size in counted:
            continue
        untried.setdefault(size, []).append(name)
        if len(untried) > 1:  # the sizes differ: each counts once a file of it decodes
            for other, names in untried.items():
                while names and other not in counted:
                    if not undecodable(folder, [names.pop(0)], decoder):
                        counted.append(other)
            if len(counted) > 1:
                return None
    if len(untried) == 1:
        return list(next(iter(untried)))
    return list(counted[0]) if len(counted) == 1 else None


def canvas_size(resize: int | None, crop: int | None, sides: list) -> tuple[int, int]:
    """(resize, crop) of the canvas: as given; what is not given keeps the images' own size when they all share
    one (`sides`: each split's shared (short, long) sides, or None), so a canvas larger than the images comes
    only when asked; else the ImageNet canvas (DEFAULT_RESIZE, DEFAULT_CROP), within what is given. A UserError
    when the canvas is not one (check_canvas)."""
    own = sides[0][0] if sides[0] is not None and all(side == sides[0] for side in sides) else None
    if own is not None:
        chosen = resize if resize is not None else max(own, crop or own)
        chosen = chosen, crop if crop is not None else chosen
    else:
        chosen = resize if resize is not None else max(DEFAULT_RESIZE, crop or 0)
        chosen = chosen, crop if crop is not None else min(DEFAULT_CROP, chosen)
    check_canvas(*chosen, given=(resize, crop))
    return chosen


def check_canvas(resize: int, crop: int, given=(None, None)) -> None:
    """Refuses a center crop larger than the resized shorter side, and a side over MAX_SIDE: naming the option
    when `given` (resize and crop as given, None where not) holds it, else the images' own size."""
    costs = {"crop": f"one image of it is {4 * 3 * MAX_SIDE**2 / 2**20:.0f} MiB as the model's float32 input, a "
                     f"network's activations far more",
             "resize": f"every image is resized to it before the crop, {3 * MAX_SIDE**2 / 2**20:.0f} MiB an image "
                       f"at {MAX_SIDE} px, times a decode batch"}
    for option, value in (("crop", given[1]), ("resize", given[0])):
        if value is not None and value > MAX_SIDE:
            raise UserError(f"--data-option {option}={value} is over {MAX_SIDE} px, the largest canvas roarfast makes "
                            f"({costs[option]}); ask for at most {MAX_SIDE}")
    if max(resize, crop) > MAX_SIDE:
        raise UserError(f"imagefolder: the images are {max(resize, crop)} px, over {MAX_SIDE} px, the largest canvas "
                        f"roarfast makes ({costs['crop']}); ask for a smaller one with --data-option resize=N crop=N")
    if not 0 < crop <= resize:
        raise UserError(f"imagefolder: crop should be in (0, resize={resize}], got {crop}")
