"""The writer of one rank store: chunk by chunk, in any order, resumable.

Durability: a chunk's bytes are written with pwrite and fdatasync'ed before the manifest marks it done, and
the manifest is replaced atomically, so a kill at any point leaves a store that resumes with every chunk the
manifest calls done intact.
"""

import os
from pathlib import Path

import numpy as np

from roarfast.common.atomic import open_nofollow
from roarfast.errors import UserError, write_error
from roarfast.records.ranks import MANIFEST, RankStoreRecord
from roarfast.store.layout import (
    CHECKSUM,
    MAPS,
    MAPS_DTYPE,
    RANKS,
    chunk_checksum,
    chunk_count,
    done_count,
    now,
    npy_header,
    ranges_add,
    ranges_contain,
)


def _as_numpy(array, name: str) -> np.ndarray:
    """A CPU numpy view (or copy) of a torch tensor or numpy array."""
    if isinstance(array, np.ndarray):
        return array
    if hasattr(array, "detach"):
        array = array.detach().cpu()
        # numpy has no bfloat16; such maps are widened here and stored as float16 anyway.
        return (array.float() if str(array.dtype) == "torch.bfloat16" else array).numpy()
    raise UserError(f"{name} must be a torch.Tensor or numpy.ndarray, got {type(array).__name__}")


class RankWriter:
    """Writes one (method, split) store chunk by chunk; get one from `RankStore.open_writer`.

    Chunk i holds rows [i * chunk_size, min((i + 1) * chunk_size, N)). Chunks may be written in any
    order; `pending_chunks()` lists those not yet durable. Holds an exclusive lock on the store
    directory until `close()` (or until the process dies).
    """

    def __init__(self, directory: Path, manifest: dict, lock_file, records):
        self.directory = directory
        self.manifest = manifest
        self._lock_file = lock_file
        self._ranks_fd = self._maps_fd = None
        self._maps_offset = 0
        # the manifest is the store's record: replaced through the one put of `records` (its RankStore's)
        self.records = records
        self.record = RankStoreRecord.from_record(manifest)
        # the arrays are written in place: a link planted at their place is refused, its target never opened
        self._ranks_fd = open_nofollow(directory / RANKS, os.O_RDWR)
        self._ranks_offset = npy_header(directory / RANKS)[2]
        if manifest["maps"]:
            self._maps_fd = open_nofollow(directory / MAPS, os.O_RDWR)
            self._maps_offset = npy_header(directory / MAPS)[2]

    @property
    def shape(self) -> tuple:
        return tuple(self.manifest["shape"])

    @property
    def chunk_size(self) -> int:
        """Rows per chunk; a resumed store keeps the chunk size it was started with."""
        return self.manifest["chunk_size"]

    @property
    def num_chunks(self) -> int:
        return chunk_count(self.manifest)

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
        return [i for i in range(self.num_chunks) if not ranges_contain(done, i)]

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
        self.manifest["chunks_done"] = ranges_add(self.manifest["chunks_done"], int(chunk))
        self.manifest["complete"] = done_count(self.manifest) == self.num_chunks
        self.manifest["updated"] = now()
        try:
            self.records.put(self.record, self.manifest, at=self.directory / MANIFEST)
        except OSError as err:
            raise write_error(err, self.directory / MANIFEST, "the chunks it lists as done are intact; rerun "
                                                              "to resume") from None

    def _write_rows(self, fd: int, offset: int, start: int, rows: np.ndarray, name: str) -> str:
        """pwrite `rows` at row `start` of the array `name` and wait until they are on disk; returns the
        checksum of the bytes written."""
        data = memoryview(np.ascontiguousarray(rows)).cast("B")  # the array's own bytes: a chunk is not copied
        row_bytes = len(data) // rows.shape[0]
        position = offset + start * row_bytes
        view = data
        try:
            while view:
                written = os.pwrite(fd, view, position)
                view, position = view[written:], position + written
            os.fdatasync(fd)
        except OSError as err:
            raise write_error(err, self.directory / name, "the chunks written before are intact; rerun to "
                                                          "resume") from None
        return chunk_checksum(data)

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
