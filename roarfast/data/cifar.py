"""CIFAR-10/100 in torchvision's on-disk format (root/cifar-10-batches-py/data_batch_1..5, test_batch,
batches.meta; root/cifar-100-python/train, test, meta): the file names come from torchvision's own
dataset classes; the batches are read with an unpickler that only rebuilds numpy arrays. What the built-in
datasets cifar10 and cifar100 (roarfast.data.builtin.cifar) and torchvision:CIFAR10/100 load."""

import pickle
from pathlib import Path

import numpy as np
import torch

from roarfast.data.base import ImageSet
from roarfast.errors import UserError

#: what a CIFAR batch pickle may contain besides builtins: numpy arrays and their dtypes
_ALLOWED_GLOBALS = {
    ("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),
    ("numpy", "ndarray"), ("numpy", "dtype"), ("_codecs", "encode"),
}


class _ArrayUnpickler(pickle.Unpickler):
    """Refuses every global but the numpy array constructors: a batch file cannot run code."""

    def find_class(self, module, name):
        if (module, name) not in _ALLOWED_GLOBALS:
            raise pickle.UnpicklingError(
                f"a CIFAR batch should hold only numpy arrays and lists, found {module}.{name}")
        return super().find_class(module, name)


def _read(path: Path) -> dict:
    try:
        with open(path, "rb") as f:
            return _ArrayUnpickler(f, encoding="latin1").load()
    except (pickle.UnpicklingError, EOFError) as err:
        raise UserError(f"{path} is not a CIFAR batch as torchvision's download writes it ({err}); replace it with "
                        f"the downloaded file (download=true fetches it)") from None


def _torchvision_class(name: str):
    import torchvision

    return torchvision.datasets.CIFAR10 if name == "cifar10" else torchvision.datasets.CIFAR100


def _split(folder: Path, files, name: str, classes) -> ImageSet:
    images, labels = [], []
    for filename, _md5 in files:
        entry = _read(folder / filename)
        images.append(np.asarray(entry["data"], dtype=np.uint8).reshape(-1, 3, 32, 32))
        labels.extend(entry["labels"] if "labels" in entry else entry["fine_labels"])
    images = torch.from_numpy(np.concatenate(images))
    labels = torch.tensor(labels, dtype=torch.int64)
    if labels.numel() and not 0 <= int(labels.min()) <= int(labels.max()) < len(classes):
        raise UserError(f"{folder}: {name} labels should lie in [0, {len(classes)}), got "
                        f"[{int(labels.min())}, {int(labels.max())}]")
    return ImageSet(images=images, labels=labels, masks=None, classes=list(classes))


def read_cifar(data_dir, name: str = "cifar10", download: bool = False):
    """(train, test) ImageSets of CIFAR-10 or CIFAR-100 under data_dir (torchvision's layout);
    download=True fetches it with torchvision first (needs a network)."""
    if name not in ("cifar10", "cifar100"):
        raise ValueError(f"name should be 'cifar10' or 'cifar100', got {name!r}")
    cls = _torchvision_class(name)
    root = Path(data_dir)
    if download:
        cls(str(root), train=True, download=True)
    folder = root / cls.base_folder
    expected = [f for f, _ in cls.train_list + cls.test_list] + [cls.meta["filename"]]
    missing = [f for f in expected if not (folder / f).is_file()]
    if missing:
        raise UserError(f"{name}: expected torchvision's on-disk layout {folder}/{{{', '.join(expected)}}}; "
                        f"missing {', '.join(missing)} (download=True fetches it where a network exists)")
    classes = _read(folder / cls.meta["filename"])[cls.meta["key"]]
    return _split(folder, cls.train_list, "train", classes), _split(folder, cls.test_list, "test", classes)

