"""--dataset beyond the built-ins: a user's factory (a tensor pair, or a torch Dataset of PIL images),
torchvision's classification datasets from files written here in the formats torchvision reads, and
one-channel data through every stage; the --dataset help, which lists the built-ins and every other form."""

import json
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from click.testing import CliRunner

from roarfast.cli import main
from roarfast.data import DATASETS, load_dataset
from roarfast.errors import UserError
from roarfast.stages.fill_leakage import measure
from roarfast.rundir.directory import RunDir
from tests.plugin_files import write_module
from tests.test_data_cifar import fabricate
from tests.test_models import help_line

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
from fashion_cli import garments, write_mnist_format  # noqa: E402  (the example's own IDX writer)

CPU = ["--device", "cpu", "--no-progress"]


@pytest.mark.parametrize("channels", [1, 3])
def test_a_dataset_of_pil_images_is_the_tensor_pair_it_came_from(tmp_path, monkeypatch, channels):
    module = write_module(tmp_path, monkeypatch)
    pairs = load_dataset(f"{module}:tensors", channels=channels)
    pil = load_dataset(f"{module}:pil_images", channels=channels)
    for split in ("train", "test"):
        assert torch.equal(pil.split(split).images, pairs.split(split).images)
        assert torch.equal(pil.split(split).labels, pairs.split(split).labels)
    assert pil.channels == channels and pil.train.classes == ["dark", "dim", "bright", "white"]
    # the fingerprint covers the spec and the options as well as the bytes
    assert pil.fingerprint != pairs.fingerprint
    assert load_dataset(f"{module}:tensors", channels=channels, seed=1).fingerprint != pairs.fingerprint
    assert load_dataset(f"{module}:tensors", channels=channels).fingerprint == pairs.fingerprint


class FloatItems(torch.utils.data.Dataset):
    def __len__(self):
        return 3

    def __getitem__(self, i):
        return torch.rand(3, 4, 4), 0


def test_a_dataset_of_float_tensors_is_told_to_leave_out_totensor():
    with pytest.raises(UserError, match=r"train item 0: image should be a uint8 Tensor\[C, H, W\] or a PIL image, "
                                        r"got float32 Tensor\[3, 4, 4\] .*leave out ToTensor and Normalize"):
        load_dataset((FloatItems(), FloatItems()))


@pytest.mark.parametrize("name", ["MNIST", "FashionMNIST", "KMNIST"])
def test_torchvision_mnist_family_from_idx_files(tmp_path, name):
    train, test = garments(30, seed=0), garments(10, seed=1)
    write_mnist_format(tmp_path, name, {"train": train, "test": test})
    ds = load_dataset(f"torchvision:{name}", tmp_path)
    assert ds.name == f"torchvision:{name}" and ds.channels == 1 and ds.image_size == 28
    for split, (images, labels) in (("train", train), ("test", test)):
        assert torch.equal(ds.split(split).images[:, 0], torch.from_numpy(images))
        assert torch.equal(ds.split(split).labels, torch.from_numpy(labels).long())
    assert len(ds.train.classes) == 10


def write_svhn(root: Path, n: int, seed: int) -> dict:
    """train_32x32.mat / test_32x32.mat as SVHN ships them: X [32, 32, 3, N], y [N, 1] with 10 for the digit 0."""
    from scipy.io import savemat

    rng = np.random.default_rng(seed)
    written = {}
    for split in ("train", "test"):
        x = rng.integers(0, 256, (32, 32, 3, n), dtype=np.uint8)
        digits = rng.integers(0, 10, n)
        savemat(root / f"{split}_32x32.mat", {"X": x, "y": np.where(digits == 0, 10, digits).reshape(-1, 1)})
        written[split] = (torch.from_numpy(x).permute(3, 2, 0, 1), torch.from_numpy(digits))
    return written


def test_torchvision_svhn_from_mat_files(tmp_path):
    written = write_svhn(tmp_path, 12, seed=0)
    ds = load_dataset("torchvision:SVHN", tmp_path)
    for split, (images, labels) in written.items():
        assert torch.equal(ds.split(split).images, images) and torch.equal(ds.split(split).labels, labels)
    assert ds.train.classes == [str(d) for d in range(10)]


def test_torchvision_stl10_from_binary_files(tmp_path):
    folder = tmp_path / "stl10_binary"
    folder.mkdir()
    rng = np.random.default_rng(0)
    written = {}
    for split in ("train", "test"):
        images = rng.integers(0, 256, (3, 3, 96, 96), dtype=np.uint8)
        labels = np.array([1, 10, 4], dtype=np.uint8)  # 1..10 on disk
        images.transpose(0, 1, 3, 2).tofile(folder / f"{split}_X.bin")  # STL10 stores images column-major
        labels.tofile(folder / f"{split}_y.bin")
        written[split] = (torch.from_numpy(images), torch.from_numpy(labels.astype(np.int64) - 1))
    (folder / "class_names.txt").write_text("\n".join(f"c{i}" for i in range(10)))
    ds = load_dataset("torchvision:STL10", tmp_path)
    for split, (images, labels) in written.items():
        assert torch.equal(ds.split(split).images, images) and torch.equal(ds.split(split).labels, labels)
    assert ds.train.classes[9] == "c9"


def test_torchvision_cifar10_reads_the_cifar_files(tmp_path):
    written = fabricate(tmp_path)
    ds = load_dataset("torchvision:CIFAR10", tmp_path)
    assert torch.equal(ds.train.images, written["train"][0]) and torch.equal(ds.test.labels, written["test"][1])


#: every command that takes --dataset
DATASET_COMMANDS = sorted(name for name, command in main.commands.items()
                          if any("--dataset" in getattr(param, "opts", ()) for param in command.params))


def test_the_stages_that_load_data_take_dataset():
    assert {"train", "extract", "sweep"} <= set(DATASET_COMMANDS)


@pytest.mark.parametrize("command", DATASET_COMMANDS)
def test_the_dataset_help_lists_every_builtin_with_its_description_and_options(command):
    line = help_line(command, "--dataset")
    for entry in DATASETS:
        assert f"{entry.name}: {entry.description}" in line and ", ".join(entry.options) in line
    assert "cifar10: " in line and "num_train, num_test, seed, copies" in line  # the loaders' own signatures
    assert "torchvision:<name>" in line and "package.module:factory" in line


def test_a_torchvision_set_without_a_data_dir_says_so():
    with pytest.raises(UserError, match=r"--dataset torchvision:MNIST needs --data-dir"):
        load_dataset("torchvision:MNIST")


def test_a_torchvision_set_without_its_files_says_so(tmp_path):
    with pytest.raises(UserError, match=r"--dataset torchvision:MNIST: no usable files under .*roarfast downloads "
                                        r"nothing"):
        load_dataset("torchvision:MNIST", tmp_path)


def test_one_channel_data_goes_through_every_stage(tmp_path):
    write_mnist_format(tmp_path / "data", "MNIST", {"train": garments(60, seed=0), "test": garments(30, seed=1)})
    run = tmp_path / "run"
    grid = ["--run-dir", run, "--dataset", "torchvision:MNIST", "--data-dir", tmp_path / "data", "--method",
            "grad,gradcam", "--fraction", "0.5", "--mode", "roar,kar", "--seeds", "1", "--recipe", "epochs=1",
            *CPU]
    for args in (["sweep", *grid], ["sweep", *grid, "--fill", "road"],
                 ["evaluate", "--run-dir", run, "--metric", "morf,road", "--fraction", "0.5", *CPU],
                 ["report", "--run-dir", run]):
        result = CliRunner().invoke(main, [str(a) for a in args])
        assert result.exit_code == 0, (args[0], result.output)
    assert RunDir(run).base_meta()["in_channels"] == 1
    assert RunDir(run).rank_store.read("gradcam", "train").ranks.shape == (60, 28, 28)
    summary = json.loads((run / "report" / "summary.json").read_text())
    assert set(summary["fills"]) == {"dataset-mean", "road"} and summary["no_retrain"]
    assert {f["file"] for f in summary["figures"]} >= {"examples.png", "accuracy_road.png", "fills.png"}
    # the fill-leakage detector on one channel (a few steps: `roarfast leakage` trains it for minutes)
    ds = RunDir(run).open_dataset()
    pairs = [(ds.split(s).images, RunDir(run).rank_store.read("random", s).tensor()) for s in ("train", "test")]
    rows = measure(*pairs, ("dataset-mean", "road"), (0.5,), ds.mean, ds.std, steps=3)
    assert [(r["fill"], r["base_rate"]) for r in rows] == [("dataset-mean", 0.5), ("road", 0.5)]
