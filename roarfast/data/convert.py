"""A user's data -> the in-memory uint8 ImageSets every stage works on: what a `--dataset
package.module:factory`, a torchvision dataset or an object given to Study hands over, checked and
converted once.

A split is `(images, labels)` as uint8 Tensor[N, C, H, W] and int64 Tensor[N], or any torch Dataset of
`(image, label)` pairs with a uint8 Tensor[C, H, W] (or [H, W]) or a PIL image (L or RGB) each, converted
item by item with a progress bar. Class names are optional (a third element, or the Dataset's `classes`);
without them the labels name themselves.
"""

import numpy as np
import torch

from roarfast.data.base import ImageSet
from roarfast.errors import UserError
from roarfast.common.progress import progress_bar

#: PIL modes taken as they are (one channel, three channels), and those converted to one of them first
_PIL_MODES = {"L": None, "RGB": None, "1": "L", "P": "RGB"}


def image_sets(result, where: str, progress: bool = True) -> tuple[ImageSet, ImageSet]:
    """(train, test) ImageSets of `result`: (train, test) or (train, test, classes), each split a tensor pair
    or a Dataset; `where` names the source in errors (e.g. "--dataset mymod:load")."""
    if not isinstance(result, (tuple, list)) or len(result) not in (2, 3):
        raise UserError(f"{where} should give (train, test) or (train, test, classes), got "
                        f"{type(result).__name__}{f' of {len(result)}' if isinstance(result, (tuple, list)) else ''}")
    train, test = result[0], result[1]
    classes = result[2] if len(result) == 3 else getattr(train, "classes", None)
    parts = {which: split_tensors(split, f"{where}: {which}", progress) for which, split in (("train", train),
                                                                                            ("test", test))}
    (train_images, train_labels), (test_images, test_labels) = parts["train"], parts["test"]
    if train_images.shape[1:] != test_images.shape[1:]:
        raise UserError(f"{where}: train and test images should have one shape [C, H, W], got "
                        f"{list(train_images.shape[1:])} and {list(test_images.shape[1:])}")
    names = _class_names(classes, max(int(train_labels.max()), int(test_labels.max())), where)
    return (ImageSet(images=train_images, labels=train_labels, masks=None, classes=names),
            ImageSet(images=test_images, labels=test_labels, masks=None, classes=names))


def split_tensors(split, where: str, progress: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """(uint8 Tensor[N, C, H, W], int64 Tensor[N]) of one split: a checked tensor pair, or a converted
    Dataset of (image, label)."""
    if isinstance(split, (tuple, list)) and len(split) == 2 and isinstance(split[0], torch.Tensor):
        images, labels = split
        if images.dtype != torch.uint8 or images.dim() != 4:
            raise UserError(f"{where} images should be a uint8 Tensor[N, C, H, W] (pixels 0..255), got "
                            f"{_describe(images)}")
        if not isinstance(labels, torch.Tensor) or labels.dtype != torch.int64 \
                or tuple(labels.shape) != (images.shape[0],):
            raise UserError(f"{where} labels should be an int64 Tensor[{images.shape[0]}], got {_describe(labels)}")
        images, labels = images.detach().cpu().contiguous(), labels.detach().cpu().contiguous()
    elif hasattr(split, "__getitem__") and hasattr(split, "__len__"):
        images, labels = _convert(split, where, progress)
    else:
        raise UserError(f"{where} should be (uint8 images Tensor[N, C, H, W], int64 labels Tensor[N]) or a torch "
                        f"Dataset of (image, label), got {type(split).__name__}")
    if images.shape[0] == 0:
        raise UserError(f"{where} holds no images")
    if images.shape[2] != images.shape[3]:
        raise UserError(f"{where} images should be square (the canvas is image_size x image_size), got "
                        f"{images.shape[2]}x{images.shape[3]}: crop or resize them in the dataset")
    if int(labels.min()) < 0:
        raise UserError(f"{where} labels should be class indices >= 0, got {int(labels.min())}")
    return images, labels


def _convert(dataset, where: str, progress: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """A Dataset of (image, label) read once, item by item, into uint8 Tensor[N, C, H, W] and int64 Tensor[N]."""
    n = len(dataset)
    if n == 0:
        raise UserError(f"{where} holds no images")
    images = labels = None
    with progress_bar(total=n, desc=f"convert {where.rsplit(': ', 1)[-1]}", unit="img", enabled=progress) as bar:
        for i in range(n):
            item = dataset[i]
            if not isinstance(item, (tuple, list)) or len(item) < 2:
                raise UserError(f"{where} item {i} should be (image, label), got {type(item).__name__}")
            image = _image(item[0], f"{where} item {i}")
            if images is None:
                images = torch.empty((n, *image.shape), dtype=torch.uint8)
                labels = torch.empty(n, dtype=torch.int64)
            elif image.shape != images.shape[1:]:
                raise UserError(f"{where} item {i} has shape {list(image.shape)}, item 0 {list(images.shape[1:])}: "
                                f"every image should have one shape")
            images[i] = image
            labels[i] = _label(item[1], f"{where} item {i}")
            bar.update(1)
    return images, labels


def _image(image, where: str) -> torch.Tensor:
    """uint8 Tensor[C, H, W] of a uint8 tensor ([C, H, W] or [H, W]) or a PIL image."""
    if isinstance(image, torch.Tensor):
        if image.dtype != torch.uint8 or image.dim() not in (2, 3):
            raise UserError(f"{where}: image should be a uint8 Tensor[C, H, W] or a PIL image, got {_describe(image)} "
                            f"(roarfast normalizes by itself: leave out ToTensor and Normalize)")
        return image if image.dim() == 3 else image.unsqueeze(0)
    mode = getattr(image, "mode", None)
    if mode is None or not hasattr(image, "convert"):
        raise UserError(f"{where}: image should be a uint8 Tensor[C, H, W] or a PIL image, got {type(image).__name__}")
    if mode not in _PIL_MODES:
        raise UserError(f"{where}: PIL mode {mode} is not read; convert the images to L (one channel) or RGB")
    if _PIL_MODES[mode] is not None:
        image = image.convert(_PIL_MODES[mode])
    array = np.asarray(image, dtype=np.uint8)
    return torch.from_numpy(array.copy()).unsqueeze(0) if array.ndim == 2 else torch.from_numpy(
        np.ascontiguousarray(array.transpose(2, 0, 1)))


def _label(label, where: str) -> int:
    if isinstance(label, torch.Tensor) and label.numel() == 1 and not label.is_floating_point():
        label = label.item()
    if isinstance(label, (bool, np.bool_)) or not isinstance(label, (int, np.integer)):
        raise UserError(f"{where}: label should be an int class index, got {type(label).__name__} {label!r}")
    return int(label)


def _class_names(classes, top: int, where: str) -> list[str]:
    """The class names (given, or "0".."top"), at least two, covering every label up to `top`."""
    if classes is None:
        classes = [str(i) for i in range(top + 1)]
    classes = [str(c) for c in classes]
    if top >= len(classes):
        raise UserError(f"{where}: labels should lie in [0, {len(classes)}) ({len(classes)} class names), got {top}")
    if len(classes) < 2:
        raise UserError(f"{where}: a classifier needs at least 2 classes, got {len(classes)}")
    return classes


def _describe(value) -> str:
    if isinstance(value, torch.Tensor):
        return f"{str(value.dtype).removeprefix('torch.')} Tensor{list(value.shape)}"
    return type(value).__name__
