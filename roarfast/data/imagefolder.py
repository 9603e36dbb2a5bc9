"""JPEG trees in ImageFolder layout (root/train/<class>/*.jpg, root/val|test/<class>/*.jpg) decoded by
NVIDIA DALI to the deterministic evaluation canvas: resize the shorter side to `resize`, center crop
`crop` x `crop`, uint8 [3, crop, crop] (the attribution and masking canvas: README, "Semantics"). A tree whose
images kept all share one size keeps it, ImageNet's 256/224 canvas is for trees of varied sizes, and a canvas
larger than the images is made only when asked (roarfast.data.canvas).
Decoding runs on the GPU (`device="mixed"` decoder) when there is one, else on the CPU; without DALI,
PIL and torchvision decode on the CPU (roarfast.data.decode), and the fingerprint says so.

A tree whose canvases fit in memory is decoded once into ImageSets, and the canvases are cached, so later
loads map them and decode nothing (roarfast.data.canvas_cache); a larger one (or any, with stream=True)
becomes FileSets that the StreamLoader decodes batch by batch. Both fingerprint the same way, from the
files' names and bytes, so one tree is one dataset whichever way it is read; a streamed split's digest,
statistics and undecodable files are measured once and cached (roarfast.data.cache).

A one-class tree is refused. num_train / num_test (the dataset resolver's stratified subset) are chosen
from the listing, so only the files kept are read.

Sample i of a split is the i-th file in sorted (class, file name) order; DALI delivers each canvas
with its file's index (roarfast.data.dali), so the canvas is filled by index whatever the order.
What the built-in dataset "imagefolder" (roarfast.data.builtin.imagefolder: its name, options and defaults)
loads.
"""

import logging
import os
from pathlib import Path

import numpy as np
import torch

from roarfast.data import cache, canvas_cache
from roarfast.data.base import ChannelSums, FileSet, ImageSet, channel_stats
from roarfast.data.canvas import UNDECODABLE, canvas_size, check_canvas, examine, shared_size, undecodable
from roarfast.data.dali import combine_digests
from roarfast.data.decode import DALI, canvas_batches, decoded_digest, decoder_for, decoder_version
from roarfast.data.headers import BadImageFile
from roarfast.data.in_memory import wants_stream
from roarfast.errors import UserError
from roarfast.common.kept import checked
from roarfast.common.options import check_choice, check_positive
from roarfast.common.progress import progress_bar

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
    classes, listing, labels = scan_tree(split_dir, classes)
    return classes, listing.files, labels


def _is_image(name: str) -> bool:
    """Whether a file name's suffix (as Path.suffix takes it: the last dot, not leading the name) is an image's."""
    head, _, tail = name.rpartition(".")
    return bool(head) and f".{tail.lower()}" in IMAGE_EXTENSIONS


def scan_tree(split_dir: Path, classes: list[str] | None = None) -> tuple[list[str], cache.Listing, list[int]]:
    """list_tree with each file's stamp taken as it is listed (one stat a file): (classes, the Listing of the
    files, labels)."""
    found = class_names(split_dir)
    if classes is None:
        classes = found
    extra = sorted(set(found) - set(classes))
    if extra:
        raise UserError(f"{split_dir} has class folders the train split lacks: {', '.join(extra)}")
    files, stamps, labels = [], [], []
    for label, name in enumerate(classes):
        folder = split_dir / name
        if not folder.is_dir():
            continue
        with os.scandir(folder) as entries:
            images = sorted((entry.name, cache.file_stamp(entry.stat())) for entry in entries
                            if _is_image(entry.name) and entry.is_file())
        if not images:  # a class no image shows: the model would learn it as a label it never sees
            raise UserError(f"{folder} holds no images ({', '.join(IMAGE_EXTENSIONS)}): add its images or remove the "
                            f"folder (torchvision's ImageFolder refuses it too)")
        files.extend(f"{name}/{image}" for image, _ in images)
        stamps.extend(stamp for _, stamp in images)
        labels.extend([label] * len(images))
    if not files:
        raise UserError(f"{split_dir} holds no images ({', '.join(IMAGE_EXTENSIONS)}) in <class>/ folders")
    return classes, cache.Listing(split_dir, files, stamps), labels


def default_batch_size(crop: int) -> int:
    """Images per decode batch: DALI's per-batch overhead dominates small canvases, so more of those."""
    return max(64, min(1024, 2**20 // (crop * crop)))


def decode_batches(split_dir: Path, files: list[str], resize: int, crop: int, device_id=None,
                   batch_size: int | None = None, desc: str = "decode", decoder: str = DALI):
    """Yields decode.canvas_batches' dicts (images, index, digest) over files (relative to split_dir) in
    order, each file once, with a progress bar."""
    batch_size = batch_size or default_batch_size(crop)
    order = np.arange(len(files))
    plan = [order[start:start + batch_size] for start in range(0, len(files), batch_size)]
    with progress_bar(total=len(files), desc=f"{desc} {split_dir.name}") as bar:
        for batch in canvas_batches(decoder, split_dir, files, plan, resize, crop, device_id, with_digest=True):
            yield batch
            bar.update(batch["index"].shape[0])


def _decode_each(split_dir: Path, files: list[str], resize: int, crop: int, device_id, batch_size, desc: str,
                 consume, decoder: str) -> str:
    """Decodes every file once, calling consume(index (int64 Tensor[B], CPU), canvases) per batch; returns
    the files' digest (dali.combine_digests) from the hashes that ride along with the canvases, with the
    decoder's name folded in where it is not DALI (decode.decoded_digest)."""
    digests = np.empty((len(files), 32), dtype=np.uint8)
    for batch in decode_batches(split_dir, files, resize, crop, device_id, batch_size, desc=desc, decoder=decoder):
        consume(batch["index"], batch["images"])
        digests[batch["index"].numpy()] = batch["digest"].cpu().numpy()
    return decoded_digest(combine_digests(files, digests), decoder)


def decode_split(split_dir: Path, files: list[str], resize: int, crop: int, device_id=None,
                 batch_size: int | None = None, decoder: str = DALI) -> tuple[torch.Tensor, str]:
    """(uint8 Tensor[N, 3, crop, crop] (CPU) of files (relative to split_dir), row i = files[i]; the
    files' digest)."""
    out = torch.empty(len(files), 3, crop, crop, dtype=torch.uint8)

    def store(index, images):
        out[index] = images.cpu()

    return out, _decode_each(split_dir, files, resize, crop, device_id, batch_size, "decode", store, decoder)


def measure_split(split_dir: Path, files: list[str], resize: int, crop: int, device_id=None,
                  batch_size: int | None = None, stats: bool = True,
                  decoder: str = DALI) -> tuple[ChannelSums | None, str]:
    """(per-channel sums over the decoded canvases of files (None unless stats), decoded batch by batch
    and not kept; the files' digest)."""
    sums = ChannelSums(3) if stats else None
    digest = _decode_each(split_dir, files, resize, crop, device_id, batch_size, "measure",
                          (lambda index, images: sums.add(images)) if stats else (lambda index, images: None), decoder)
    return sums, digest


def _named(bad: dict) -> str:
    """The first ten of `bad` (name -> why) as `name (why)`, for one line."""
    return ", ".join(f"{name} ({why})" for name, why in list(bad.items())[:10]) + (" ..." if len(bad) > 10 else "")


def _kept_rows(files: list[str], bad: dict, split_dir: Path, skip_bad: bool) -> list[int]:
    """The rows of `files` not in `bad` (name -> why: a bad header, or undecodable): a UserError naming the bad
    ones unless skip_bad, which leaves them out, counted and named in one line."""
    if not bad:
        return list(range(len(files)))
    if not skip_bad:
        raise UserError(f"cannot decode {len(bad)} image(s) in {split_dir}: {_named(bad)} (--data-option "
                        f"skip_bad=true skips them)")
    kept = [i for i, name in enumerate(files) if name not in bad]
    if not kept:
        raise UserError(f"every image in {split_dir} is bad: {_named(bad)}")
    log.warning("skipping %d bad image(s) of %d in %s: %s", len(files) - len(kept), len(files), split_dir, _named(bad))
    return kept


def _without(files: list[str], labels: list[int], bad, split_dir: Path, skip_bad: bool):
    """(files, labels) without the `bad` ones (a dict name -> why, or the names a cached record keeps: undecodable):
    _kept_rows."""
    bad = bad if isinstance(bad, dict) else dict.fromkeys(bad, UNDECODABLE)
    kept = _kept_rows(files, bad, split_dir, skip_bad)
    return [files[i] for i in kept], [labels[i] for i in kept]


def _decode_checked(split_dir: Path, files: list[str], labels: list[int], skip_bad: bool, decode, decoder: str):
    """(files, labels, bad files (names), decode(files)) with undecodable files named, or dropped when skip_bad."""
    try:
        return files, labels, [], decode(files)
    except (RuntimeError, BadImageFile) as err:
        # DALI's message does not reliably name the file: find the culprits file by file (a file that changed
        # since its header was checked is found by its header again)
        bad = undecodable(split_dir, files, decoder)
        if not bad:
            raise err
        files, labels = _without(files, labels, bad, split_dir, skip_bad)  # a UserError naming them unless skip_bad
        return files, labels, list(bad), decode(files)


def _decoder_device(device: str, decoder: str):
    """DALI device_id of an imagefolder device (auto, cpu, gpu): None (CPU pipeline) for "cpu", the current
    CUDA device for "gpu"; "auto" picks. None for the CPU decoder, which serves "auto" and "cpu"
    (decode.decoder_for)."""
    if decoder != DALI:
        return None
    if device == "auto":
        device = "gpu" if torch.cuda.is_available() else "cpu"
    if device == "cpu":
        return None
    if not torch.cuda.is_available():
        raise UserError("imagefolder device 'gpu' asked for GPU decoding but torch sees no GPU")
    return torch.cuda.current_device()


def _decoding(resize: int, crop: int, decoder: str, device_id) -> dict:
    """What a split's canvases depend on besides its files, for the keys of what is cached of them: the canvas,
    the decoder (DALI's CPU and GPU decoders differ by a few levels, the CPU decoder's resize by about half a
    level more) and its version."""
    which = decoder if decoder != DALI else "cpu" if device_id is None else "gpu"
    return {"resize": resize, "crop": crop, "decoder": which, "version": decoder_version(decoder)}


def _load_splits(root, splits, classes, resize, crop, skip_bad, device_id, batch_size, decoder) -> list[ImageSet]:
    """The splits ((Listing, labels) each) in memory: mapped from the canvas cache where an earlier load stored
    them (roarfast.data.canvas_cache), else decoded and stored there when they fit its disk (one line when not)."""
    keys = [listing.key(canvas_cache.KIND, _decoding(resize, crop, decoder, device_id)) for listing, _ in splits]
    entries = [canvas_cache.read(key, (3, crop, crop)) for key in keys]
    missing = sum(len(listing.files) for (listing, _), entry in zip(splits, entries) if entry is None)
    store = missing > 0 and canvas_cache.room_for(missing * 3 * crop * crop, f"imagefolder {root}")
    sets = []
    for (listing, labels), key, entry in zip(splits, keys, entries):  # `store` turns off at a failed write: one line
        split_dir = listing.folder
        if entry is not None:
            files, labels = _without(listing.files, labels, entry["bad"], split_dir, skip_bad)
            images, digest, bad, stats = entry["images"], entry["digest"], entry["bad"], entry["stats"]
        else:
            files, labels, bad, (images, digest) = _decode_checked(
                split_dir, listing.files, labels, skip_bad,
                lambda kept: decode_split(split_dir, kept, resize, crop, device_id, batch_size, decoder=decoder),
                decoder)
            stats = channel_stats(images)
            store = store and len(files) > 0 and canvas_cache.write(key, split_dir, images, bad, digest, stats)
        sets.append(ImageSet(images=images, labels=torch.tensor(labels, dtype=torch.int64), masks=None,
                             classes=classes, digest=digest, stats=stats))
    return sets


def _stream_split(listing, labels, classes, resize, crop, skip_bad, device_id, batch_size, decoder,
                  measure: bool) -> FileSet:
    """One split left on disk: decoded once to find undecodable files (and, with measure, the channel
    statistics), digested, and the results cached by the listing (roarfast.data.cache)."""
    split_dir, files = listing.folder, listing.files
    canvas = {"resize": resize, "crop": crop, "decoder": decoder}
    key = listing.key("imagefolder", {**_decoding(resize, crop, decoder, device_id), "measure": measure})
    record = cache.read("imagefolder", key)
    if record is None:
        def decode(kept):
            return measure_split(split_dir, kept, resize, crop, device_id, batch_size, stats=measure, decoder=decoder)

        files, labels, bad, (sums, digest) = _decode_checked(split_dir, files, labels, skip_bad, decode, decoder)
        record = {"bad": bad, "sums": sums.to_dict() if measure else None, "digest": digest}
        cache.write("imagefolder", key, record)
    else:
        files, labels = _without(files, labels, record["bad"], split_dir, skip_bad)
    stats = ChannelSums.from_dict(record["sums"]).stats() if measure else None
    return FileSet(root=split_dir, files=files, labels=torch.tensor(labels, dtype=torch.int64), classes=classes,
                   shape=(3, crop, crop), canvas=canvas, digest=record["digest"], stats=stats)


def split_dirs(root: Path, test_split: str | None = None) -> tuple[Path, Path]:
    """(train, test) split folders of the tree at root; the test split defaults to val, else test."""
    if test_split is None:
        test_split = next((name for name in TEST_SPLITS if (root / name).is_dir()), None)
    elif not isinstance(test_split, str) or test_split in ("train", ".", "..") or Path(test_split).name != test_split:
        raise UserError(f"--data-option test_split={test_split}: the held-out split is a folder of {root} beside "
                        f"train/ (val, test, ...), named as it is (quoted if it looks like a number), not train "
                        f"itself nor a path")
    if not (root / "train").is_dir() or test_split is None or not (root / test_split).is_dir():
        raise UserError(f"imagefolder: expected {root}/train/<class>/*.jpg and {root}/"
                        f"{test_split or 'val|test'}/<class>/*.jpg")
    return root / "train", root / test_split


def load_tree(data_dir, resize: int | None, crop: int | None, skip_bad: bool, device: str, test_split: str | None,
              batch_size: int | None, stream, subset):
    """(train, test) splits of the tree at data_dir, as roarfast.data.builtin.imagefolder.load_imagefolder (its
    defaults, and what each argument means) describes them."""
    check_choice("imagefolder device", device, ("auto", "cpu", "gpu"))
    check_positive("--data-option batch_size", batch_size, optional=True)
    decoder = decoder_for(device)
    classes, train, test, (resize, crop) = _listing(data_dir, resize, crop, test_split, subset, decoder, skip_bad)
    common = dict(classes=classes, resize=resize, crop=crop, skip_bad=skip_bad,
                  device_id=_decoder_device(device, decoder), batch_size=batch_size, decoder=decoder)
    # a decision on the memory available now: made again before a kept answer is replayed (roarfast.common.kept)
    if checked(wants_stream, stream, len(train[0].files) + len(test[0].files), crop):
        return _stream_split(*train, measure=True, **common), _stream_split(*test, measure=False, **common)
    return tuple(_load_splits(Path(data_dir), [train, test], **common))


def _listing(data_dir, resize, crop, test_split, subset, decoder, skip_bad: bool, check: bool = True):
    """(classes, (train Listing, labels), (test Listing, labels), (resize, crop)) of the tree at data_dir, the
    subset's files only, from its listing and the images' headers (no image decoded, but where two sizes
    differ: by `decoder`, the one that will decode them, canvas.shared_size). With `check` (a load), every file's
    header is checked (canvas.examine) and the bad ones (empty, truncated, unreadable, not an image) are named in a
    UserError, or left out with skip_bad: no decoder sees them; without (an outline), only the headers that settle
    the size are read."""
    root = Path(data_dir)
    check_positive("--data-option resize", resize, optional=True)
    check_positive("--data-option crop", crop, optional=True)
    if resize is not None and crop is not None:
        check_canvas(resize, crop, given=(resize, crop))
    train_dir, test_dir = split_dirs(root, test_split)
    classes, train, train_labels = scan_tree(train_dir)
    if len(classes) < 2:  # a classifier of one class learns nothing, and ROAR measures nothing
        raise UserError(f"{train_dir} holds {len(classes)} class folder ({', '.join(classes)}): a classifier needs "
                        f"at least 2 <class>/ folders")
    _, test, test_labels = scan_tree(test_dir, classes)
    if subset is not None:
        where = f"imagefolder {root}"
        train, train_labels = _rows(train, train_labels, subset.rows("train", train_labels, len(classes), where))
        test, test_labels = _rows(test, test_labels, subset.rows("test", test_labels, len(classes), where))
    if check:
        examined = [examine(train, decoder), examine(test, decoder)]
        train, train_labels = _checked(train, train_labels, examined[0].bad, skip_bad)
        test, test_labels = _checked(test, test_labels, examined[1].bad, skip_bad)
        sides = [found.size for found in examined]
    else:
        sides = [shared_size(train, decoder), shared_size(test, decoder)]
    canvas = canvas_size(resize, crop, sides)
    return classes, (train, train_labels), (test, test_labels), canvas


def _checked(listing: cache.Listing, labels: list[int], bad: dict, skip_bad: bool):
    """The listing and labels without the files whose headers are `bad` (_kept_rows)."""
    return (listing, labels) if not bad else _rows(listing, labels, _kept_rows(listing.files, bad, listing.folder,
                                                                                 skip_bad))


def _rows(listing: cache.Listing, labels: list[int], rows) -> tuple[cache.Listing, list[int]]:
    """The listing and labels of `rows` (None: all)."""
    if rows is None:
        return listing, labels
    return listing.rows(rows), [labels[i] for i in rows]


def outline_tree(data_dir, resize: int | None, crop: int | None, skip_bad: bool, device: str, test_split: str | None,
                 batch_size: int | None, stream, subset):
    """What load_tree would load, from the tree's listing and the headers that settle the canvas (no image
    decoded, and not every file checked: bad files are counted, named by the load): ((C, H, W) of the canvas,
    train images, test images, classes, whether it has ground-truth masks: never)."""
    check_choice("imagefolder device", device, ("auto", "cpu", "gpu"))
    classes, (train, _), (test, _), (_, crop) = _listing(data_dir, resize, crop, test_split, subset,
                                                         decoder_for(device), skip_bad, check=False)
    return (3, crop, crop), len(train.files), len(test.files), len(classes), False
