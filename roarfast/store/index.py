"""Rank stores: under one root, `<root>/<method>/<split>/`, or at the places a run directory gives each method
(RunDir.ranks_for: `ranks/<method>/<rank id>/<split>/`): opening a store's writer (new or resumed), reading a
complete one back, and listing what is there (by the full method names the manifests hold: a long name's
directory is bounded, roarfast.records.ranks.dir_name)."""

import fcntl
import json
import os
from pathlib import Path

import numpy as np

from roarfast.common.atomic import open_nofollow, refuse_link
from roarfast.errors import UserError
from roarfast.common.fingerprint import canonical_json
from roarfast.records.access import Records
from roarfast.records.paths import contained, is_name, place
from roarfast.records.ranks import FORMAT, MANIFEST, RankStoreRecord, dir_name, repair_command
from roarfast.store.layout import (
    LOCK,
    MAPS,
    MAPS_DTYPE,
    RANK_DTYPES,
    RANKS,
    SPLITS,
    chunk_count,
    done_count,
    now,
    npy_header,
)
from roarfast.store.record import RankRecord, RowReader
from roarfast.store.writer import RankWriter
from roarfast.version import __version__

# Manifest fields that say what the ranks ARE; any difference means a different store.
_IDENTITY = ("method", "split", "params", "checkpoint_sha256", "dataset_fingerprint", "shape", "dtype", "maps")


def _check_name(kind: str, name) -> str:
    """A method or split name usable as one directory level (roarfast.records.paths.is_name), not hidden."""
    if not is_name(name) or name.startswith("."):
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


class RankStore:
    """The rank stores under `root`, `<root>/<method>/<split>/`; or, given `places` ({method: directory}), the
    stores of those methods alone, `<directory>/<split>/` (a run directory's: RunDir.ranks_for)."""

    def __init__(self, root, run_dir=None, places: dict | None = None):
        self.root = Path(root)
        self.run_dir = run_dir  # named in the repair commands of its messages
        self.places = places
        # each store's manifest is its record, written and read back through the one put and get: a run directory's
        # stores at their places inside the run directory (format 1's included), others inside their root
        inside = run_dir if places is not None and run_dir is not None else self.root
        self.records = Records(inside, run_dir=run_dir)

    def path(self, method: str, split: str) -> Path:
        """The folder of (method, split): inside the root (or the run directory) with no link on the way leading out
        of it (roarfast.records.paths.contained), before anything is made or read there."""
        _check_name("method", method)
        if self.places is None:
            return contained(self.root, place(self.root, dir_name(method), _check_name("split", split)))
        if method not in self.places:
            where = f" --run-dir {self.run_dir}" if self.run_dir is not None else ""
            raise UserError(f"no ranks of {method} in the latest request of {self.run_dir or self.root}: run "
                            f"`roarfast extract --method {method}{where}` first")
        return contained(self.records.root, place(self.places[method], _check_name("split", split)))

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
        # what made the store, as its record type states it (roarfast.records.ranks): what the run directory's
        # verifying get reads its id back from
        made = RankStoreRecord(method, json.loads(canonical_json(params)), checkpoint_sha256,
                               dataset_fingerprint).to_record()
        requested = {
            "method": made.pop("method"),
            "split": split,
            **made,
            "shape": list(_check_shape(shape)),
            "dtype": _dtype_name(dtype),
            "maps": bool(keep_maps),
        }
        directory.mkdir(parents=True, exist_ok=True)
        lock_file = self._lock(directory)
        try:
            for name in (MANIFEST, RANKS, MAPS):  # before a resume reads them: each is written
                refuse_link(directory / name)
            manifest = None if force else self.records.get(RankStoreRecord, at=directory / MANIFEST)
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
            return RankWriter(directory, manifest, lock_file, self.records)
        except BaseException:
            lock_file.close()
            raise

    def _lock(self, directory: Path):
        """An exclusive lock on `directory`, released when the file closes or the process dies (a link at its
        place refused, never followed)."""
        lock_file = os.fdopen(open_nofollow(directory / LOCK, os.O_WRONLY | os.O_CREAT | os.O_APPEND), "a")
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
            _create_npy(directory / name, np.dtype(dtype), shape)
        created = now()
        manifest = {
            "format": FORMAT,
            **requested,
            "chunk_size": chunk_size,
            "chunks_done": [],
            "complete": False,
            "created": created,
            "updated": created,
            "roarfast_version": __version__,
        }
        self.records.put(RankStoreRecord.from_record(manifest), manifest, at=directory / MANIFEST)
        return manifest

    def _check_files(self, directory: Path, manifest: dict) -> None:
        """The .npy files exist with the manifest's shape and dtype."""
        files = [(RANKS, np.dtype(manifest["dtype"]))] + ([(MAPS, np.dtype(MAPS_DTYPE))] if manifest["maps"] else [])
        for name, dtype in files:
            path = directory / name
            try:
                shape, stored_dtype, offset = npy_header(path)
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
        manifest = self.records.get(RankStoreRecord, at=directory / MANIFEST)
        if manifest is None:
            raise UserError(f"no ranks for method {method!r}, split {split!r} in {self.root}; run extract first")
        if not manifest["complete"]:
            raise UserError(
                f"ranks for method {method!r}, split {split!r} are incomplete "
                f"({done_count(manifest)}/{chunk_count(manifest)} chunks); rerun extract to resume"
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
                + repair_command(method, self.run_dir, "remakes them for the current model")
            )
        self._check_files(directory, manifest)
        # rows read by pread as they are asked for (RowReader), nothing mapped: a cell's memory stays its batches'
        return RankRecord(method=method, split=split, reader=RowReader(directory / RANKS), manifest=manifest,
                          directory=directory, run_dir=self.run_dir)

    def _manifests(self):
        """(method, split, manifest) of every store under the root, sorted; the method is the full name its
        manifest holds, which is its folder's (RankStoreRecord.read refuses one that is not)."""
        if self.places is not None:
            for method in sorted(self.places):
                for split in SPLITS:
                    manifest = self.records.get(RankStoreRecord, at=self.path(method, split) / MANIFEST)
                    if manifest is not None:
                        yield method, split, manifest
            return
        if not self.root.is_dir():
            return
        for method_dir in sorted(p for p in self.root.iterdir() if p.is_dir()):
            for split_dir in sorted(p for p in method_dir.iterdir() if p.is_dir()):
                manifest = self.records.get(RankStoreRecord, at=split_dir / MANIFEST)
                if manifest is not None:
                    yield manifest["method"], split_dir.name, manifest

    def incomplete(self, methods, splits) -> list[str]:
        """The `methods` whose store is missing or incomplete in one of `splits`: what an extraction would make."""
        return [m for m in methods if any((self.manifest(m, split) or {}).get("complete") is not True
                                          for split in splits)]

    def manifest(self, method: str, split: str) -> dict | None:
        """The manifest of (method, split) as stored (complete or not), or None when there is none (or no place
        for the method)."""
        if self.places is not None and method not in self.places:
            return None
        return self.records.get(RankStoreRecord, at=self.path(method, split) / MANIFEST)

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
                "chunks_done": done_count(manifest),
                "num_chunks": chunk_count(manifest),
                "complete": manifest["complete"],
                "checkpoint_sha256": manifest["checkpoint_sha256"],
                "dataset_fingerprint": manifest["dataset_fingerprint"],
                "updated": manifest["updated"],
            }
            for method, split, manifest in self._manifests()
        ]


def _create_npy(path: Path, dtype: np.dtype, shape: tuple) -> None:
    """A new .npy file of `shape` and `dtype`: its header, then sized (sparse: rows come later via pwrite).
    Opened exclusively without following links, so a link planted at `path` after the unlink is refused, never
    written through (numpy's open_memmap would open it by name)."""
    fd = open_nofollow(path, os.O_RDWR | os.O_CREAT | os.O_EXCL)
    with os.fdopen(fd, "wb") as f:
        np.lib.format.write_array_header_1_0(f, {"descr": np.lib.format.dtype_to_descr(dtype),
                                                 "fortran_order": False, "shape": tuple(shape)})
        f.truncate(f.tell() + int(np.prod(shape, dtype=np.int64)) * dtype.itemsize)
        f.flush()
        os.fsync(f.fileno())
