"""`--dataset torchvision:<Class>`: torchvision's classification datasets already on disk under --data-dir
(nothing is downloaded), in torchvision's own layout and file names.

Most classes are built as torchvision builds them (`Class(root, train=True|False)` or `split="train"|"test"`,
`download=False`, --data-option values as further arguments) and converted once from their (PIL image,
label) items (roarfast.data.convert). SVHN, STL10 and CIFAR10/100 are read here from the same files,
because their constructors insist on the original files' md5 sums, which a subset or a re-packed copy of
the data does not have; the fingerprint hashes every byte anyway.
"""

import inspect
from functools import partial
from pathlib import Path

import numpy as np
import torch

from roarfast.data.base import ImageSet
from roarfast.data.cifar import read_cifar
from roarfast.data.convert import image_sets
from roarfast.data.registry import TORCHVISION_PREFIX
from roarfast.errors import UserError

#: the fixed-size classification datasets the documentation and the tests name (others of torchvision's
#: classification datasets load too when their images share one square size)
DOCUMENTED = ("MNIST", "FashionMNIST", "KMNIST", "EMNIST", "QMNIST", "USPS", "SVHN", "CIFAR10", "CIFAR100", "STL10")
#: constructor arguments roarfast sets itself (the rest come from --data-option)
_SET_HERE = ("self", "root", "train", "split", "transform", "target_transform", "transforms", "download", "loader")


def dataset_class(name: str):
    """torchvision.datasets.<name>, a dataset class torchvision.datasets lists (its __all__: checked before
    anything is called, so a run directory's record naming torchvision:<name> can name nothing else), or a
    UserError listing the classification datasets."""
    import torchvision

    listed = name in getattr(torchvision.datasets, "__all__", ())
    cls = getattr(torchvision.datasets, name, None) if listed else None
    if not (inspect.isclass(cls) and issubclass(cls, torch.utils.data.Dataset)):
        raise UserError(f"--dataset {TORCHVISION_PREFIX}{name}: torchvision.datasets has no dataset {name!r}; "
                        f"classification datasets it reads from disk: {', '.join(DOCUMENTED)}, ...")
    params = inspect.signature(cls.__init__).parameters
    if name not in _READERS and "train" not in params and "split" not in params:
        raise UserError(f"--dataset {TORCHVISION_PREFIX}{name}: takes neither train= nor split=, so it has no train "
                        f"and test split to read")
    return cls


def options_of(name: str) -> dict:
    """{option: default} a torchvision:<name> dataset takes from --data-option (inspect.Parameter.empty:
    required)."""
    if name in _READERS:
        return {}
    params = inspect.signature(dataset_class(name).__init__).parameters
    uses_train = "train" in params  # EMNIST takes train= and its own split= (byclass, digits, ...)
    return {key: p.default for key, p in params.items()
            if key not in _SET_HERE or (key == "split" and uses_train)
            if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)}


def torchvision_loader(name: str, data_dir) -> tuple:
    """`torchvision:<name>` under data_dir (the dataset resolver's scheme): (load(**options) -> (train, test)
    ImageSets, {option: default} it takes from --data-option)."""
    if data_dir is None:
        raise UserError(f"--dataset {TORCHVISION_PREFIX}{name} needs --data-dir (torchvision's files are read from "
                        f"there; nothing is downloaded)")
    return partial(load_torchvision, name, data_dir), options_of(name)


def load_torchvision(name: str, data_dir, **options) -> tuple[ImageSet, ImageSet]:
    """(train, test) ImageSets of torchvision.datasets.<name> under data_dir."""
    cls = dataset_class(name)
    root = Path(data_dir)
    where = f"--dataset {TORCHVISION_PREFIX}{name}"
    if name in _READERS:
        return _READERS[name](cls, root, where)
    params = inspect.signature(cls.__init__).parameters

    def split(train: bool):
        kwargs = dict(options)
        if "train" in params:
            kwargs["train"] = train
        else:
            kwargs["split"] = "train" if train else "test"
        if "download" in params:
            kwargs["download"] = False
        try:
            return cls(str(root), **kwargs)
        except (RuntimeError, OSError, ValueError) as err:
            raise UserError(f"{where}: no usable files under {root} (torchvision: {' '.join(str(err).split())}); "
                            f"roarfast downloads nothing: put the files there in torchvision's layout") from None

    return image_sets((split(True), split(False)), where)


def _svhn(cls, root: Path, where: str):
    """SVHN's train_32x32.mat / test_32x32.mat (X: [32, 32, 3, N], y: [N, 1] with 10 for the digit 0), read as
    torchvision reads them."""
    from scipy.io import loadmat

    parts = []
    for split in ("train", "test"):
        path = root / cls.split_list[split][1]
        if not path.is_file():
            raise UserError(f"{where}: {path} is missing (roarfast downloads nothing)")
        mat = loadmat(str(path))
        images = torch.from_numpy(np.ascontiguousarray(np.transpose(mat["X"], (3, 2, 0, 1)), dtype=np.uint8))
        labels = torch.from_numpy(mat["y"].astype(np.int64).reshape(-1) % 10)
        parts.append((images, labels))
    return image_sets((*parts, [str(d) for d in range(10)]), where)


def _stl10(cls, root: Path, where: str):
    """STL10's stl10_binary/{train,test}_X.bin (uint8, column-major 3x96x96 images) and _y.bin (labels 1..10)."""
    folder = root / cls.base_folder
    parts = []
    for files in (cls.train_list, cls.test_list):
        (images_file, _), (labels_file, _) = files[:2]  # the train list ends with the unlabeled images
        for name in (images_file, labels_file):
            if not (folder / name).is_file():
                raise UserError(f"{where}: {folder / name} is missing (roarfast downloads nothing)")
        images = np.fromfile(folder / images_file, dtype=np.uint8).reshape(-1, 3, 96, 96).transpose(0, 1, 3, 2)
        labels = np.fromfile(folder / labels_file, dtype=np.uint8).astype(np.int64) - 1
        parts.append((torch.from_numpy(np.ascontiguousarray(images)), torch.from_numpy(labels)))
    names_file = folder / cls.class_names_file
    classes = names_file.read_text().split() if names_file.is_file() else None
    return image_sets((*parts, classes) if classes else tuple(parts), where)


def _cifar(cls, root: Path, where: str):
    return read_cifar(root, name=cls.__name__.lower())


#: the classes read here rather than by their constructors (see the module's docstring)
_READERS = {"SVHN": _svhn, "STL10": _stl10, "CIFAR10": _cifar, "CIFAR100": _cifar}
