"""The on-disk layout of one rank store, `<root>/<method>/<split>/` (in a run directory `ranks/<method>/<rank
id>/<split>/`: roarfast.rundir.directory), and the pieces of it that its writer,
its reader and the index of stores share.

`<method>` is the method's name, or for a name too long to be one file name (a plug-in's long import path)
a bounded one: its first characters and a hash of the whole (`dir_name`); the manifest holds the full name.

- `ranks.npy`: a plain .npy file, Tensor[N, H, W] (pixel units) or Tensor[N, C, H, W] (value units),
  uint16 or int32, rank 0 = most important; read back as a read-only memory map.
- `maps.npy` (optional): the float16 maps the ranks came from, same shape, for pictures.
- `manifest.json`: what the ranks are (method, params, checkpoint sha256, dataset fingerprint, shape,
  dtype), how far writing got (chunk size, chunks done as [start, stop) ranges, complete flag) and the
  checksum of each chunk's rank bytes (`checksums[i]`, CHECKSUM of chunk i as written), sealed with the
  sha256 of itself (`record_sha256`, roarfast.common.fingerprint.seal), checked whenever it is read.
- `.lock`: held by the one writer of the store.
"""

import hashlib
import json
import re
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import xxhash

from roarfast.common.atomic import write_record
from roarfast.errors import UserError
from roarfast.common.fingerprint import unseal

MANIFEST = "manifest.json"
RANKS = "ranks.npy"
MAPS = "maps.npy"
LOCK = ".lock"
FORMAT = 2  # manifest format version; bump when its meaning changes (2: sealed with its digest)
#: manifests of this format were written before digests: read unverified, with a note
UNSEALED_FORMAT = 1
RANK_DTYPES = ("uint16", "int32")
SPLITS = ("train", "test")
MAPS_DTYPE = np.float16
#: the hash of a chunk's rank bytes: xxh3 runs at 15-33 GiB/s on a rank chunk against sha256's 1.5 (with
#: SHA-NI), so verifying a read costs less than reading it (benchmarks/RESULTS.md, "Rank checksums");
#: it guards against damage, not against an adversary, for which 64 bits suffice
CHECKSUM = "xxh3_64"
#: the longest name (UTF-8 bytes) kept as its own directory name; file systems allow 255
LONGEST_DIR_NAME = 100
#: a longer name's directory: this many of its first characters, "-", HASHED_CHARS hex of its sha256
PREFIX_CHARS, HASHED_CHARS = 60, 16


def dir_name(name: str) -> str:
    """The directory (or file) name of a method, bounded: the name itself up to LONGEST_DIR_NAME bytes, else
    its first PREFIX_CHARS characters and a hash of the whole name (readable, unique, never too long)."""
    if len(name.encode()) <= LONGEST_DIR_NAME:
        return name
    return f"{name[:PREFIX_CHARS]}-{hashlib.sha256(name.encode()).hexdigest()[:HASHED_CHARS]}"


def now() -> str:
    """The time now, UTC, to the second: a manifest's created and updated."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def read_manifest(directory: Path, run_dir=None) -> dict | None:
    """The verified manifest of the store in `directory` (`<root>/<method>/<split>`), or None when there is
    none; a UserError naming it and the repair (`extract --force`, its run directory `run_dir`) when it is not
    JSON, does not match its digest, or is of another format. A manifest of UNSEALED_FORMAT (written before
    digests) is read unverified, with a note."""
    path = directory / MANIFEST
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    # `<method>/<split>`, or in a run directory `<method>/<rank id>/<split>`
    method_dir = directory.parent.parent if re.fullmatch(r"[0-9a-f]{16}", directory.parent.name) else directory.parent
    try:
        manifest = json.loads(text)
    except ValueError as e:
        raise UserError(f"{path} is not valid JSON ({e}); {repair_command(method_dir.name, run_dir)}") from None
    method = manifest.get("method") if isinstance(manifest, dict) else None
    # a long name's directory is bounded (dir_name): the repair names the method the manifest says it holds
    repair = repair_command(method if isinstance(method, str) and dir_name(method) == method_dir.name
                            else method_dir.name, run_dir)
    manifest = unseal(manifest, path, repair, older=lambda record: record.get("format") == UNSEALED_FORMAT)
    if manifest.get("format") not in (UNSEALED_FORMAT, FORMAT):
        raise UserError(f"{path} has format {manifest.get('format')!r}, this roarfast reads formats "
                        f"{UNSEALED_FORMAT} and {FORMAT}")
    return manifest


def write_manifest(directory: Path, manifest: dict) -> None:
    """Replaces the manifest of the store in `directory` by `manifest` (in FORMAT, sealed with its digest),
    atomically (roarfast.common.atomic)."""
    manifest["format"] = FORMAT
    write_record(directory / MANIFEST, manifest)


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


def repair_command(method: str, run_dir, does: str = "repairs it") -> str:
    """The command that writes `method`'s ranks anew, and what it `does`."""
    where = f" --run-dir {run_dir}" if run_dir is not None else ""
    return f"`roarfast extract --force --method {method}{where}` {does}"
