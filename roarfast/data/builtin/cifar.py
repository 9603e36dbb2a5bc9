"""The built-in datasets cifar10 and cifar100: CIFAR in torchvision's on-disk format under --data-dir, read by
roarfast.data.cifar."""

from functools import partial

from roarfast.data.registry import register_dataset


def load_cifar(data_dir, name: str = "cifar10", download: bool = False):
    """(train, test) ImageSets of CIFAR-10 or CIFAR-100 under data_dir (torchvision's layout); download=True
    fetches it with torchvision first (needs a network)."""
    # late: reading the batches loads torch and numpy, and every --help lists these datasets
    from roarfast.data.cifar import read_cifar

    return read_cifar(data_dir, name, download)


# `name` bound, not an option: fingerprinted with the data, never set by --data-option
register_dataset("cifar10", "CIFAR-10 in torchvision's on-disk format under --data-dir", order=1)(
    partial(load_cifar, name="cifar10"))
register_dataset("cifar100", "CIFAR-100 in torchvision's on-disk format under --data-dir", order=1)(
    partial(load_cifar, name="cifar100"))
