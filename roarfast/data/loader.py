"""Batches from a split held on the device as uint8: no DataLoader and no per-sample Python.

A batch is an index gather of uint8 images, then (optionally) ROAR/KAR masking fused with normalization
(ops.mask_normalize), then augmentation as one more gather (random translate with zero padding, which is
the dataset mean after normalization, and random horizontal flip). Masking comes before augmentation:
ranks are aligned with the unaugmented canvas the attributions were computed on.

`split_loader` picks the loader of a split: this one for images in memory, the StreamLoader
(roarfast.data.stream) for a tree streamed from disk; both yield the same batches.
"""

import torch

from roarfast import ops
from roarfast.data.augment import Augment, augment  # noqa: F401  (Augment: part of the loader's API)
from roarfast.data.base import FileSet
from roarfast.data.stream import StreamLoader
from roarfast.fills import resolve_fill

#: share of free GPU memory a split's uint8 images may take to live on the device; beyond it they stay in
#: pinned host memory and each batch is gathered there and copied over
DEVICE_RESIDENT_SHARE = 0.25
#: a split held on its device whose masked, normalized copy takes at most this many bytes is prepared once,
#: when the loader is made, and every batch indexes that copy: an epoch, and each val pass, then reads it
#: instead of masking again (the embedded run's cells: 3 epochs, masking 16,000 images -> 6,000)
PREPARED_MAX_BYTES = 512 * 2**20
#: images per call when a split is prepared once by a fill that sets no chunk of its own
PREPARED_CHUNK = 4096


class DeviceLoader:
    """One split on `device`: uint8 images, labels and (for masked retraining) ranks.

    Args:
        images (Tensor[N, C, H, W]): uint8. labels (Tensor[N]): int64.
        mean, std: per channel in [0, 1] pixel space.
        ranks (Tensor[N, H, W] or Tensor[N, C, H, W], the RankRecord holding them, or None): per-image ranks
            from the rank store; None = no masking. A RankRecord is read whole, unless `rows_per_batch`: then
            each batch reads its own rows from the store (a streamed dataset's mask-only control, whose
            canvases are one white image: its memory stays that of a batch, whatever the split's size).
        fraction: share of units removed (keep=False, ROAR) or kept (keep=True, KAR).
        fill: what replaces the removed units: a Fill, a fill's name (roarfast.fills.FILLS), per-channel values
            in the normalized space, or None (the dataset mean).
        out_dtype, channels_last: what the model takes (bf16 / channels_last on a GPU).

    The split is masked and normalized once, here, when its fill asks for it (whole_split_chunk: road's
    imputation) or when the prepared copy is small (PREPARED_MAX_BYTES, images on their device); otherwise
    each batch as it is gathered. Either way a batch holds the same values: a unit's fill is keyed by its
    image's index, never by the batch.
    """

    def __init__(self, images, labels, mean, std, device, *, ranks=None, fraction: float = 0.0, keep: bool = False,
                 fill=None, out_dtype=torch.float32, channels_last: bool = False, rows_per_batch: bool = False):
        self.record = ranks if rows_per_batch and ranks is not None and not isinstance(ranks, torch.Tensor) else None
        if ranks is not None and not isinstance(ranks, torch.Tensor) and self.record is None:
            ranks = ranks.tensor()
        if ranks is not None and (ranks.shape[0] != images.shape[0] or ranks.shape[-2:] != images.shape[-2:]):
            raise ValueError(f"ranks should be Tensor[{images.shape[0]}, {images.shape[2]}, {images.shape[3]}] "
                             f"(or with channels) aligned with the images, got {tuple(ranks.shape)}")
        self.device = torch.device(device)
        self.images = _resident(images, self.device)
        self.labels = labels.to(self.device)
        self.ranks = ranks.to(self.device) if ranks is not None and self.record is None else None
        self.fraction = fraction
        self.keep = keep
        self.fill = resolve_fill(fill)
        self.mean = tuple(float(m) for m in mean)
        self.std = tuple(float(s) for s in std)
        self.out_dtype = out_dtype
        self.channels_last = channels_last
        self.prepared = self._prepare_split() if self._prepare_once() else None

    def __len__(self) -> int:
        return self.images.shape[0]

    def gather(self, index: torch.Tensor) -> torch.Tensor:
        """Masked, normalized images at `index` (int64 Tensor[B]) -> Tensor[B, C, H, W] of out_dtype."""
        memory_format = torch.channels_last if self.channels_last else torch.contiguous_format
        if self.prepared is not None:
            return self.prepared[index].contiguous(memory_format=memory_format)
        images = self.images[index.to(self.images.device)].to(self.device, non_blocking=True)
        return self._prepare(images, index)

    def _prepare(self, images: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        """uint8 `images` (those at `index`, on the device) masked by their ranks, filled and normalized."""
        if self.record is not None:  # this batch's rows, read (and verified) from the store
            rows = self.record.rows(index).to(self.device, non_blocking=True)
            return self.fill.apply(images, rows, self.fraction, self.keep, mean=self.mean, std=self.std, ids=index,
                                   out_dtype=self.out_dtype, channels_last=self.channels_last)
        if self.ranks is None:
            return ops.mask_normalize(images, None, mean=self.mean, std=self.std, out_dtype=self.out_dtype,
                                      channels_last=self.channels_last)
        return self.fill.apply(images, ops.rank_rows(self.ranks, index), self.fraction, self.keep, mean=self.mean,
                               std=self.std, ids=index, out_dtype=self.out_dtype, channels_last=self.channels_last)

    def _prepare_once(self) -> bool:
        """Whether the whole split is prepared here: its fill asks for it (a fill that costs more than a copy,
        like road's solve: once per image and fraction, not once per epoch), or the copy is small and the
        images are on their device (not in pinned host memory for want of room there)."""
        if len(self) == 0 or self.record is not None:
            return False
        if self.ranks is not None and self.fill.whole_split_chunk is not None:
            return True
        itemsize = torch.empty((), dtype=self.out_dtype).element_size()
        return self.images.device == self.device and self.images.numel() * itemsize <= PREPARED_MAX_BYTES

    def _prepare_split(self) -> torch.Tensor:
        """The whole split prepared (_prepare), on the device, in the loader's memory format, a chunk of
        images a call (the fill's whole_split_chunk, else PREPARED_CHUNK)."""
        chunk = (self.fill.whole_split_chunk if self.ranks is not None else None) or PREPARED_CHUNK
        parts = []
        for start in range(0, len(self), chunk):
            rows = torch.arange(start, min(len(self), start + chunk), device=self.device)
            parts.append(self._prepare(self.images[start:start + chunk].to(self.device), rows))
        return torch.cat(parts) if len(parts) > 1 else parts[0]

    def batches(self, index: torch.Tensor, batch_size: int, *, shuffle: bool = False, augment_spec=None,
                generator: torch.Generator | None = None, drop_last: bool = False, shard: tuple[int, int] = (0, 1),
                with_index: bool = False):
        """Yields (x (Tensor[B, C, H, W]), y (int64 Tensor[B])) over the samples `index` (int64 Tensor[M]),
        shuffled and augmented with `generator` (on this loader's device) when asked, plus the sample
        indices (int64 Tensor[B]) when with_index.

        shard (rank, world size): data-parallel ranks with equally seeded generators shuffle alike and each
        take every world-th row of a batch of `batch_size`.
        """
        rank, world = shard
        index = index.to(self.device)
        if shuffle:
            index = index[torch.randperm(index.shape[0], generator=generator, device=self.device)]
        stop = index.shape[0] - (index.shape[0] % batch_size if drop_last else 0)
        memory_format = torch.channels_last if self.channels_last else torch.contiguous_format
        for start in range(0, stop, batch_size):
            rows = index[start:start + batch_size][rank::world]
            x = self.gather(rows)
            if augment_spec is not None:
                x = augment(x, augment_spec, generator).contiguous(memory_format=memory_format)
            yield (x, self.labels[rows], rows) if with_index else (x, self.labels[rows])


def _resident(images: torch.Tensor, device: torch.device) -> torch.Tensor:
    """images on `device`; on a GPU with too little free memory, in pinned host memory instead."""
    if device.type != "cuda" or images.device == device:
        return images.to(device)
    free, _ = torch.cuda.mem_get_info(device)
    if images.numel() * images.element_size() <= DEVICE_RESIDENT_SHARE * free:
        return images.to(device)
    return images.pin_memory()


def split_loader(ds, split: str, device, *, ranks=None, **options):
    """The loader of `split` of dataset ds on device: DeviceLoader for images in memory, StreamLoader for a
    streamed FileSet. ranks: Tensor, RankRecord (a StreamLoader reads its memory map row by row, a
    DeviceLoader reads it whole) or None; options: fraction, keep, fill, out_dtype, channels_last."""
    part = ds.split(split)
    if isinstance(part, FileSet):
        return StreamLoader(part, ds.mean, ds.std, device, ranks=ranks, **options)
    return DeviceLoader(part.images, part.labels, ds.mean, ds.std, device, ranks=ranks, **options)


def pattern_loader(ds, split: str, device, *, ranks, fraction: float, keep: bool = False, **options) -> DeviceLoader:
    """The mask-only control of a ROAR/KAR cell: every image of `split` is its removal pattern alone, 1
    where a unit is kept and -1 where it is replaced (the same mask kernel on a constant white canvas, no
    file decoded), so a model trained on it measures how much the pattern tells about the class.
    ranks: Tensor or RankRecord (a streamed split's read a batch's rows at a time); options: out_dtype,
    channels_last."""
    part = ds.split(split)
    c, h, w = part.shape
    device = torch.device(device)
    white = torch.full((1, c, h, w), 255, dtype=torch.uint8, device=device).expand(len(part), c, h, w)
    # (255/255 - 0.5) / 0.5 = 1 where kept; the fill, -1, where replaced
    return DeviceLoader(white, part.labels, (0.5,) * c, (0.5,) * c, device, ranks=ranks, fraction=fraction, keep=keep,
                        fill=(-1.0,) * c, rows_per_batch=isinstance(part, FileSet), **options)
