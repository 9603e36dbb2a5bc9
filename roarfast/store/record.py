"""A complete rank store read back (RankRecord), and the integrity check of every read.

Every read of rank rows goes through RankRecord.rows (or .verify, for a reader of the memory map), which
checks each chunk it touches once per record: its checksum, and that every rank lies in [0, units) (units =
H*W pixels, or C*H*W values). A chunk that fails names the file, the chunk and the repair (`roarfast
extract --force`). Chunks written before checksums existed have none: their range is checked and a note
says, once, that they are not otherwise verified.
"""

import logging
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from roarfast.errors import UserError
from roarfast.store.layout import RANKS, chunk_checksum, repair_command

log = logging.getLogger(__name__)

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
        repair = repair_command(self.method, self.run_dir)
        expected = (self.manifest.get("checksums") or [None] * (chunk + 1))[chunk]
        if expected is None:
            if path not in _NOTED_UNVERIFIED:
                _NOTED_UNVERIFIED.add(path)
                log.warning("note: %s was written before rank checksums: only its ranks' range is checked; %s", path,
                            repair_command(self.method, self.run_dir, "rewrites it with checksums"))
        elif chunk_checksum(np.ascontiguousarray(rows)) != expected:
            raise UserError(f"{path}: chunk {chunk} (rows {start}-{start + rows.shape[0] - 1}) does not match the "
                            f"checksum recorded when it was written (the file changed on disk); {repair}")
        units = int(np.prod(rows.shape[1:]))
        # one reduction over the chunk; the row is looked for only once the chunk failed
        if rows.max() >= units or (rows.dtype.kind == "i" and rows.min() < 0):
            flat = rows.reshape(rows.shape[0], -1)
            row = int(np.argmax((flat.max(axis=1) >= units) | (flat.min(axis=1) < 0)))
            raise UserError(f"{path}: row {start + row} (chunk {chunk}) holds ranks outside [0, {units}) (max "
                            f"{int(flat[row].max())}): the file is damaged; {repair}")
