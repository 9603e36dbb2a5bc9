"""JPEG trees in ImageFolder layout (root/train/<class>/*.jpg, root/val|test/<class>/*.jpg) decoded by
NVIDIA DALI to the deterministic evaluation canvas: resize the shorter side to `resize`, center crop
`crop` x `crop`, uint8 [N, 3, crop, crop] held in memory (the attribution and masking canvas, DESIGN.md
section 2). Decoding runs on the GPU (`device="mixed"` decoder) when there is one, else on the CPU.

Sample i of a split is the i-th file in sorted (class, file name) order: the reader is given each
file's index as its label, so the canvas is filled by index whatever order DALI delivers.
"""

import logging
import os
from pathlib import Path

import torch

from roarfast.data.base import ImageSet
from roarfast.errors import UserError

log = logging.getLogger(__name__)

#: file name endings of the images a tree may hold (what DALI's image decoder reads)
IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".bmp", ".tif", ".tiff", ".webp")
#: names of the held-out split, in the order they are looked for
TEST_SPLITS = ("val", "test")


def class_names(split_dir: Path) -> list[str]:
    """Sorted names of the class folders of one ImageFolder split (label i = the i-th name)."""
    return sorted(d.name for d in split_dir.iterdir() if d.is_dir())


def list_tree(split_dir: Path, classes: list[str] | None = None):
    """(sorted class names, files relative to split_dir, labels) of one ImageFolder split; `classes`
    fixes the class list (a test split must use the train split's)."""
    found = class_names(split_dir)
    if classes is None:
        classes = found
    extra = sorted(set(found) - set(classes))
    if extra:
        raise UserError(f"{split_dir} has class folders the train split lacks: {', '.join(extra)}")
    files, labels = [], []
    for label, name in enumerate(classes):
        folder = split_dir / name
        if not folder.is_dir():
            continue
        for path in sorted(folder.iterdir()):
            if path.is_file() and path.suffix.lower() in IMAGE_EXTENSIONS:
                files.append(f"{name}/{path.name}")
                labels.append(label)
    if not files:
        raise UserError(f"{split_dir} holds no images ({', '.join(IMAGE_EXTENSIONS)}) in <class>/ folders")
    return classes, files, labels


def undecodable(split_dir: Path, files: list[str]) -> list[str]:
    """The files PIL cannot fully decode (names relative to split_dir)."""
    from PIL import Image

    bad = []
    for name in files:
        try:
            with Image.open(split_dir / name) as image:
                image.load()
        except Exception:  # noqa: BLE001 - any failure to decode marks the file bad
            bad.append(name)
    return bad


def decode_canvas(encoded, resize: int, crop: int, device_id):
    """DALI graph (call inside a pipeline definition): encoded image files (uint8 buffers) -> the uint8
    [3, crop, crop] canvas, decoded on the CPU (device_id None) or by the mixed GPU decoder."""
    from nvidia.dali import fn, types

    images = fn.decoders.image(encoded, device="cpu" if device_id is None else "mixed", output_type=types.RGB)
    images = fn.resize(images, resize_shorter=resize, interp_type=types.INTERP_LINEAR, antialias=True)
    # crop_mirror_normalize with the default mean 0 / std 1: a center crop to CHW, kept uint8
    return fn.crop_mirror_normalize(images, crop=(crop, crop), crop_pos_x=0.5, crop_pos_y=0.5, dtype=types.UINT8,
                                    output_layout="CHW")


def _pipeline(split_dir, files, resize, crop, batch_size, num_threads, device_id):
    from nvidia.dali import fn, pipeline_def

    @pipeline_def(batch_size=batch_size, num_threads=num_threads, device_id=device_id, prefetch_queue_depth=2)
    def canvas():
        jpegs, index = fn.readers.file(file_root=str(split_dir), files=files, labels=list(range(len(files))),
                                       random_shuffle=False, pad_last_batch=True, name="Reader")
        return decode_canvas(jpegs, resize, crop, device_id), index

    return canvas()


def decode_split(split_dir: Path, files: list[str], resize: int, crop: int, device_id=None, batch_size: int = 64,
                 num_threads: int | None = None) -> torch.Tensor:
    """uint8 Tensor[N, 3, crop, crop] (CPU) of files (relative to split_dir), row i = files[i]."""
    from nvidia.dali.plugin.pytorch import DALIGenericIterator, LastBatchPolicy

    pipe = _pipeline(split_dir, files, resize, crop, min(batch_size, len(files)), num_threads or os.cpu_count() or 1,
                     device_id)
    pipe.build()
    out = torch.empty(len(files), 3, crop, crop, dtype=torch.uint8)
    iterator = DALIGenericIterator([pipe], ["images", "index"], reader_name="Reader",
                                   last_batch_policy=LastBatchPolicy.PARTIAL)
    for batch in iterator:
        data = batch[0]
        out[data["index"].view(-1).long().cpu()] = data["images"].cpu()
    return out


def _decoder_device(device: str):
    """DALI device_id: None (CPU pipeline) for "cpu", the current CUDA device for "gpu"; "auto" picks."""
    if device == "auto":
        device = "gpu" if torch.cuda.is_available() else "cpu"
    if device == "cpu":
        return None
    if device == "gpu":
        if not torch.cuda.is_available():
            raise UserError("imagefolder device 'gpu' asked for GPU decoding but torch sees no GPU")
        return torch.cuda.current_device()
    raise UserError(f"imagefolder device should be auto, cpu or gpu, got {device!r}")


def _load_split(split_dir, classes, resize, crop, skip_bad, device_id, batch_size):
    classes, files, labels = list_tree(split_dir, classes)
    try:
        images = decode_split(split_dir, files, resize, crop, device_id, batch_size)
    except RuntimeError as err:
        # DALI's message does not reliably name the file: find the culprits with a full decode
        bad = undecodable(split_dir, files)
        if not bad:
            raise
        if not skip_bad:
            raise UserError(f"cannot decode {len(bad)} image(s) in {split_dir}: {', '.join(bad[:10])}"
                            f"{' ...' if len(bad) > 10 else ''} (skip_bad=True skips them)") from err
        for name in bad:
            log.warning("skipping undecodable image %s", split_dir / name)
        kept = [i for i, name in enumerate(files) if name not in set(bad)]
        files, labels = [files[i] for i in kept], [labels[i] for i in kept]
        images = decode_split(split_dir, files, resize, crop, device_id, batch_size)
    return ImageSet(images=images, labels=torch.tensor(labels, dtype=torch.int64), masks=None, classes=classes)


def check_canvas(resize: int, crop: int) -> None:
    """Refuses a center crop larger than the resized shorter side."""
    if not 0 < crop <= resize:
        raise UserError(f"imagefolder: crop should be in (0, resize={resize}], got {crop}")


def split_dirs(root: Path, test_split: str | None = None) -> tuple[Path, Path]:
    """(train, test) split folders of the tree at root; the test split defaults to val, else test."""
    if test_split is None:
        test_split = next((name for name in TEST_SPLITS if (root / name).is_dir()), None)
    if not (root / "train").is_dir() or test_split is None or not (root / test_split).is_dir():
        raise UserError(f"imagefolder: expected {root}/train/<class>/*.jpg and {root}/"
                        f"{test_split or 'val|test'}/<class>/*.jpg")
    return root / "train", root / test_split


def load_imagefolder(data_dir, resize: int = 256, crop: int = 224, skip_bad: bool = False, device: str = "auto",
                     test_split: str | None = None, batch_size: int = 64):
    """(train, test) ImageSets of the tree at data_dir: data_dir/train and data_dir/<test_split> (default:
    val, else test), canvas = shorter side resized to `resize`, center `crop` x `crop`.

    skip_bad: log and drop images that cannot be decoded instead of failing with their names.
    device: "auto", "cpu" or "gpu" (DALI's mixed decoder on the current CUDA device).
    """
    root = Path(data_dir)
    check_canvas(resize, crop)
    train_dir, test_dir = split_dirs(root, test_split)
    device_id = _decoder_device(device)
    train = _load_split(train_dir, None, resize, crop, skip_bad, device_id, batch_size)
    test = _load_split(test_dir, train.classes, resize, crop, skip_bad, device_id, batch_size)
    return train, test
