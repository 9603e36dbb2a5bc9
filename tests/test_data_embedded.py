"""The embedded dataset (README, "The embedded dataset") and the Dataset wrapper: determinism, geometry of the object
and its mask, class information only in the object, statistics, validation split and fingerprint."""

import pytest
import torch

from roarfast.data import channel_stats, load_dataset, val_split
from roarfast.data.builtin.embedded import load_embedded
from roarfast.data.embedded import OBJECT_SIZE
from roarfast.errors import UserError


@pytest.fixture(scope="module")
def small():
    return load_embedded(num_train=600, num_test=200, seed=7)


def test_same_seed_same_bytes_other_seed_other_bytes():
    a_train, a_test = load_embedded(num_train=50, num_test=20, seed=1)
    b_train, b_test = load_embedded(num_train=50, num_test=20, seed=1)
    c_train, _ = load_embedded(num_train=50, num_test=20, seed=2)
    assert torch.equal(a_train.images, b_train.images) and torch.equal(a_test.images, b_test.images)
    assert torch.equal(a_train.labels, b_train.labels) and torch.equal(a_train.masks, b_train.masks)
    assert not torch.equal(a_train.images, c_train.images)
    assert not torch.equal(a_train.images[:20], a_test.images)  # test is not a copy of train


def test_shapes_classes_balanced(small):
    train, test = small
    assert train.images.shape == (600, 3, 32, 32) and train.images.dtype == torch.uint8
    assert test.images.shape == (200, 3, 32, 32)
    assert len(train.classes) == 10
    assert torch.equal(torch.bincount(train.labels, minlength=10), torch.full((10,), 60))


@pytest.mark.parametrize("copies", [1, 3])
def test_mask_is_copies_of_one_8x8_square(copies):
    train, _ = load_embedded(num_train=100, num_test=10, seed=0, copies=copies)
    area = OBJECT_SIZE * OBJECT_SIZE
    assert torch.equal(train.masks.flatten(1).sum(1), torch.full((100,), copies * area))
    if copies == 1:  # the oracle's covering fraction: 64 / 1024 pixels
        assert train.masks.flatten(1).float().mean(1).max().item() == pytest.approx(0.0625)
        rows = train.masks.any(2).float().sum(1)
        cols = train.masks.any(1).float().sum(1)
        assert torch.equal(rows, torch.full((100,), 8.0)) and torch.equal(cols, torch.full((100,), 8.0))


def _object_patterns(images):
    """Two-colour pattern of each 8x8 object as bool [N, 8, 8]: pixel differs from the object's corner."""
    patterns = []
    for img, mask in zip(images.images, images.masks):
        ys, xs = mask.nonzero(as_tuple=True)
        crop = img[:, ys.min():ys.min() + OBJECT_SIZE, xs.min():xs.min() + OBJECT_SIZE].int()
        patterns.append((crop - crop[:, :1, :1]).abs().amax(0) > 40)
    return torch.stack(patterns)


def test_class_lives_in_the_object_content(small):
    """Same class: same texture (up to colour order); the object carries the class, the square shape does not."""
    train, _ = small
    patterns = _object_patterns(train)
    texture_of = {}
    for label in range(10):
        p = patterns[train.labels == label]
        first = p[0]
        assert all(torch.equal(q, first) or torch.equal(q, ~first) for q in p), f"class {label} mixes textures"
        texture_of[label] = first
    # five textures, each shared by a warm and a cool class (labels t and t + 5)
    distinct = {tuple(t.flatten().tolist()) for t in texture_of.values()}
    assert len(distinct) == 5
    assert all(torch.equal(texture_of[t], texture_of[t + 5]) for t in range(5))


def _colour_histograms(images, background_only):
    """64-bin colour histogram (4 levels per channel) of each image, or of its background only."""
    q = (images.images // 64).long()
    code = (q[:, 0] * 16 + q[:, 1] * 4 + q[:, 2]).flatten(1)
    weight = (~images.masks if background_only else torch.ones_like(images.masks)).flatten(1).float()
    hist = torch.zeros(len(images), 64).scatter_add_(1, code, weight)
    return torch.cat([hist / weight.sum(1, keepdim=True), torch.ones(len(images), 1)], 1)


def test_background_carries_no_class_information():
    """A least-squares probe on colour histograms finds the class in whole images but not in the background."""
    train, test = load_embedded(num_train=3000, num_test=1000, seed=3)
    accuracy = {}
    for background_only in (False, True):
        x, y = _colour_histograms(train, background_only), torch.nn.functional.one_hot(train.labels, 10).float()
        weights = torch.linalg.lstsq(x, y).solution
        predicted = (_colour_histograms(test, background_only) @ weights).argmax(1)
        accuracy[background_only] = predicted.eq(test.labels).float().mean().item()
    assert accuracy[False] >= 0.17  # the object's palette is visible to the probe
    assert accuracy[True] <= 0.14  # chance is 0.10; 1,000 test images: std 0.0095


def test_bad_options_are_named():
    with pytest.raises(ValueError, match="copies"):
        load_embedded(copies=0)
    with pytest.raises(ValueError, match="num_train"):
        load_embedded(num_train=5)
    with pytest.raises(UserError, match="unknown option"):
        load_dataset("embedded", colour=3)
    with pytest.raises(UserError, match=r"--dataset should be a built-in name \(embedded \| cifar10 \| cifar100 \| "
                                        r"imagefolder\), torchvision:<name> .*, or package.module:factory .*got 'mnist'"):
        load_dataset("mnist")


def test_dataset_wrapper_stats_split_fingerprint():
    ds = load_dataset("embedded", num_train=100, num_test=20, seed=4)
    pixels = ds.train.images.double() / 255
    assert ds.mean == pytest.approx(pixels.mean(dim=(0, 2, 3)).tolist(), abs=1e-9)
    assert ds.std == pytest.approx(pixels.std(dim=(0, 2, 3), unbiased=False).tolist(), abs=1e-9)
    assert (ds.num_classes, ds.channels, ds.image_size) == (10, 3, 32)
    # val: 10% of train, seeded, disjoint from the training indices, together all of train
    assert ds.val_index.shape == (10,)
    assert torch.equal(torch.sort(torch.cat([ds.val_index, ds.train_index])).values, torch.arange(100))
    assert torch.equal(ds.val_index, load_dataset("embedded", num_train=100, num_test=20, seed=4).val_index)
    assert ds.split("test") is ds.test
    with pytest.raises(ValueError, match="split"):
        ds.split("val")
    # the fingerprint follows data and options
    same = load_dataset("embedded", num_train=100, num_test=20, seed=4)
    other_seed = load_dataset("embedded", num_train=100, num_test=20, seed=5)
    other_copies = load_dataset("embedded", num_train=100, num_test=20, seed=4, copies=2)
    assert ds.fingerprint == same.fingerprint
    assert len({ds.fingerprint, other_seed.fingerprint, other_copies.fingerprint}) == 3


def test_channel_stats_chunked_equals_whole():
    images = torch.randint(0, 256, (37, 2, 5, 4), dtype=torch.uint8)
    whole = channel_stats(images, chunk=1000)
    chunked = channel_stats(images, chunk=5)
    assert whole[0] == pytest.approx(chunked[0], abs=1e-12) and whole[1] == pytest.approx(chunked[1], abs=1e-12)


def test_val_split_differs_by_seed():
    assert not torch.equal(val_split(100, 0), val_split(100, 1))
    assert val_split(5, 0).shape == (1,)  # at least one held-out image
