"""JPEG trees through the real DALI path (CPU pipeline here) and, with DALI's import blocked, through the
CPU decoder that replaces it: sample order, the resize-shorter-side + center-crop canvas, corrupt files
named or skipped, empty class folders and layout errors refused, and the shared photo set when present."""

import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from roarfast.data import load_dataset
from roarfast.data.builtin.imagefolder import load_imagefolder
from roarfast.errors import UserError

HYMENOPTERA = Path(__file__).resolve().parents[2] / "shared" / "data" / "hymenoptera"
#: JPEG error allowed on flat colours and on the canvas geometry checks (uint8 levels)
JPEG_TOLERANCE = 12


def block_dali(monkeypatch):
    """Makes `import nvidia.dali` fail, as on a machine without it; the one-time note is said again."""
    from roarfast.data import decode

    monkeypatch.setitem(sys.modules, "nvidia.dali", None)
    monkeypatch.setattr(decode, "_said", [])


@pytest.fixture(params=["dali", "cpu"])
def decoder(request, monkeypatch):
    """Each decoder in turn: DALI (skipped where it is not installed), then the CPU decoder with DALI blocked."""
    from roarfast.data.decode import dali_installed

    if request.param == "dali" and not dali_installed():
        pytest.skip("nvidia-dali is not installed")
    if request.param == "cpu":
        block_dali(monkeypatch)
    return request.param


def _save(path: Path, array: np.ndarray):
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(array).save(path, quality=95)


def _solid(colour, height=20, width=28):
    return np.broadcast_to(np.array(colour, dtype=np.uint8), (height, width, 3)).copy()


@pytest.fixture
def tree(tmp_path):
    """train/{cat,dog} and val/{cat,dog}, each image one flat colour, sizes varied; returns the colours
    per split in ImageFolder order (class, then file name)."""
    rng = np.random.default_rng(0)
    colours = {"train": [], "val": []}
    for split, per_class in (("train", 3), ("val", 2)):
        for cls in ("cat", "dog"):
            for i in range(per_class):
                colour = rng.integers(30, 226, 3)
                _save(tmp_path / split / cls / f"img{i}.jpg", _solid(colour, 18 + 4 * i, 30 - 3 * i))
                colours[split].append(colour)
    return tmp_path, colours


def test_samples_in_imagefolder_order(tree, decoder):
    root, colours = tree
    train, test = load_imagefolder(root, resize=16, crop=12, device="cpu", batch_size=4)  # 6 = 4 + a partial batch
    assert train.images.shape == (6, 3, 12, 12) and train.images.dtype == torch.uint8
    assert train.classes == ["cat", "dog"]
    assert train.labels.tolist() == [0, 0, 0, 1, 1, 1] and test.labels.tolist() == [0, 0, 1, 1]
    for split, images in (("train", train), ("val", test)):
        got = images.images.float().mean(dim=(2, 3))
        expected = torch.tensor(np.array(colours[split]), dtype=torch.float32)
        assert (got - expected).abs().max() <= JPEG_TOLERANCE, split


def canvas_of(tmp_path, image, wide: bool):
    """The 12 px canvas (resize shorter side 16, center crop 12) of `image` as int Tensor[H, W, 3], read
    along the image's long axis (transposed back when the image is tall)."""
    for split in ("train", "test"):
        for cls in ("x", "y"):  # two classes: a one-class tree is refused
            _save(tmp_path / split / cls / "a.jpg", image)
    train, _ = load_imagefolder(tmp_path, resize=16, crop=12, device="cpu")
    canvas = train.images[0].permute(1, 2, 0).int()
    return canvas if wide else canvas.transpose(0, 1)


@pytest.mark.parametrize("wide", [True, False])
def test_canvas_is_shorter_side_resize_then_center_crop(tmp_path, wide, decoder):
    """A 20x40 (or 40x20) image split into two colours along its long side: resize shorter side to 16
    (-> 16x32), center crop 12: the crop's first half is the first colour, its second half the second."""
    first, second = (200, 30, 30), (30, 30, 200)
    image = np.concatenate([_solid(first, 20, 20), _solid(second, 20, 20)], axis=1 if wide else 0)
    canvas = canvas_of(tmp_path, image, wide)
    # away from the seam (4 px each side: antialiased resize blurs it)
    assert (canvas[:, :4] - torch.tensor(first)).abs().max() <= JPEG_TOLERANCE
    assert (canvas[:, 8:] - torch.tensor(second)).abs().max() <= JPEG_TOLERANCE


def test_corrupt_file_is_named_or_skipped(tree, caplog):
    root, _ = tree
    (root / "val" / "dog" / "broken.jpg").write_bytes(b"\xff\xd8\xff\xe0 truncated")
    with pytest.raises(UserError, match="dog/broken.jpg"):
        load_imagefolder(root, resize=16, crop=12, device="cpu")
    with caplog.at_level("WARNING"):
        _, test = load_imagefolder(root, resize=16, crop=12, device="cpu", skip_bad=True)
    assert len(test) == 4 and "broken.jpg" in caplog.text


def test_layout_errors(tmp_path, tree):
    with pytest.raises(UserError, match="train/<class>"):
        load_imagefolder(tmp_path / "nowhere")
    root, _ = tree
    _save(root / "val" / "bird" / "a.jpg", _solid((1, 2, 3)))
    with pytest.raises(UserError, match="bird"):
        load_imagefolder(root, resize=16, crop=12, device="cpu")
    with pytest.raises(UserError, match="crop"):
        load_imagefolder(root, resize=16, crop=20, device="cpu")


@pytest.mark.parametrize("split", ["train", "val"])
def test_an_empty_class_folder_is_refused_naming_it(tree, split):
    """A class no image shows would be a label the model learns to predict from nothing (torchvision's
    ImageFolder refuses it too)."""
    root, _ = tree
    (root / split / "zebra").mkdir()
    if split == "val":
        (root / "train" / "zebra").mkdir()
        _save(root / "train" / "zebra" / "a.jpg", _solid((1, 2, 3)))
    (root / split / "zebra" / "notes.txt").write_text("not an image")
    with pytest.raises(UserError, match=f"{root / split / 'zebra'} holds no images .*add its images or remove the "
                                        f"folder"):
        load_imagefolder(root, resize=16, crop=12, device="cpu")


def test_the_undecodable_file_hint_is_the_option_as_typed(tree):
    root, _ = tree
    (root / "val" / "dog" / "broken.jpg").write_bytes(b"\xff\xd8\xff\xe0 truncated")
    with pytest.raises(UserError, match=r"\(--data-option skip_bad=true skips them\)"):
        load_imagefolder(root, resize=16, crop=12, device="cpu")


def test_through_load_dataset(tree):
    root, _ = tree
    ds = load_dataset("imagefolder", root, resize=16, crop=12, device="cpu")
    assert ds.image_size == 12 and ds.num_classes == 2 and ds.options["crop"] == 12
    other = load_dataset("imagefolder", root, resize=20, crop=12, device="cpu")
    assert other.fingerprint != ds.fingerprint


@pytest.mark.skipif(not HYMENOPTERA.is_dir(), reason="shared photo set absent")
def test_real_photos_of_varied_sizes():
    train, test = load_imagefolder(HYMENOPTERA, resize=64, crop=56, device="cpu")
    assert train.classes == ["ants", "bees"]
    assert train.images.shape[1:] == (3, 56, 56) and len(train) >= 240 and len(test) >= 150
    assert train.images.float().std() > 20  # real content, not a padded or blank canvas
