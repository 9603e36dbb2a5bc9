"""The DALI pipeline behind every JPEG read: loading a tree into memory, measuring a streamed one, and
the StreamLoader's batches.

Files are read by a per-sample `fn.external_source` callback rather than DALI's file reader, so that a
batch is any planned list of sample indices (shuffled, sharded) and one sample's file bytes, its index,
its rank row and, when asked, the sha256 of its bytes travel together and cannot part. The canvas is
the deterministic evaluation canvas: shorter side resized to `resize`, center crop `crop` x `crop`.
"""

import hashlib
import os
from pathlib import Path

import numpy as np
import torch

from roarfast.data.headers import read_checked


def decode_canvas(encoded, resize: int, crop: int, device_id):
    """DALI graph (call inside a pipeline definition): encoded image files (uint8 buffers) -> the uint8
    [3, crop, crop] canvas, decoded on the CPU (device_id None) or by the mixed GPU decoder."""
    from nvidia.dali import fn, types

    images = fn.decoders.image(encoded, device="cpu" if device_id is None else "mixed", output_type=types.RGB)
    images = fn.resize(images, resize_shorter=resize, interp_type=types.INTERP_LINEAR, antialias=True)
    # crop_mirror_normalize with the default mean 0 / std 1: a center crop to CHW, kept uint8
    return fn.crop_mirror_normalize(images, crop=(crop, crop), crop_pos_x=0.5, crop_pos_y=0.5, dtype=types.UINT8,
                                    output_layout="CHW")


class FileSource:
    """Per-sample source: epoch position p = t * width + j is row j of planned batch t; a short batch is
    padded with its first sample (the padding is cut off after DALI). Outputs per sample: the file's
    bytes, its index i, then ranks row i (when ranks) and the sha256 of the bytes (when with_digest)."""

    def __init__(self, split_dir: Path, files: list[str], plan: list[np.ndarray], width: int, ranks=None,
                 with_digest: bool = False):
        self.split_dir = Path(split_dir)
        self.files = files
        self.plan = plan
        self.width = width
        self.ranks = ranks
        self.with_digest = with_digest

    def __call__(self, sample_info):
        t, j = divmod(sample_info.idx_in_epoch, self.width)
        if t >= len(self.plan):
            raise StopIteration
        rows = self.plan[t]
        i = int(rows[j] if j < len(rows) else rows[0])
        # checked before DALI sees it: an empty file crashes DALI's CPU pipeline (a segfault), a truncated JPEG
        # decodes grey where it was cut; a bad one raises headers.BadImageFile here, out through the iterator
        data = read_checked(self.split_dir / self.files[i])
        sample = [data, np.array([i], dtype=np.int64)]
        if self.ranks is not None:
            row = np.ascontiguousarray(self.ranks[i])
            # DALI's torch bridge has no uint16: the bits travel as int16 and are viewed back as uint16
            sample.append(row.view(np.int16) if row.dtype == np.uint16 else row)
        if self.with_digest:
            sample.append(np.frombuffer(hashlib.sha256(data).digest(), dtype=np.uint8))
        return tuple(sample)


def canvas_batches(split_dir: Path, files: list[str], plan: list[np.ndarray], resize: int, crop: int, device_id=None,
                   *, ranks=None, with_digest: bool = False, num_threads: int | None = None):
    """Decodes the planned batches (each an int array of sample indices into files) in order.

    Yields dicts per batch: "images" (uint8 Tensor[n, 3, crop, crop] on the decoder's device: the GPU for a
    device_id, else the CPU), "index" (int64 Tensor[n]), "ranks" (Tensor[n, ...] of the ranks' dtype, when
    ranks), "digest" (uint8 Tensor[n, 32], sha256 of each file, when with_digest).
    """
    from nvidia.dali import fn, pipeline_def
    from nvidia.dali.plugin.pytorch import DALIGenericIterator

    if not plan:
        return
    width = max(len(rows) for rows in plan)
    names = ["images", "index"] + (["ranks"] if ranks is not None else []) + (["digest"] if with_digest else [])
    source = FileSource(split_dir, files, plan, width, ranks, with_digest)

    @pipeline_def(batch_size=width, num_threads=num_threads or os.cpu_count() or 1, device_id=device_id,
                  prefetch_queue_depth=2)
    def stream():
        outputs = fn.external_source(source=source, num_outputs=len(names), batch=False)
        images = decode_canvas(outputs[0], resize, crop, device_id)
        extra = list(outputs[2:])
        if ranks is not None and device_id is not None:
            extra[0] = extra[0].gpu()  # the rank rows meet the canvases on the GPU
        return (images, outputs[1], *extra)

    unsigned = ranks is not None and ranks.dtype == np.uint16
    for rows, batch in zip(plan, DALIGenericIterator(stream(), names), strict=True):
        data, n = batch[0], len(rows)
        out = {"images": data["images"][:n], "index": data["index"][:n].view(-1)}
        if ranks is not None:
            out["ranks"] = data["ranks"][:n].view(torch.uint16) if unsigned else data["ranks"][:n]
        if with_digest:
            out["digest"] = data["digest"][:n]
        yield out


def combine_digests(files: list[str], digests) -> str:
    """sha256 hex over each file's name and the sha256 of its bytes (uint8 [N, 32]), in row order."""
    total = hashlib.sha256()
    for name, file_sha in zip(files, np.asarray(digests, dtype=np.uint8)):
        total.update(os.fsencode(name) + b"\0" + file_sha.tobytes())
    return total.hexdigest()
