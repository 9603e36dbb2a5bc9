"""Batches streamed from a JPEG tree too large for memory (a FileSet from load_imagefolder): DALI (or,
without it, the CPU decoder: roarfast.data.decode) decodes each batch to the evaluation canvas
(resize-shorter + center crop), then ROAR/KAR masking (the fill's `apply`, per batch for every fill:
ops.mask_normalize for a constant, road's imputation) and augmentation as in DeviceLoader. Rank rows are
verified (RankRecord.verify) before a batch reads them.

Alignment: the per-sample source of roarfast.data.dali maps DALI's `sample_info.idx_in_epoch` to a
sample index i of the split (from an order planned on our side, shuffled like DeviceLoader shuffles)
and returns file i's encoded bytes, i itself and ranks row i together, so image, label and ranks of a
sample cannot part. The split's sample i is the i-th file in ImageFolder order, as in load_imagefolder
and the rank store.
"""

import os
from pathlib import Path

import numpy as np
import torch

from roarfast import ops
from roarfast.data.augment import augment
from roarfast.data.base import FileSet
from roarfast.data.decode import DALI, canvas_batches
from roarfast.fills import resolve_fill

#: images the decoder takes at a time: a larger batch (an evaluation's, up to 512 on a CPU) is made first and each
#: piece of this many decoded, masked and copied into it, so the decoder's buffers (which grow with the images it
#: takes at once: DALI's CPU pipeline held about 1 MiB an image at 224 px) stay those of a piece whatever the batch
#: (benchmarks/RESULTS.md, "Memory per worker"); the batch is the same tensor
DECODE_BATCH = 16


class StreamLoader:
    """One streamed split, decoded batch by batch (DALI; the mixed GPU decoder when `device` is CUDA, a
    CPU pipeline otherwise).

    Args:
        files (FileSet): the split (load_imagefolder(..., stream=True)); its canvas options decide the decode.
        mean, std: per channel in [0, 1] pixel space.
        ranks (RankRecord, or ndarray/Tensor[N, H, W] or [N, C, H, W], or None): ranks of the split, row i =
            sample i; read one row per sample (a RankRecord's rows by pread, as each batch needs them: nothing of
            the store stays in memory). None = no masking.
        fraction, keep, fill, out_dtype, channels_last: as for DeviceLoader.
        num_threads: DALI CPU threads (default: all cores).
    """

    def __init__(self, files: FileSet, mean, std, device, *, ranks=None, fraction: float = 0.0, keep: bool = False,
                 fill=None, out_dtype=torch.float32, channels_last: bool = False, num_threads: int | None = None):
        if not isinstance(files, FileSet):
            raise ValueError(f"files should be a FileSet (a streamed split), got {type(files).__name__}")
        self.split_dir = Path(files.root)
        self.files = files.files
        self.classes = files.classes
        self.resize, self.crop, self.decoder = files.canvas["resize"], files.canvas["crop"], files.canvas["decoder"]
        self.ranks = None if ranks is None else self._check_ranks(ranks, self.crop)
        # a RankRecord's rows are verified (checksums, range) before a batch reads them from its file
        self.record = ranks if callable(getattr(ranks, "verify", None)) else None
        self.device = torch.device(device)
        self.labels = files.labels.to(self.device)
        self.fraction, self.keep = fraction, keep
        self.fill = resolve_fill(fill)
        self.mean = tuple(float(m) for m in mean)
        self.std = tuple(float(s) for s in std)
        self.out_dtype, self.channels_last = out_dtype, channels_last
        self.num_threads = num_threads or os.cpu_count() or 1

    def _check_ranks(self, ranks, crop: int) -> np.ndarray:
        """ranks as a numpy array, or a record's RowReader (rows read from its file as a batch asks for them),
        after checking it matches the split's files."""
        record = callable(getattr(ranks, "verify", None))  # a rank store's record (roarfast.store.RankRecord)
        source = f"ranks of {ranks.method!r}/{ranks.split!r}" if record else "ranks"
        array = ranks.reader if record else ranks
        if isinstance(array, torch.Tensor):
            array = array.detach().cpu().numpy()
        if not (isinstance(array, np.ndarray) or record):
            raise ValueError(f"ranks should be a RankRecord, numpy array or Tensor, got {type(ranks).__name__}")
        n = len(self.files)
        if array.ndim not in (3, 4) or array.shape[0] != n or array.shape[-2:] != (crop, crop) or (
                array.ndim == 4 and array.shape[1] != 3):
            raise ValueError(f"{source} should be [{n}, {crop}, {crop}] or [{n}, 3, {crop}, {crop}] (one row per "
                             f"image of {self.split_dir}, on the {crop}x{crop} canvas), got {list(array.shape)}")
        return array

    def __len__(self) -> int:
        return len(self.files)

    def batches(self, index: torch.Tensor, batch_size: int, *, shuffle: bool = False, augment_spec=None,
                generator: torch.Generator | None = None, drop_last: bool = False, shard: tuple[int, int] = (0, 1),
                with_index: bool = False):
        """Yields (x (Tensor[B, C, H, W]), y (int64 Tensor[B])) over the samples `index` (int64 Tensor[M]) as
        DeviceLoader.batches does (same order and augmentation for the same generator state), plus the
        sample indices (int64 Tensor[B]) when with_index. Only this shard's rows are decoded."""
        rank, world = shard
        index = index.to(self.device)
        if shuffle:
            index = index[torch.randperm(index.shape[0], generator=generator, device=self.device)]
        stop = index.shape[0] - (index.shape[0] % batch_size if drop_last else 0)
        order = index[:stop].cpu().numpy()
        if self.record is not None:
            self.record.verify(order)  # once per chunk: later epochs find them verified
        plan = [order[start:start + batch_size][rank::world] for start in range(0, stop, batch_size)]
        device_id = None if self.device.type == "cpu" or self.decoder != DALI else (
            torch.cuda.current_device() if self.device.index is None else self.device.index)
        memory_format = torch.channels_last if self.channels_last else torch.contiguous_format
        pieces = [rows[start:start + DECODE_BATCH] for rows in plan for start in range(0, len(rows), DECODE_BATCH)]
        decoded = canvas_batches(self.decoder, self.split_dir, self.files, pieces, self.resize, self.crop, device_id,
                                 ranks=self.ranks, num_threads=self.num_threads)
        for rows in plan:
            if len(rows) <= DECODE_BATCH:
                x, index = self._masked(next(decoded))
            else:  # made first, each piece copied in as it comes: the batch and one piece at a time, no more
                x = torch.empty((len(rows), len(self.mean), self.crop, self.crop), dtype=self.out_dtype,
                                device=self.device).contiguous(memory_format=memory_format)
                index = torch.as_tensor(rows, device=self.device)
                for start in range(0, len(rows), DECODE_BATCH):
                    piece, _ = self._masked(next(decoded))
                    x[start:start + len(piece)] = piece
                    del piece
            if augment_spec is not None:
                x = augment(x, augment_spec, generator).contiguous(memory_format=memory_format)
            yield (x, self.labels[index], index) if with_index else (x, self.labels[index])
            del x  # this frame's hold on the batch: the next is made while the caller may already have let go
        decoded.close()

    def _masked(self, batch: dict) -> tuple:
        """(x, sample indices) of one decoded piece (canvas_batches' dict), masked and normalized; x is new memory,
        so the decoder may reuse its buffers for the next piece."""
        images = batch["images"].to(self.device, non_blocking=True)
        rows = batch["index"].to(self.device, non_blocking=True).clone()  # the decoder's buffer: refilled next piece
        ranks = batch["ranks"].to(self.device, non_blocking=True) if self.ranks is not None else None
        if ranks is None:
            x = ops.mask_normalize(images, None, mean=self.mean, std=self.std, out_dtype=self.out_dtype,
                                   channels_last=self.channels_last)
        else:  # filled per piece, whatever the fill draws keyed by the sample (rows): alike every epoch and batch
            x = self.fill.apply(images, ranks, self.fraction, self.keep, mean=self.mean, std=self.std, ids=rows,
                                out_dtype=self.out_dtype, channels_last=self.channels_last)
        return x, rows
