"""The on-disk layout of one rank store, `<root>/<method>/<split>/` (in a run directory `ranks/<method>/<rank
id>/<split>/`: roarfast.rundir.directory), and the pieces of it that its writer,
its reader and the index of stores share.

`<method>` is the method's name, or for a name too long to be one file name (a plug-in's long import path)
a bounded one: its first characters and a hash of the whole (roarfast.records.ranks.dir_name); the manifest
holds the full name.

- `ranks.npy`: a plain .npy file, Tensor[N, H, W] (pixel units) or Tensor[N, C, H, W] (value units),
  uint16 or int32, rank 0 = most important; read back as a read-only memory map.
- `maps.npy` (optional): the float16 maps the ranks came from, same shape, for pictures.
- `manifest.json`: the store's record (roarfast.records.ranks: what the ranks are, how far writing got), with
  the checksum of each chunk's rank bytes (`checksums[i]`, CHECKSUM of chunk i as written).
- `.lock`: held by the one writer of the store.
"""

from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import xxhash

from roarfast.errors import UserError

RANKS = "ranks.npy"
MAPS = "maps.npy"
LOCK = ".lock"
RANK_DTYPES = ("uint16", "int32")
SPLITS = ("train", "test")
MAPS_DTYPE = np.float16
#: the hash of a chunk's rank bytes: xxh3 runs at 15-33 GiB/s on a rank chunk against sha256's 1.5 (with
#: SHA-NI), so verifying a read costs less than reading it (benchmarks/RESULTS.md, "Rank checksums");
#: it guards against damage, not against an adversary, for which 64 bits suffice
CHECKSUM = "xxh3_64"


def now() -> str:
    """The time now, UTC, to the second: a manifest's created and updated."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def npy_header(path: Path) -> tuple[tuple, np.dtype, int]:
    """(shape, dtype, byte offset of the data) of a C-order .npy file, read without pickle."""
    with open(path, "rb") as f:
        version = np.lib.format.read_magic(f)
        if version == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(f)
        elif version == (2, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(f)
        else:
            raise UserError(f"{path}: unsupported .npy version {version}")
        if fortran:
            raise UserError(f"{path}: expected a C-order array, got Fortran order")
        return tuple(shape), dtype, f.tell()


def ranges_add(ranges: list, chunk: int) -> list:
    """Sorted, merged [start, stop) ranges with `chunk` added."""
    merged = []
    for start, stop in sorted([*ranges, [chunk, chunk + 1]]):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], stop)
        else:
            merged.append([start, stop])
    return merged


def ranges_contain(ranges: list, chunk: int) -> bool:
    return any(start <= chunk < stop for start, stop in ranges)


def chunk_count(manifest: dict) -> int:
    return -(-manifest["shape"][0] // manifest["chunk_size"])


def done_count(manifest: dict) -> int:
    return sum(stop - start for start, stop in manifest["chunks_done"])


def chunk_checksum(data) -> str:
    """CHECKSUM hex digest of a bytes-like object (a contiguous array's memory included)."""
    return xxhash.xxh3_64_hexdigest(data)


def chunk_hasher():
    """CHECKSUM fed piece by piece (`update(bytes)`, then `hexdigest()`): the same digest as chunk_checksum of the
    pieces joined, so a chunk is checked without holding it whole."""
    return xxhash.xxh3_64()
