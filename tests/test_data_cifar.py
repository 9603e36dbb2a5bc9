"""CIFAR-10/100 from a fabricated directory in torchvision's exact on-disk format (pickled batches)."""

import pickle

import numpy as np
import pytest
import torch

from roarfast.data import load_dataset
from roarfast.data.builtin.cifar import load_cifar
from roarfast.errors import UserError


def _write(path, obj):
    with open(path, "wb") as f:
        pickle.dump(obj, f, protocol=2)


def fabricate(root, name="cifar10", per_batch=4, seed=0):
    """A tiny CIFAR tree as torchvision writes it; returns the images and labels it holds per split."""
    rng = np.random.default_rng(seed)
    if name == "cifar10":
        folder, test_files = root / "cifar-10-batches-py", ["test_batch"]
        train_files = [f"data_batch_{i}" for i in range(1, 6)]
        label_key, meta_file, meta = "labels", "batches.meta", {"label_names": [f"c{i}" for i in range(10)]}
        num_classes = 10
    else:
        folder, train_files, test_files = root / "cifar-100-python", ["train"], ["test"]
        label_key, meta_file = "fine_labels", "meta"
        meta = {"fine_label_names": [f"f{i}" for i in range(100)], "coarse_label_names": [f"k{i}" for i in range(20)]}
        num_classes = 100
    folder.mkdir(parents=True)
    written = {}
    for split, files in (("train", train_files), ("test", test_files)):
        images, labels = [], []
        for filename in files:
            data = rng.integers(0, 256, (per_batch, 3072), dtype=np.uint8)
            lab = rng.integers(0, num_classes, per_batch).tolist()
            _write(folder / filename, {"batch_label": filename, label_key: lab, "data": data,
                                       "filenames": [f"{filename}_{i}.png" for i in range(per_batch)]})
            images.append(data.reshape(-1, 3, 32, 32))
            labels += lab
        written[split] = (torch.from_numpy(np.concatenate(images)), torch.tensor(labels))
    _write(folder / meta_file, meta)
    return written


@pytest.mark.parametrize("name", ["cifar10", "cifar100"])
def test_reads_torchvision_layout(tmp_path, name):
    written = fabricate(tmp_path, name)
    train, test = load_cifar(tmp_path, name)
    assert torch.equal(train.images, written["train"][0]) and torch.equal(train.labels, written["train"][1])
    assert torch.equal(test.images, written["test"][0]) and torch.equal(test.labels, written["test"][1])
    assert len(train.classes) == (10 if name == "cifar10" else 100) and train.masks is None
    ds = load_dataset(name, tmp_path)
    assert ds.name == name and ds.image_size == 32 and len(ds.train) == len(written["train"][1])


def test_rows_are_channel_planes(tmp_path):
    """A CIFAR row is 1024 red, 1024 green, 1024 blue values, each plane row-major."""
    written = fabricate(tmp_path)
    train, _ = load_cifar(tmp_path)
    with open(tmp_path / "cifar-10-batches-py" / "data_batch_1", "rb") as f:
        row = pickle.load(f, encoding="latin1")["data"][0]
    assert train.images[0, 1, 2, 3].item() == row[1024 + 2 * 32 + 3]
    assert torch.equal(train.images[0], written["train"][0][0])


def test_missing_files_name_the_layout(tmp_path):
    with pytest.raises(UserError, match="cifar-10-batches-py.*data_batch_1"):
        load_cifar(tmp_path)
    with pytest.raises(UserError, match="--data-dir"):
        load_dataset("cifar10")


def test_a_batch_cannot_run_code(tmp_path):
    fabricate(tmp_path)

    class Evil:
        def __reduce__(self):
            return (print, ("pwned",))

    _write(tmp_path / "cifar-10-batches-py" / "test_batch", {"data": Evil(), "labels": []})
    with pytest.raises(UserError, match="test_batch is not a CIFAR batch .*found .*print.*download=true"):
        load_cifar(tmp_path)
