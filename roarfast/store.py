"""Rank store: per-method, per-split attribution ranks on disk, written chunk by chunk, resumable.

Layout (DESIGN.md section 6): `<root>/<method>/<split>/` holds (a run directory's store is RunDir.rank_store):
- `ranks.npy`: a plain .npy file, Tensor[N, H, W] (pixel units) or Tensor[N, C, H, W] (value units),
  uint16 or int32, rank 0 = most important; read back as a read-only memory map.
- `maps.npy` (optional): the float16 maps the ranks came from, same shape, for pictures.
- `manifest.json`: what the ranks are (method, params, checkpoint sha256, dataset fingerprint, shape,
  dtype), how far writing got (chunk size, chunks done as [start, stop) ranges, complete flag) and the
  checksum of each chunk's rank bytes (`checksums[i]`, CHECKSUM of chunk i as written).

Durability: a chunk's bytes are written with pwrite and fdatasync'ed before the manifest marks it
done, and the manifest is replaced atomically, so a kill at any point leaves a store that resumes
with every chunk the manifest calls done intact.

Integrity: every read of rank rows goes through RankRecord.rows (or .verify, for a reader of the memory
map), which checks each chunk it touches once per record: its checksum, and that every rank lies in
[0, units) (units = H*W pixels, or C*H*W values). A chunk that fails names the file, the chunk and
the repair (`roarfast extract --force`). Chunks written before checksums existed have none: their
range is checked and a note says, once, that they are not otherwise verified.
"""

import fcntl
import json
import logging
import os
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from roarfast.atomic import write_json
from roarfast.errors import UserError, write_error
from roarfast.fingerprint import canonical_json

log = logging.getLogger(__name__)

MANIFEST = "manifest.json"
RANKS = "ranks.npy"
MAPS = "maps.npy"
LOCK = ".lock"
FORMAT = 1  # manifest format version; bump when its meaning changes
RANK_DTYPES = ("uint16", "int32")
SPLITS = ("train", "test")
MAPS_DTYPE = np.float16
#: the hash of a chunk's rank bytes: xxh3 runs at 15-33 GiB/s on a rank chunk against sha256's 1.5 (with
#: SHA-NI), so verifying a read costs less than reading it (benchmarks/RESULTS.md, "Rank checksums");
#: it guards against damage, not against an adversary, for which 64 bits suffice
CHECKSUM = "xxh3_64"

# Manifest fields that say what the ranks ARE; any difference means a different store.
_IDENTITY = ("method", "split", "params", "checkpoint_sha256", "dataset_fingerprint", "shape", "dtype", "maps")


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _version() -> str:
    from roarfast.version import __version__

    return __version__


def _check_name(kind: str, name) -> str:
    """A method or split name usable as one directory level."""
    if not isinstance(name, str) or not name or name.startswith(".") or "/" in name or "\\" in name or "\0" in name:
        raise UserError(f"{kind} must be a non-empty name without '/' or a leading '.', got {name!r}")
    return name


def _dtype_name(dtype) -> str:
    """'uint16' or 'int32' from a str, numpy dtype or torch dtype."""
    name = str(dtype).removeprefix("torch.")
    if name not in RANK_DTYPES:
        raise UserError(f"dtype must be one of {RANK_DTYPES} (the dtypes ops.rank returns), got {dtype!r}")
    return name


def _check_shape(shape) -> tuple:
    try:
        dims = tuple(int(d) for d in shape)
    except (TypeError, ValueError):
        raise UserError(f"shape must be a sequence of ints [N,H,W] or [N,C,H,W], got {shape!r}") from None
    if len(dims) not in (3, 4) or any(d <= 0 for d in dims):
        raise UserError(f"shape must be [N,H,W] or [N,C,H,W] with positive sizes, got {list(dims)}")
    return dims


def _short(value) -> str:
    return "None (independent of the model)" if value is None else str(value)


def _read_manifest(directory: Path) -> dict | None:
    path = directory / MANIFEST
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    try:
        manifest = json.loads(text)
    except ValueError as e:
        raise UserError(f"{path} is not valid JSON ({e}); start this store over with --force") from None
    if manifest.get("format") != FORMAT:
        raise UserError(f"{path} has format {manifest.get('format')!r}, this roarfast reads format {FORMAT}")
    return manifest


def _npy_header(path: Path) -> tuple[tuple, np.dtype, int]:
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


def _as_numpy(array, name: str) -> np.ndarray:
    """A CPU numpy view (or copy) of a torch tensor or numpy array."""
    if isinstance(array, np.ndarray):
        return array
    if hasattr(array, "detach"):
        array = array.detach().cpu()
        # numpy has no bfloat16; such maps are widened here and stored as float16 anyway.
        return (array.float() if str(array.dtype) == "torch.bfloat16" else array).numpy()
    raise UserError(f"{name} must be a torch.Tensor or numpy.ndarray, got {type(array).__name__}")


def _ranges_add(ranges: list, chunk: int) -> list:
    """Sorted, merged [start, stop) ranges with `chunk` added."""
    merged = []
    for start, stop in sorted([*ranges, [chunk, chunk + 1]]):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], stop)
        else:
            merged.append([start, stop])
    return merged


def _ranges_contain(ranges: list, chunk: int) -> bool:
    return any(start <= chunk < stop for start, stop in ranges)


def _num_chunks(manifest: dict) -> int:
    return -(-manifest["shape"][0] // manifest["chunk_size"])


def _done_count(manifest: dict) -> int:
    return sum(stop - start for start, stop in manifest["chunks_done"])


def _checksum(data) -> str:
    """CHECKSUM hex digest of a bytes-like object (a contiguous array's memory included)."""
    import xxhash

    return xxhash.xxh3_64_hexdigest(data)


def _repair(method: str, run_dir, does: str = "repairs it") -> str:
    """The command that writes `method`'s ranks anew, and what it `does`."""
    where = f" --run-dir {run_dir}" if run_dir is not None else ""
    return f"`roarfast extract --force --method {method}{where}` {does}"


class RankWriter:
    """Writes one (method, split) store chunk by chunk; get one from `RankStore.open_writer`.

    Chunk i holds rows [i * chunk_size, min((i + 1) * chunk_size, N)). Chunks may be written in any
    order; `pending_chunks()` lists those not yet durable. Holds an exclusive lock on the store
    directory until `close()` (or until the process dies).
    """

    def __init__(self, directory: Path, manifest: dict, lock_file):
        self.directory = directory
        self.manifest = manifest
        self._lock_file = lock_file
        self._ranks_fd = self._maps_fd = None
        self._maps_offset = 0
        self._ranks_fd = os.open(directory / RANKS, os.O_RDWR)
        self._ranks_offset = _npy_header(directory / RANKS)[2]
        if manifest["maps"]:
            self._maps_fd = os.open(directory / MAPS, os.O_RDWR)
            self._maps_offset = _npy_header(directory / MAPS)[2]

    @property
    def shape(self) -> tuple:
        return tuple(self.manifest["shape"])

    @property
    def chunk_size(self) -> int:
        """Rows per chunk; a resumed store keeps the chunk size it was started with."""
        return self.manifest["chunk_size"]

    @property
    def num_chunks(self) -> int:
        return _num_chunks(self.manifest)

    @property
    def complete(self) -> bool:
        return self.manifest["complete"]

    def chunk_rows(self, chunk: int) -> tuple[int, int]:
        """(start, stop) row range of `chunk`."""
        if not isinstance(chunk, (int, np.integer)) or not 0 <= chunk < self.num_chunks:
            raise UserError(f"chunk must be an int in [0, {self.num_chunks}), got {chunk!r}")
        start = int(chunk) * self.chunk_size
        return start, min(start + self.chunk_size, self.shape[0])

    def pending_chunks(self) -> list[int]:
        """Chunks not yet written durably, ascending."""
        done = self.manifest["chunks_done"]
        return [i for i in range(self.num_chunks) if not _ranges_contain(done, i)]

    def write_chunk(self, chunk: int, ranks, maps=None) -> None:
        """Writes rows `chunk_rows(chunk)` and marks the chunk done once its bytes are on disk.

        Args:
            chunk: chunk index in [0, num_chunks).
            ranks (Tensor[n, H, W] or Tensor[n, C, H, W]): the store's dtype, n = rows in the chunk.
            maps (Tensor like ranks, float): required iff the store keeps maps; stored as float16.
        """
        if self._ranks_fd is None:
            raise UserError(f"this writer of {self.directory} is closed")
        start, stop = self.chunk_rows(chunk)
        expected = (stop - start, *self.shape[1:])
        ranks = _as_numpy(ranks, "ranks")
        if tuple(ranks.shape) != expected or ranks.dtype.name != self.manifest["dtype"]:
            raise UserError(
                f"ranks of chunk {chunk} must be {self.manifest['dtype']} {list(expected)}, "
                f"got {ranks.dtype.name} {list(ranks.shape)}"
            )
        if self.manifest["maps"]:
            if maps is None:
                raise UserError(f"this store keeps maps (keep_maps=True): chunk {chunk} needs maps")
            maps = _as_numpy(maps, "maps")
            if tuple(maps.shape) != expected or maps.dtype.kind != "f":
                raise UserError(
                    f"maps of chunk {chunk} must be float {list(expected)}, got {maps.dtype.name} {list(maps.shape)}"
                )
            self._write_rows(self._maps_fd, self._maps_offset, start, maps.astype(MAPS_DTYPE), MAPS)
        elif maps is not None:
            raise UserError("maps given but the store was opened with keep_maps=False")
        digest = self._write_rows(self._ranks_fd, self._ranks_offset, start, ranks, RANKS)

        checksums = self.manifest.setdefault("checksums", [None] * self.num_chunks)  # none before checksums
        checksums[int(chunk)] = digest
        self.manifest["checksum"] = CHECKSUM
        self.manifest["chunks_done"] = _ranges_add(self.manifest["chunks_done"], int(chunk))
        self.manifest["complete"] = _done_count(self.manifest) == self.num_chunks
        self.manifest["updated"] = _now()
        try:
            write_json(self.directory / MANIFEST, self.manifest)
        except OSError as err:
            raise write_error(err, self.directory / MANIFEST, "the chunks it lists as done are intact; rerun "
                                                              "to resume") from None

    def _write_rows(self, fd: int, offset: int, start: int, rows: np.ndarray, name: str) -> str:
        """pwrite `rows` at row `start` of the array `name` and wait until they are on disk; returns the
        checksum of the bytes written."""
        data = np.ascontiguousarray(rows).tobytes()
        row_bytes = len(data) // rows.shape[0]
        position = offset + start * row_bytes
        view = memoryview(data)
        try:
            while view:
                written = os.pwrite(fd, view, position)
                view, position = view[written:], position + written
            os.fdatasync(fd)
        except OSError as err:
            raise write_error(err, self.directory / name, "the chunks written before are intact; rerun to "
                                                          "resume") from None
        return _checksum(data)

    def close(self) -> None:
        """Releases the files and the lock; the store stays resumable if incomplete."""
        for fd in (self._ranks_fd, self._maps_fd):
            if fd is not None:
                os.close(fd)
        self._ranks_fd = self._maps_fd = None
        if self._lock_file is not None:
            self._lock_file.close()
            self._lock_file = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        self.close()


#: stores whose chunks without checksums were noted in this process (the note is said once)
_NOTED_UNVERIFIED = set()


@dataclass
class RankRecord:
    """A complete store, read back.

    `ranks` (ndarray[N, H, W] or [N, C, H, W], uint16|int32) is a read-only memory map: read it through
    `rows` (or call `verify` first), which check the chunks they touch; `maps` likewise (float16, not
    verified: pictures only) or None; `manifest` the manifest dict; `directory` the store's folder.
    """

    method: str
    split: str
    ranks: np.ndarray
    maps: np.ndarray | None
    manifest: dict
    directory: Path | None = None
    run_dir: Path | None = None  # named in the repair command of a failed check
    _verified: set = field(default_factory=set, repr=False)

    def tensor(self):
        """All ranks of the split as a CPU Tensor[N, ...] (read into memory, every chunk verified)."""
        return self.rows()

    def rows(self, index=None):
        """Ranks of the rows `index` (None = all; int, slice, or int sequence/array/Tensor) as a CPU Tensor,
        after `verify(index)`."""
        import torch

        if index is None:
            index = slice(None)
        elif hasattr(index, "detach"):
            index = index.detach().cpu().numpy()
        self.verify(index)
        rows = self.ranks[index]
        # Slices of the read-only map are views: copy them so the tensor owns writable memory.
        if isinstance(rows, np.memmap) or not rows.flags.writeable:
            rows = np.array(rows)
        return torch.from_numpy(rows)

    def verify(self, index=None) -> None:
        """Checks every chunk holding a row of `index` (None = all; as `rows` takes it) not checked yet:
        its checksum where one was recorded, and that each rank lies in [0, units). Raises UserError
        naming the file, the chunk and the repair."""
        n, size = self.ranks.shape[0], self.manifest["chunk_size"]
        if index is None:
            chunks = range(-(-n // size))
        else:
            if hasattr(index, "detach"):
                index = index.detach().cpu().numpy()
            chunks = np.unique(np.atleast_1d(np.arange(n)[index]) // size).tolist()
        for chunk in chunks:
            if chunk not in self._verified:
                self._verify_chunk(chunk)
                self._verified.add(chunk)

    def _verify_chunk(self, chunk: int) -> None:
        start = chunk * self.manifest["chunk_size"]
        rows = self.ranks[start:start + self.manifest["chunk_size"]]
        path = (self.directory or Path(".")) / RANKS
        repair = _repair(self.method, self.run_dir)
        expected = (self.manifest.get("checksums") or [None] * (chunk + 1))[chunk]
        if expected is None:
            if path not in _NOTED_UNVERIFIED:
                _NOTED_UNVERIFIED.add(path)
                log.warning("note: %s was written before rank checksums: only its ranks' range is checked; %s", path,
                            _repair(self.method, self.run_dir, "rewrites it with checksums"))
        elif _checksum(np.ascontiguousarray(rows)) != expected:
            raise UserError(f"{path}: chunk {chunk} (rows {start}-{start + rows.shape[0] - 1}) does not match the "
                            f"checksum recorded when it was written (the file changed on disk); {repair}")
        units = int(np.prod(rows.shape[1:]))
        # one reduction over the chunk; the row is looked for only once the chunk failed
        if rows.max() >= units or (rows.dtype.kind == "i" and rows.min() < 0):
            flat = rows.reshape(rows.shape[0], -1)
            row = int(np.argmax((flat.max(axis=1) >= units) | (flat.min(axis=1) < 0)))
            raise UserError(f"{path}: row {start + row} (chunk {chunk}) holds ranks outside [0, {units}) (max "
                            f"{int(flat[row].max())}): the file is damaged; {repair}")


class RankStore:
    """All rank stores under `root` (a run directory's is RunDir.rank_store): `<root>/<method>/<split>/`."""

    def __init__(self, root, run_dir=None):
        self.root = Path(root)
        self.run_dir = run_dir  # named in the repair commands of its messages

    def path(self, method: str, split: str) -> Path:
        return self.root / _check_name("method", method) / _check_name("split", split)

    def open_writer(
        self,
        method: str,
        split: str,
        *,
        shape,
        dtype,
        chunk_size: int,
        params: dict,
        checkpoint_sha256: str | None,
        dataset_fingerprint: str,
        keep_maps: bool = False,
        force: bool = False,
    ) -> RankWriter:
        """Creates the store, or resumes it when its manifest describes the same ranks.

        Args:
            shape: [N, H, W] or [N, C, H, W] of the whole split.
            dtype: "uint16" or "int32" (or the numpy/torch dtype), as `ops.rank_dtype` picks.
            chunk_size: rows per chunk for a new store (a resumed one keeps its own).
            params: the method's parameters (JSON-able); part of the store's identity.
            checkpoint_sha256: the model's checkpoint hash, or None for model-independent ranks
                (random, oracle, sobel).
            dataset_fingerprint: `Dataset.fingerprint`.
            keep_maps: also store the float16 maps (`write_chunk(..., maps=...)`).
            force: start over even when a store with other parameters or progress exists.

        Raises UserError when a different store exists there (unless `force`) or when another
        process is writing it.
        """
        directory = self.path(method, split)
        if not isinstance(chunk_size, (int, np.integer)) or isinstance(chunk_size, bool) or chunk_size <= 0:
            raise UserError(f"chunk_size must be a positive int, got {chunk_size!r}")
        if not isinstance(dataset_fingerprint, str) or not dataset_fingerprint:
            raise UserError(f"dataset_fingerprint must be a non-empty str, got {dataset_fingerprint!r}")
        if checkpoint_sha256 is not None and (not isinstance(checkpoint_sha256, str) or not checkpoint_sha256):
            raise UserError(f"checkpoint_sha256 must be a non-empty str or None, got {checkpoint_sha256!r}")
        requested = {
            "method": method,
            "split": split,
            "params": json.loads(canonical_json(params)),
            "checkpoint_sha256": checkpoint_sha256,
            "dataset_fingerprint": dataset_fingerprint,
            "shape": list(_check_shape(shape)),
            "dtype": _dtype_name(dtype),
            "maps": bool(keep_maps),
        }
        directory.mkdir(parents=True, exist_ok=True)
        lock_file = self._lock(directory)
        try:
            manifest = None if force else _read_manifest(directory)
            if manifest is not None:
                differences = [
                    f"{key}: stored {_short(manifest.get(key))}, requested {_short(requested[key])}"
                    for key in _IDENTITY
                    if manifest.get(key) != requested[key]
                ]
                if differences:
                    raise UserError(
                        f"{directory} holds other ranks than requested ("
                        + "; ".join(differences)
                        + "); pass --force to start it over"
                    )
                self._check_files(directory, manifest)
            else:
                manifest = self._create(directory, requested, int(chunk_size))
            return RankWriter(directory, manifest, lock_file)
        except BaseException:
            lock_file.close()
            raise

    def _lock(self, directory: Path):
        """An exclusive lock on `directory`, released when the file closes or the process dies."""
        lock_file = open(directory / LOCK, "a")
        try:
            fcntl.flock(lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock_file.close()
            raise UserError(f"{directory} is being written by another writer (lock {directory / LOCK})") from None
        return lock_file

    def _create(self, directory: Path, requested: dict, chunk_size: int) -> dict:
        """Fresh files, then the manifest: a kill before the manifest exists just starts over next time."""
        for name in (MANIFEST, RANKS, MAPS):
            (directory / name).unlink(missing_ok=True)
        shape = tuple(requested["shape"])
        files = [(RANKS, requested["dtype"])] + ([(MAPS, MAPS_DTYPE)] if requested["maps"] else [])
        for name, dtype in files:
            # open_memmap writes the header and sizes the file (sparse); rows come later via pwrite.
            array = np.lib.format.open_memmap(directory / name, mode="w+", dtype=dtype, shape=shape)
            del array
            with open(directory / name, "rb+") as f:
                os.fsync(f.fileno())
        now = _now()
        manifest = {
            "format": FORMAT,
            **requested,
            "chunk_size": chunk_size,
            "chunks_done": [],
            "complete": False,
            "created": now,
            "updated": now,
            "roarfast_version": _version(),
        }
        write_json(directory / MANIFEST, manifest)
        return manifest

    def _check_files(self, directory: Path, manifest: dict) -> None:
        """The .npy files exist with the manifest's shape and dtype."""
        files = [(RANKS, np.dtype(manifest["dtype"]))] + ([(MAPS, np.dtype(MAPS_DTYPE))] if manifest["maps"] else [])
        for name, dtype in files:
            path = directory / name
            try:
                shape, stored_dtype, offset = _npy_header(path)
            except (OSError, ValueError) as e:
                raise UserError(f"{path} is missing or unreadable ({e}); start this store over with --force") from None
            expected_size = offset + int(np.prod(shape)) * stored_dtype.itemsize
            if shape != tuple(manifest["shape"]) or stored_dtype != dtype or path.stat().st_size != expected_size:
                raise UserError(
                    f"{path} holds {stored_dtype} {list(shape)} ({path.stat().st_size} bytes) but the manifest says "
                    f"{dtype} {manifest['shape']} ({expected_size} bytes); start this store over with --force"
                )

    def read(
        self,
        method: str,
        split: str,
        *,
        dataset_fingerprint: str | None = None,
        checkpoint_sha256: str | None = None,
    ) -> RankRecord:
        """The complete store of (method, split), checked against the dataset and checkpoint when given.

        A manifest with checkpoint_sha256 None holds model-independent ranks and matches any checkpoint.
        Raises UserError when the store is missing, incomplete, or made from another dataset or model.
        """
        directory = self.path(method, split)
        manifest = _read_manifest(directory)
        if manifest is None:
            raise UserError(f"no ranks for method {method!r}, split {split!r} in {self.root}; run extract first")
        if not manifest["complete"]:
            raise UserError(
                f"ranks for method {method!r}, split {split!r} are incomplete "
                f"({_done_count(manifest)}/{_num_chunks(manifest)} chunks); rerun extract to resume"
            )
        if dataset_fingerprint is not None and manifest["dataset_fingerprint"] != dataset_fingerprint:
            raise UserError(
                f"ranks in {directory} were made from another dataset: stored fingerprint "
                f"{manifest['dataset_fingerprint']}, current dataset {dataset_fingerprint}"
            )
        stored_checkpoint = manifest["checkpoint_sha256"]
        if checkpoint_sha256 is not None and stored_checkpoint is not None and stored_checkpoint != checkpoint_sha256:
            raise UserError(
                f"ranks in {directory} were made with another model: stored checkpoint sha256 "
                f"{stored_checkpoint}, current checkpoint {checkpoint_sha256}; "
                + _repair(method, self.run_dir, "remakes them for the current model")
            )
        self._check_files(directory, manifest)
        ranks = np.load(directory / RANKS, mmap_mode="r", allow_pickle=False)
        maps = np.load(directory / MAPS, mmap_mode="r", allow_pickle=False) if manifest["maps"] else None
        return RankRecord(method=method, split=split, ranks=ranks, maps=maps, manifest=manifest, directory=directory,
                          run_dir=self.run_dir)

    def _manifests(self):
        """(method, split, manifest) of every store under the root, sorted."""
        if not self.root.is_dir():
            return
        for method_dir in sorted(p for p in self.root.iterdir() if p.is_dir()):
            for split_dir in sorted(p for p in method_dir.iterdir() if p.is_dir()):
                manifest = _read_manifest(split_dir)
                if manifest is not None:
                    yield method_dir.name, split_dir.name, manifest

    def manifest(self, method: str, split: str) -> dict | None:
        """The manifest of (method, split) as stored (complete or not), or None when there is none."""
        return _read_manifest(self.path(method, split))

    def missing(self, methods) -> list[str]:
        """The `methods` whose ranks are not complete in every split, in the given order."""
        complete = set(self.methods())
        return [m for m in methods if m not in complete]

    def methods(self, split: str | None = None) -> list[str]:
        """Methods with complete ranks for `split`; split None: complete for every split in SPLITS."""
        splits = SPLITS if split is None else (_check_name("split", split),)
        complete = {}
        for method, store_split, manifest in self._manifests():
            if store_split in splits and manifest["complete"]:
                complete.setdefault(method, set()).add(store_split)
        return sorted(method for method, done in complete.items() if done == set(splits))

    def status(self) -> list[dict]:
        """One dict per store (method, split, shape, dtype, chunks_done, num_chunks, complete,
        checkpoint_sha256, dataset_fingerprint, updated), for reporting."""
        return [
            {
                "method": method,
                "split": split,
                "shape": manifest["shape"],
                "dtype": manifest["dtype"],
                "chunks_done": _done_count(manifest),
                "num_chunks": _num_chunks(manifest),
                "complete": manifest["complete"],
                "checkpoint_sha256": manifest["checkpoint_sha256"],
                "dataset_fingerprint": manifest["dataset_fingerprint"],
                "updated": manifest["updated"],
            }
            for method, split, manifest in self._manifests()
        ]
