"""The extract and retrain options reach what they promise, checked against independent computations:
--granularity value and --reduction abs_sum|max rank as roarfast._reference does, --seeds N trains N
cells, --fill zero|imagenet-mean replaces with black or ImageNet's mean computed here from the pixels."""

import sqlite3

import pytest
import torch
from click.testing import CliRunner

from roarfast import _reference, ops
from roarfast.cli import main
from roarfast.data import load_dataset
from roarfast.methods import ExplainBatch, MethodParams, compute_maps
from roarfast.rundir.directory import RunDir
from tests.model_inputs import record_eval_inputs

#: a tiny embedded dataset on the CPU
SIZES = {"num_train": 20, "num_test": 10}
TINY = [arg for key, n in SIZES.items() for arg in ("--data-option", f"{key}={n}")] + ["--device", "cpu",
                                                                                       "--no-progress"]


@pytest.fixture(scope="module")
def dataset():
    return load_dataset("embedded", **SIZES)


def invoke(args):
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    return result


def _test_maps(dataset, method):
    """The model-free estimator's maps of the test split, computed directly (seed 0, global indices)."""
    split = dataset.split("test")
    x = ops.mask_normalize(split.images, None, mean=dataset.mean, std=dataset.std)  # as extraction normalizes
    batch = ExplainBatch(x=x, target=split.labels, index=torch.arange(len(split)), gt_mask=split.masks)
    return compute_maps(None, batch, [method], MethodParams(seed=0))[method]


@pytest.mark.parametrize("reduction", ["abs_sum", "max"])
def test_reduction_ranks_as_the_reference(tmp_path, dataset, reduction):
    invoke(["extract", "--run-dir", str(tmp_path), "--method", "random", "--split", "test", "--reduction", reduction,
            *TINY])
    stored = RunDir(tmp_path).rank_store.read("random", "test").tensor().long()
    maps = _test_maps(dataset, "random")
    assert torch.equal(stored, _reference.rank(maps, reduction))
    assert not torch.equal(stored, _reference.rank(maps, "sum_sq"))  # the option changed the ranks


@pytest.mark.parametrize("method", ["random", "sobel"])
def test_granularity_value_ranks_every_value(tmp_path, dataset, method):
    """Every C*H*W value ranked on its own; a one-value-per-pixel map (sobel) scores each channel of a
    pixel with the pixel's score."""
    invoke(["extract", "--run-dir", str(tmp_path), "--method", method, "--split", "test", "--granularity", "value",
            *TINY])
    stored = RunDir(tmp_path).rank_store.read(method, "test").tensor().long()
    maps = _test_maps(dataset, method).expand(-1, 3, -1, -1)
    assert stored.shape == (10, 3, 32, 32)
    assert torch.equal(stored, _reference.rank(maps, "value"))


def test_seeds_trains_one_cell_per_seed(tmp_path):
    result = invoke(["retrain", "--run-dir", str(tmp_path), "--method", "random", "--fraction", "0.5", "--seeds", "2",
                     "--epochs", "1", *TINY])
    with sqlite3.connect(RunDir(tmp_path).results_path) as db:
        cells = db.execute("SELECT method, mode, fraction, seed, status FROM measurements ORDER BY seed").fetchall()
    assert cells == [("random", "roar", 0.5, 0, "done"), ("random", "roar", 0.5, 1, "done")]
    assert "±" in result.output  # the table reports the spread over the two seeds


@pytest.mark.parametrize("fill, pixel", [("zero", (0.0, 0.0, 0.0)), ("imagenet-mean", (0.485, 0.456, 0.406))])
def test_fill_replaces_with_the_chosen_pixel(tmp_path, monkeypatch, dataset, fill, pixel):
    """Removed pixels reach the model as the chosen [0, 1] pixel normalized by the train split's mean
    and std (computed here from the pixels); kept pixels as the image normalized."""
    seen = record_eval_inputs(monkeypatch)
    invoke(["retrain", "--run-dir", str(tmp_path), "--method", "random", "--fraction", "0.5", "--fill", fill,
            "--epochs", "1", *TINY])
    train = dataset.train.images.double() / 255
    mean = train.mean(dim=(0, 2, 3)).view(1, 3, 1, 1)
    std = train.std(dim=(0, 2, 3), unbiased=False).view(1, 3, 1, 1)
    image = (dataset.test.images.double() / 255 - mean) / std
    filled = (torch.tensor(pixel, dtype=torch.float64).view(1, 3, 1, 1) - mean) / std
    removed = RunDir(tmp_path).rank_store.read("random", "test").tensor().long().unsqueeze(1) < 512  # floor(0.5 * 1024)
    expected = torch.where(removed, filled, image).float()
    torch.testing.assert_close(seen[0][-1], expected, rtol=1e-5, atol=1e-5)
