"""Which decoder turns a tree's image files into canvases: NVIDIA DALI (roarfast.data.dali) when it is
installed, else PIL and torchvision on the CPU (CPU_DECODER), said once with how to install DALI.

The CPU decoder makes the same canvas as DALI's pipeline: PIL's libjpeg-turbo decode (bit-identical to
DALI's CPU decoder and to torchvision's decode_jpeg on all 60,000 CIFAR-10 JPEGs; torchvision's image
decoding is deprecated), EXIF orientation applied, images of more than 8 bits a channel scaled to 8 bits
(eight_bits: 16-bit grey as DALI scales it, round(v / 257); 16-bit colour as PIL reads it, v >> 8, at most
one level from DALI's; an image of no fixed range, 32-bit or float, refused naming its file), the shorter side resized to `resize` (torchvision's
bilinear resize with antialiasing) with the longer side rounded as DALI rounds it, and a center crop
whose offset is rounded half up, as DALI's. The resize is not bit-identical (DALI keeps the exact scale
and moves its sampling grid by a fraction of a pixel): on real photos at 224 px the canvases differ by
half a level on average (benchmarks/RESULTS.md, "The CPU decoder without DALI"), so the decoder is part of
the dataset's fingerprint (decoded_digest), and ranks or a base model made with one are refused with
the other.

Both yield the same batches: dicts of "images" (uint8 Tensor[n, 3, crop, crop]), "index" (int64
Tensor[n]), "ranks" (row i of the ranks with sample i, when ranks) and "digest" (the sha256 of each
file's bytes, uint8 Tensor[n, 32], when with_digest).
"""

import hashlib
import importlib.util
import io
import logging
import os
from concurrent.futures import ThreadPoolExecutor
from importlib.metadata import distributions, version
from pathlib import Path

import numpy as np
import torch

from roarfast.data.dali import canvas_batches as dali_batches
from roarfast.data.headers import read_checked
from roarfast.errors import UserError

log = logging.getLogger(__name__)

DALI, CPU_DECODER = "dali", "pil+torchvision"
#: how to get the fast decoder, in every message that mentions its absence
INSTALL_DALI = "pip install nvidia-dali-cuda130 (or roarfast[dali])"
_said = []  # the fallback is said once per process


def dali_installed() -> bool:
    """Whether NVIDIA DALI is installed: found, not imported (its import takes a second or more, which a load
    from the canvas cache, decoding nothing, need not pay); one that does not import is said by _import_dali."""
    try:
        return importlib.util.find_spec("nvidia.dali") is not None
    except (ImportError, ValueError):
        return False


def _import_dali() -> None:
    """Imports DALI before it decodes: an installed DALI that does not import is a UserError saying how to mend it
    (the CPU decoder would be another dataset fingerprint, so it is not swapped in silently)."""
    try:
        import nvidia.dali  # noqa: F401
    except ImportError as err:
        raise UserError(f"NVIDIA DALI is installed but does not import ({err}): reinstall it ({INSTALL_DALI}), or "
                        f"uninstall it to decode image trees on the CPU") from None


def decoder_for(device: str) -> str:
    """The decoder of an imagefolder `device` option (auto, cpu, gpu): DALI where installed; otherwise the
    CPU decoder (said once), or for "gpu", which only DALI serves, a UserError saying how to install it."""
    if dali_installed():
        return DALI
    if device == "gpu":
        raise UserError(f"imagefolder device=gpu decodes on the GPU with NVIDIA DALI, which is not installed: "
                        f"{INSTALL_DALI}, or device=cpu")
    if not _said:
        _said.append(True)
        log.warning("note: NVIDIA DALI is not installed, so image trees are decoded on the CPU by PIL and "
                    "torchvision (slower, and canvases about half a level per pixel from DALI's: another dataset "
                    "fingerprint); for DALI: %s", INSTALL_DALI)
    return CPU_DECODER


def decoder_version(decoder: str) -> str:
    """The version of what makes `decoder`'s canvases, for the keys of cached canvases (a new version may decode
    or resize a level apart): DALI's; Pillow's (its libjpeg-turbo with it) and torchvision's."""
    if decoder == DALI:  # its distribution's name says its CUDA version (nvidia-dali-cuda130): found, not guessed
        return next((f"{dist.name} {dist.version}" for dist in distributions()
                     if (dist.name or "").lower().startswith("nvidia-dali")), "unknown")
    import PIL

    return f"pillow {PIL.__version__}, torchvision {version('torchvision')}"


def decoded_digest(files_digest: str, decoder: str) -> str:
    """The digest a split's fingerprint hashes: the files' digest as it is for DALI (so the datasets DALI
    decoded keep their fingerprints), with the decoder's name folded in for another decoder."""
    if decoder == DALI:
        return files_digest
    return hashlib.sha256(bytes.fromhex(files_digest) + f"decoder={decoder}".encode()).hexdigest()


def canvas_batches(decoder: str, split_dir: Path, files: list[str], plan: list[np.ndarray], resize: int, crop: int,
                   device_id=None, *, ranks=None, with_digest: bool = False, num_threads: int | None = None):
    """The planned batches (each an int array of sample indices into files) decoded in order by `decoder`
    (decoder_for); device_id: DALI's GPU (None: the CPU). Yields the dicts the module docstring lists."""
    if decoder == DALI:
        _import_dali()
        yield from dali_batches(split_dir, files, plan, resize, crop, device_id, ranks=ranks, with_digest=with_digest,
                                num_threads=num_threads)
        return
    with ThreadPoolExecutor(num_threads or os.cpu_count() or 1) as pool:
        for rows in plan:
            samples = list(pool.map(lambda i: _canvas(Path(split_dir) / files[i], resize, crop), rows))
            batch = {"images": torch.stack([image for image, _ in samples]),
                     "index": torch.as_tensor(np.asarray(rows), dtype=torch.int64)}
            if ranks is not None:
                # the batch's rows alone: from a record's file (its RowReader) or the array given
                batch["ranks"] = torch.from_numpy(np.ascontiguousarray(ranks[np.asarray(rows, dtype=np.int64)]))
            if with_digest:
                batch["digest"] = torch.from_numpy(np.stack([np.frombuffer(sha, dtype=np.uint8) for _, sha in samples]))
            yield batch


def _canvas(path: Path, resize: int, crop: int) -> tuple[torch.Tensor, bytes]:
    """(uint8 Tensor[3, crop, crop] canvas of the image file at `path`, sha256 of its bytes). Raises
    headers.BadImageFile for a bad file (checked before PIL sees it), RuntimeError for one that cannot be decoded,
    as DALI does."""
    from PIL import Image, ImageOps
    from torchvision.transforms.v2 import functional

    data = read_checked(path)
    try:
        with Image.open(io.BytesIO(data)) as opened:
            # EXIF orientation applied, as DALI's decoder applies it
            array = np.asarray(eight_bits(ImageOps.exif_transpose(opened), path, opened.format).convert("RGB"))
    except UserError:
        raise
    except Exception as err:  # noqa: BLE001  (any failure to decode is the file's)
        raise RuntimeError(f"cannot decode {path}: {err}") from None
    image = torch.from_numpy(array.copy()).permute(2, 0, 1)
    height, width = image.shape[1:]
    scale = resize / min(height, width)
    longer = int(max(height, width) * scale + 0.5)  # DALI's output extent: the scaled side rounded half up
    size = [resize, longer] if height <= width else [longer, resize]
    if size != [height, width]:
        image = functional.resize(image, size, interpolation=functional.InterpolationMode.BILINEAR, antialias=True)
    top, left = int((size[0] - crop) / 2 + 0.5), int((size[1] - crop) / 2 + 0.5)  # DALI's crop_pos 0.5, half up
    return image[:, top:top + crop, left:left + crop].contiguous(), hashlib.sha256(data).digest()


#: PIL's modes of 16-bit grey images (PNG, TIFF); a PNG's mode "I" holds 16 bits too (PNG has no more)
_SIXTEEN_BITS = ("I;16", "I;16L", "I;16B", "I;16N")


def eight_bits(image, where, file_format: str | None = None):
    """`image` (a PIL image, read from a file of `file_format`) with 8 bits a channel: 16-bit grey scaled to the
    8-bit range as DALI's decoder scales it (round(v / 257)), an 8-bit image as it is. A UserError naming
    `where` for an image whose values have no fixed range (32-bit integers, floats): a PIL convert would clip
    it to white."""
    from PIL import Image

    if image.mode in _SIXTEEN_BITS or (image.mode == "I" and file_format == "PNG"):
        values = np.asarray(image, dtype=np.uint32)
        return Image.fromarray(((values + 128) // 257).astype(np.uint8), mode="L")
    if image.mode in ("I", "F"):
        raise UserError(f"{where}: its pixels are {'32-bit integers' if image.mode == 'I' else 'floats'}, which have "
                        f"no fixed range to scale to 8 bits; save it with 8 or 16 bits a channel")
    return image
