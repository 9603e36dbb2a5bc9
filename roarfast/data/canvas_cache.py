"""The decoded canvases of an image tree's in-memory splits, kept between commands beside the measurements of
roarfast.data.cache: a split is decoded once (20-30 s a command for a CIFAR-10-sized tree on 2 cores), and
every later load maps the stored canvases and decodes nothing.

An entry is two files under cache_root()/imagefolder-canvas/: `<key>.u8`, the uint8 canvases [N, C, H, W] row
by row (row i = the i-th file kept), and `<key>.json`, the sealed record of what loading needs besides (the
undecodable files left out, the files' digest, the channel statistics) with the array's shape and its xxh3
digest, and the split's folder (for whoever looks through the cache). The key is the split's listing key
(roarfast.data.cache.Listing: real path, each file's name, size, modification and change times) with the
canvas and the decoder and its version, so a changed, added or removed file, another canvas or another
decoder makes a new entry. Both files are written whole under a temporary name and renamed
(roarfast.common.atomic), never through a link.

Checked whole at every load: the record by its seal, the array by its size and its xxh3 digest, read through
once (xxh3 hashes 184 MB in about 15 ms, so the check costs about what reading the file from the page cache
costs). Checked at load rather than chunk by chunk as the rank store's reads are, because every user of an
in-memory split reads all of it anyway (training, extraction and evaluation go through every image), and
because damage found at load can still be repaired: the split is decoded again, with a note, where damage
found mid-run could only stop the run. The map is copy-on-write, so nothing written to the tensor reaches the
file, and the file is only ever replaced whole (a new file renamed over it), so a mapped file never changes
under a reader once checked.

Written only where it fits: the cache never leaves less than disk_reserve() of its disk free (a tenth of the
disk, at most 8 GiB); otherwise, or when its folder cannot be written, one line says the canvases are not cached
(the next command decodes again).
"""

import logging
import os
import shutil
from pathlib import Path

import numpy as np
import torch
import xxhash

from roarfast.common.atomic import open_nofollow, replace_file
from roarfast.data import cache
from roarfast.errors import UserError

log = logging.getLogger(__name__)

KIND = "imagefolder-canvas"
ARRAY_SUFFIX = ".u8"
#: share of the cache's disk a write never takes: a cache that filled the disk would fail the run directory's
#: own writes, which matter more than a faster next load ...
DISK_RESERVE_SHARE = 0.1
#: ... up to this many bytes: a tenth of a large shared disk (200 GB of 2 TB) would refuse a 1-MiB entry with tens
#: of GB free, and the run directory's large writes check their own room (roarfast.common.atomic.check_writable)
DISK_RESERVE_CAP = 8 << 30
#: bytes hashed per call: large enough to run at xxh3's full speed, small enough to keep the pages it touches few
_BLOCK = 64 << 20


def array_digest(array: np.ndarray) -> str:
    """xxh3-64 hex digest of a C-contiguous array's bytes, hashed block by block (a memory map is read once)."""
    flat = array.reshape(-1).view(np.uint8)
    digest = xxhash.xxh3_64()
    for start in range(0, flat.size, _BLOCK):
        digest.update(memoryview(flat[start:start + _BLOCK]))
    return digest.hexdigest()


def disk_reserve(total: int) -> int:
    """Bytes the cache leaves free on a disk of `total` bytes: a tenth of it, at most DISK_RESERVE_CAP."""
    return min(int(DISK_RESERVE_SHARE * total), DISK_RESERVE_CAP)


def room_for(nbytes: int, what: str) -> bool:
    """Whether `nbytes` of canvases fit the cache's disk with disk_reserve() of it left free; when not, one line
    says so (naming `what`) and nothing is cached."""
    folder = cache.cache_root()
    while not folder.exists() and folder != folder.parent:  # the cache may not be made yet: its disk is the nearest
        folder = folder.parent
    usage = shutil.disk_usage(folder)
    reserve = disk_reserve(usage.total)
    if usage.free - nbytes >= reserve:
        return True
    log.warning("note: the decoded canvases of %s (%s) are not cached: %s has %s free, and the cache leaves %s of "
                "its disk free (a tenth of it, at most %s); the next command decodes them again (free space, or "
                "set ROARFAST_CACHE_DIR to another disk)", what, _mib(nbytes), folder, _mib(usage.free),
                _mib(reserve), _mib(DISK_RESERVE_CAP))
    return False


def _mib(nbytes: int) -> str:
    return f"{nbytes / 2**20:,.0f} MiB"


def read(key: str, shape: tuple) -> dict | None:
    """The entry of `key` if it is whole and its canvases are [N, *shape]: {"images": uint8 Tensor[N, *shape]
    (a copy-on-write map of the array), "bad", "digest", "stats"}; None when there is none, or (with a note)
    when it is damaged or does not match: the split is decoded again."""
    record = cache.read(KIND, key)  # a damaged record is noted there
    if record is None:
        return None
    array_path = cache.path(KIND, key, ARRAY_SUFFIX)
    stored = tuple(record["shape"])
    problem = None
    if stored[1:] != tuple(shape):
        problem = f"holds canvases of {list(stored[1:])}, not {list(shape)}"
    else:
        try:
            images = np.memmap(array_path, dtype=np.uint8, mode="c")
        except (OSError, ValueError) as err:
            images, problem = None, f"cannot be mapped ({err})"
        if images is not None and images.size != int(np.prod(stored)):
            problem = f"holds {images.size:,} bytes where its record says {int(np.prod(stored)):,}"
        elif images is not None and array_digest(images) != record["xxh3"]:
            problem = "does not match the xxh3 digest recorded when it was written (the file changed on disk)"
    if problem is not None:
        log.warning("note: the cached canvases %s %s; decoding them again", array_path, problem)
        return None
    return {"images": torch.from_numpy(images.reshape(stored)), "bad": record["bad"], "digest": record["digest"],
            "stats": None if record["stats"] is None else tuple(tuple(values) for values in record["stats"])}


def write(key: str, folder: Path, images: torch.Tensor, bad: list[str], digest: str, stats) -> bool:
    """Stores the canvases (uint8 Tensor[N, C, H, W], CPU) of `key`, decoded from the files of `folder` (named in
    the record, for whoever looks through the cache), with what read returns besides: the array first, then its
    record (so a record never names an array not yet written). False, with one line, when the cache cannot be
    written (the canvases are decoded again next time)."""
    array = np.ascontiguousarray(images.numpy())
    record = {"folder": str(Path(folder).resolve()), "shape": list(array.shape), "xxh3": array_digest(array),
              "bad": list(bad), "digest": digest,
              "stats": None if stats is None else [list(values) for values in stats]}
    array_path = cache.path(KIND, key, ARRAY_SUFFIX)

    def put(tmp: Path) -> None:
        with os.fdopen(open_nofollow(tmp, os.O_WRONLY | os.O_TRUNC), "wb") as f:
            f.write(memoryview(array.reshape(-1)))

    try:
        array_path.parent.mkdir(parents=True, exist_ok=True)
        replace_file(array_path, put)
        cache.store(KIND, key, record)
    except (OSError, UserError) as err:
        reason = f"{err.strerror}: {err.filename}" if isinstance(err, OSError) else str(err)
        log.warning("note: the decoded canvases are not cached (%s); the next command decodes them again", reason)
        return False
    return True
