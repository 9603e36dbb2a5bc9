"""num_train / num_test for every dataset form: a seeded, stratified subset (each class in proportion, the same rows
for a seed, recorded in the fingerprint) of what the built-ins (cifar10, imagefolder), torchvision:, a factory and
an object give, the rows the whole split's loading would give; embedded keeps its own meaning (it generates that
many); sizes that cannot be are refused in one line naming the option and the limit."""

import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from roarfast.data import load_dataset
from roarfast.data.embedded import make_split
from roarfast.data.subset import Subset, stratified
from roarfast.errors import UserError
from tests.test_data_cifar import fabricate

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
from fashion_cli import garments, write_mnist_format  # noqa: E402  (the example's own IDX writer)


def test_each_class_keeps_its_share_by_largest_remainders():
    labels = np.repeat([0, 1, 2], [50, 30, 20])
    rows = stratified(labels, 10, np.random.default_rng(0))
    assert np.bincount(labels[rows]).tolist() == [5, 3, 2]
    assert (np.diff(rows) > 0).all()  # in the split's order
    # 4 of three equal classes: one each, the remainder to the lower class
    even = np.repeat([0, 1, 2], 5)
    assert np.bincount(even[stratified(even, 4, np.random.default_rng(0))]).tolist() == [2, 1, 1]
    # 7 of 9 + 3 + 2: quotas 4.5, 1.5, 1.0 -> 4, 1, 1 and one more for the larger remainder tied at .5: class 0
    mixed = np.repeat([0, 1, 2], [9, 3, 2])
    assert np.bincount(mixed[stratified(mixed, 7, np.random.default_rng(0))]).tolist() == [5, 1, 1]


def test_the_rows_follow_the_seed():
    labels = np.arange(200) % 4
    first = Subset(num_train=40, seed=0).rows("train", labels, 4, "data")
    assert np.array_equal(first, Subset(num_train=40, seed=0).rows("train", labels, 4, "data"))
    assert not np.array_equal(first, Subset(num_train=40, seed=1).rows("train", labels, 4, "data"))
    assert not np.array_equal(first, Subset(num_test=40, seed=0).rows("test", labels, 4, "data"))  # another stream
    assert Subset(num_train=40).rows("test", labels, 4, "data") is None


def _tensor_pair(n_train=60, n_test=30):
    generator = torch.Generator().manual_seed(0)

    def split(n):
        return torch.randint(0, 256, (n, 3, 8, 8), generator=generator, dtype=torch.uint8), torch.arange(n) % 3

    return split(n_train), split(n_test), ["a", "b", "c"]


def _image_tree(root: Path) -> Path:
    """A 3-class tree of 32 px JPEGs: 8, 6, 4 train and 4 test images per class."""
    rng = np.random.default_rng(0)
    for split, counts in (("train", (8, 6, 4)), ("val", (4, 4, 4))):
        for label, count in enumerate(counts):
            (root / split / f"c{label}").mkdir(parents=True)
            for i in range(count):
                Image.fromarray(rng.integers(0, 256, (32, 32, 3), dtype=np.uint8)).save(
                    root / split / f"c{label}" / f"{i}.jpg", quality=90)
    return root


def _forms(tmp_path, monkeypatch):
    """(name, data_dir, options) of one dataset of every form whose subset the resolver makes."""
    fabricate(tmp_path / "cifar", per_batch=12)
    write_mnist_format(tmp_path / "mnist", "MNIST", {"train": garments(50, seed=0), "test": garments(20, seed=1)})
    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "subset_factory.py").write_text(
        "import torch\n\ndef pairs(n=60):\n    g = torch.Generator().manual_seed(0)\n"
        "    def split(k):\n        return torch.randint(0, 256, (k, 3, 8, 8), generator=g, dtype=torch.uint8), "
        "torch.arange(k) % 3\n    return split(n), split(30)\n")
    monkeypatch.syspath_prepend(str(tmp_path / "code"))
    return [("cifar10", tmp_path / "cifar", {}), ("imagefolder", _image_tree(tmp_path / "tree"), {"device": "cpu"}),
            ("torchvision:MNIST", tmp_path / "mnist", {}), ("subset_factory:pairs", None, {}),
            (_tensor_pair(), None, {})]


def test_every_form_gives_the_stratified_rows_of_its_whole_split_and_records_them(tmp_path, monkeypatch):
    for name, data_dir, options in _forms(tmp_path, monkeypatch):
        whole = load_dataset(name, data_dir, **options)
        part = load_dataset(name, data_dir, num_train=12, num_test=10, **options)
        for split, count in (("train", 12), ("test", 10)):
            labels = whole.split(split).labels
            rows = torch.from_numpy(Subset(num_train=12, num_test=10).rows(split, labels, whole.num_classes, "-"))
            assert len(part.split(split)) == count, name
            assert torch.equal(part.split(split).labels, labels[rows]), name
            assert torch.equal(part.split(split).images, whole.split(split).images[rows]), name
        assert part.options["num_train"] == 12 and part.options["num_test"] == 10
        assert part.fingerprint != whole.fingerprint
        assert load_dataset(name, data_dir, num_train=12, num_test=10, **options).fingerprint == part.fingerprint
        other_seed = load_dataset(name, data_dir, num_train=12, num_test=10, val_seed=1, **options)
        assert not torch.equal(other_seed.train.images, part.train.images), name


def test_embedded_generates_num_train_images_as_before():
    ds = load_dataset("embedded", num_train=40, num_test=20)
    assert torch.equal(ds.train.images, make_split(40, 0, 0, 1).images)
    assert torch.equal(ds.test.images, make_split(20, 0, 1, 1).images)


@pytest.mark.parametrize("option, value, says", [
    ("num_train", 99999999999, "--data-option num_train=99999999999: the train split of {where} holds 60 images; "
                               "at most 60"),
    ("num_test", 31, "--data-option num_test=31: the test split of {where} holds 30 images; at most 30"),
    ("num_train", 0, "--data-option num_train should be a positive int (images of the train split to keep), got 0"),
    ("num_train", -5, "--data-option num_train should be a positive int (images of the train split to keep), got -5"),
    ("num_train", 2.5, "--data-option num_train should be a positive int (images of the train split to keep), got "
                       "2.5"),
    ("num_train", 2, "--data-option num_train=2: {where} has 3 classes, so a stratified subset needs at least 3 "
                     "images (one per class)"),
])
def test_sizes_that_cannot_be_are_refused_naming_the_option_and_the_limit(option, value, says):
    with pytest.raises(UserError) as err:
        load_dataset(_tensor_pair(), **{option: value})
    assert str(err.value) == says.format(where="object:tensors")


def test_a_tree_larger_than_asked_is_read_only_where_the_subset_keeps_files(tmp_path, monkeypatch):
    from roarfast.data import imagefolder

    tree = _image_tree(tmp_path / "tree")
    decoded = []
    original = imagefolder.decode_split
    monkeypatch.setattr(imagefolder, "decode_split", lambda d, files, *a, **k: decoded.extend(files) or original(
        d, files, *a, **k))
    load_dataset("imagefolder", tree, device="cpu", num_train=6, num_test=3)
    assert len(decoded) == 9  # of 30
    with pytest.raises(UserError, match=r"--data-option num_train=19: the train split of imagefolder .*tree holds 18 "
                                        r"images; at most 18"):
        load_dataset("imagefolder", tree, device="cpu", num_train=19)
