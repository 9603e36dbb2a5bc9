"""A complete rank store read back (RankRecord), and the integrity check of every read.

Every read of rank rows goes through RankRecord.rows (or .verify, for a reader of `reader`), which checks each
chunk it touches once per record: its checksum, and that every rank lies in [0, units) (units = H*W pixels, or
C*H*W values). A chunk that fails names the file, the chunk and the repair (`roarfast extract --force`). Chunks
written before checksums existed have none: their range is checked and a note says, once, that they are not
otherwise verified.

Rows are read from the file with os.pread, the rows asked for and no more (RowReader), never through a memory map:
a map's pages count in the process's resident memory once touched and stay there until memory runs short, so a
cell that read its ranks through one held about as many bytes as the store (2 bytes a pixel a training image at
224 px: 128 GB at ImageNet's size). A reader holds no file open between reads and nothing mapped: a record kept by
a long-lived worker costs its manifest alone. `ranks` (and `maps`) map the file for those who ask for the whole
array.
"""

import logging
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from roarfast.errors import UserError
from roarfast.records.ranks import repair_command
from roarfast.store.layout import MAPS, RANKS, chunk_hasher, npy_header

log = logging.getLogger(__name__)

#: rows a chunk's check reads at a time (its checksum fed piece by piece): a check holds this many rows, whatever
#: the store's chunk size (512 by default, --chunk-images any; 49 MiB for 512 rows at 224 px)
VERIFY_ROWS = 64
#: stores whose chunks without checksums were noted in this process (the note is said once)
_NOTED_UNVERIFIED = set()


class RowReader:
    """The rows of a C-order .npy array on disk, read by os.pread as they are indexed: `reader[i]` one row
    (ndarray[...]), `reader[index]` (an int sequence, array or slice) those rows stacked, in the order given.
    Array-like enough for the loaders: `shape`, `dtype`, `ndim`, len()."""

    def __init__(self, path: Path):
        self.path = Path(path)
        shape, self.dtype, self.offset = npy_header(self.path)
        self.shape = tuple(shape)
        self.ndim = len(self.shape)
        self.row_bytes = int(np.prod(self.shape[1:], dtype=np.int64)) * self.dtype.itemsize

    def __len__(self) -> int:
        return self.shape[0]

    def __getitem__(self, index) -> np.ndarray:
        if isinstance(index, (int, np.integer)):
            return self.take([int(index)])[0]
        if isinstance(index, slice):
            start, stop, step = index.indices(self.shape[0])
            if step == 1:
                return self.span(start, stop)
            index = range(start, stop, step)
        return self.take(index)

    def span(self, start: int, stop: int) -> np.ndarray:
        """Rows start..stop-1 in one read."""
        count = max(0, stop - start)
        out = np.empty((count, *self.shape[1:]), dtype=self.dtype)
        with open(self.path, "rb", buffering=0) as f:
            self._read_into(f.fileno(), out, start)
        return out

    def take(self, index) -> np.ndarray:
        """The rows `index` (ints in [-N, N)), stacked in that order; a run of consecutive rows is one read."""
        rows = np.asarray(index, dtype=np.int64).reshape(-1)
        n = self.shape[0]
        if rows.size and (rows.min() < -n or rows.max() >= n):
            raise IndexError(f"rows out of range for {n} rows of {self.path}")
        rows = np.where(rows < 0, rows + n, rows)
        out = np.empty((rows.size, *self.shape[1:]), dtype=self.dtype)
        if not rows.size:
            return out
        breaks = np.flatnonzero(np.diff(rows) != 1) + 1
        with open(self.path, "rb", buffering=0) as f:
            for part, at in zip(np.split(np.arange(rows.size), breaks), np.r_[0, breaks]):
                self._read_into(f.fileno(), out[at:at + part.size], int(rows[at]))
        return out

    def _read_into(self, fd: int, out: np.ndarray, start: int) -> None:
        view = memoryview(out.reshape(-1).view(np.uint8))
        done, position = 0, self.offset + start * self.row_bytes
        while done < len(view):
            got = os.preadv(fd, [view[done:]], position + done)
            if got <= 0:
                raise UserError(f"{self.path} ends before row {start + (done // max(1, self.row_bytes))}: the file is "
                                f"shorter than its header says")
            done += got


@dataclass
class RankRecord:
    """A complete store, read back.

    `reader` (a RowReader of `ranks.npy`, [N, H, W] or [N, C, H, W], uint16|int32): read it through `rows` (or
    call `verify` first), which check the chunks they touch; `shape` and `dtype` are its; `ranks` maps the whole
    file read-only at each access (for callers that want the array itself; unverified, like any reader of the
    map); `maps` likewise (float16, not verified: pictures only) or None; `manifest` the manifest dict;
    `directory` the store's folder.
    """

    method: str
    split: str
    reader: RowReader
    manifest: dict
    directory: Path | None = None
    run_dir: Path | None = None  # named in the repair command of a failed check
    _verified: set = field(default_factory=set, repr=False)

    @property
    def shape(self) -> tuple:
        return self.reader.shape

    @property
    def dtype(self) -> np.dtype:
        return self.reader.dtype

    @property
    def maps(self) -> np.ndarray | None:
        """The float16 maps as a read-only memory map (mapped at each access), or None where none were kept."""
        if not self.manifest["maps"]:
            return None
        return np.load(self.reader.path.parent / MAPS, mmap_mode="r", allow_pickle=False)

    @property
    def ranks(self) -> np.ndarray:
        """The whole array as a read-only memory map (mapped at each access: nothing stays mapped by the record)."""
        return np.load(self.reader.path, mmap_mode="r", allow_pickle=False)

    def tensor(self):
        """All ranks of the split as a CPU Tensor[N, ...] (read into memory, every chunk verified)."""
        return self.rows()

    def rows(self, index=None):
        """Ranks of the rows `index` (None = all; int, slice, or int sequence/array/Tensor) as a CPU Tensor,
        after `verify(index)`: read from the file, those rows alone."""
        if index is None:
            index = slice(None)
        elif hasattr(index, "detach"):
            index = index.detach().cpu().numpy()
        self.verify(index)
        return torch.from_numpy(self.reader[index])

    def verify(self, index=None) -> None:
        """Checks every chunk holding a row of `index` (None = all; as `rows` takes it) not checked yet:
        its checksum where one was recorded, and that each rank lies in [0, units). Raises UserError
        naming the file, the chunk and the repair. Reads one chunk at a time."""
        n, size = self.shape[0], self.manifest["chunk_size"]
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
        """Checks chunk `chunk`, VERIFY_ROWS rows read at a time: its checksum fed piece by piece, each piece's ranks
        in range."""
        size = self.manifest["chunk_size"]
        start, stop = chunk * size, min(self.shape[0], (chunk + 1) * size)
        path = (self.directory or Path(".")) / RANKS
        repair = repair_command(self.method, self.run_dir)
        expected = (self.manifest.get("checksums") or [None] * (chunk + 1))[chunk]
        hasher, out_of_range = chunk_hasher(), None
        for first in range(start, stop, VERIFY_ROWS):
            rows = self.reader.span(first, min(stop, first + VERIFY_ROWS))
            hasher.update(rows)
            out_of_range = out_of_range or _out_of_range(rows, first, chunk, path, repair)
        if expected is None:
            if path not in _NOTED_UNVERIFIED:
                _NOTED_UNVERIFIED.add(path)
                log.warning("note: %s was written before rank checksums: only its ranks' range is checked; %s", path,
                            repair_command(self.method, self.run_dir, "rewrites it with checksums"))
        elif hasher.hexdigest() != expected:
            raise UserError(f"{path}: chunk {chunk} (rows {start}-{stop - 1}) does not match the checksum recorded "
                            f"when it was written (the file changed on disk); {repair}")
        if out_of_range:  # after the checksum: a file changed on disk is said as such first
            raise UserError(out_of_range)


def _out_of_range(rows: np.ndarray, first: int, chunk: int, path: Path, repair: str) -> str | None:
    """What is wrong with `rows` (row `first` on, of chunk `chunk`) where one holds a rank outside [0, units)."""
    units = int(np.prod(rows.shape[1:]))
    # one reduction over the rows; the row is looked for only once they failed
    if rows.max() >= units or (rows.dtype.kind == "i" and rows.min() < 0):
        flat = rows.reshape(rows.shape[0], -1)
        row = int(np.argmax((flat.max(axis=1) >= units) | (flat.min(axis=1) < 0)))
        return (f"{path}: row {first + row} (chunk {chunk}) holds ranks outside [0, {units}) (max "
                f"{int(flat[row].max())}): the file is damaged; {repair}")
    return None
