"""The cost of a sweep planned (roarfast.planning.costs, `sweep --dry-run --plan-device --plan-workers`): an ImageNet-sized
tree planned from its listing and two headers (nothing decoded beyond one file of each size), per stage its
images, bytes on disk, peak memory and device-hours on a stated device, and its time over N workers."""

import re

import pytest
from click.testing import CliRunner

from roarfast.cli import main
from roarfast.planning.costs import SHARE, STATED, Cost
from tests.imagenet_tree import IMAGENET, listing, write_first_files


@pytest.fixture
def imagenet_tree(tmp_path, monkeypatch):
    """An image tree whose listing is ImageNet's size (tests/imagenet_tree.py); nothing is decoded but the two
    files its canvas is read from."""
    from roarfast.data import registry
    from roarfast.data import imagefolder

    def no_loading(*args, **kwargs):
        raise AssertionError("the dry run decoded the tree")

    write_first_files(tmp_path / "imagenet")
    monkeypatch.setattr(imagefolder, "scan_tree", listing)
    monkeypatch.setattr(registry._Source, "dataset", no_loading)
    return tmp_path / "imagenet"


def dry_run(*args) -> dict:
    result = CliRunner().invoke(main, ["sweep", "--dry-run", "--device", "cpu", "--no-progress", *args])
    assert result.exit_code == 0, result.output
    return {text.split(": ", 1)[0]: text.split(": ", 1)[1] for text in result.output.splitlines()}


def hours(text: str) -> float:
    return float(re.search(r"; ([\d.e+,]+) device-hours", text).group(1).replace(",", ""))


def test_an_imagenet_sized_tree_is_costed_per_stage_on_a_stated_h100(imagenet_tree, tmp_path):
    out = dry_run("--run-dir", str(tmp_path / "run"), "--dataset", "imagefolder", "--data-dir", str(imagenet_tree),
                  "--preset", "paper", "--model", "resnet50", "--method", "grad,sg-sq", "--mode", "roar", "--fraction",
                  "0.5", "--seeds", "1", "--plan-device", "h100", "--plan-workers", "8")
    assert out["data"] == ("imagefolder: canvas 3x224x224, 1,281,167 train (128,117 of them held out for validation) / "
                           "50,000 test images, 1000 classes (outlined without decoding an image)")
    assert out["plan"] == "on H100 SXM (from its stated peak; no such device here), 8 workers"
    base, ranks, cells = out["plan, base model"], out["plan, ranks"], out["plan, cells"]
    # resnet50's recipe on a GPU: 15 epochs at batch 256, bf16; 1,153,050 training images
    assert base.startswith("1,153,050 images x 15 epochs; peak memory ")
    # more than ResNet-50's 25.6 M float32 weights, gradients, momentum and EMA (0.4 GiB): 256 images' activations
    # are GiBs; less than the 16 GiB of the V100s that trained it at batch 256 in mixed precision
    peak = float(re.search(r"peak memory ([\d.]+) GiB of 74.5 GiB", base).group(1))
    assert 2 < peak < 16
    # three rank stores (random, grad, sg-sq-grad) of both splits, a uint16 rank per pixel
    stored = 3 * (IMAGENET["train"] + IMAGENET["val"]) * 224 * 224 * 2
    assert ranks.startswith(f"3 estimators x 1,331,167 images; {stored / 2**30:.1f} GiB on disk; peak memory ")
    # the cells train as the base model does: 6 of them (3 methods, each with its control) cost 6 base models
    assert cells.startswith("6 x 1,153,050 images x 15 epochs; ")
    assert hours(cells) == pytest.approx(6 * hours(base), rel=0.01)
    # a ResNet-50 training image is about 24.5 GFLOP (3 x its 4.1 G multiply-adds) at the stated share of the bf16
    # peak; the evaluations (the held-out tenth each epoch, the test split once) add under a tenth to the steps
    steps = 15 * 1_153_050 * 24.5e9 / (STATED["h100"]["peak"]["bf16"] * SHARE["bf16"]["train"])
    assert 1.0 < hours(base) * 3600 / steps < 1.1
    assert re.search(r"; (\d+m\d\ds|[\d.]+s) on 8 workers$", base) and cells.endswith(" on 8 workers")


def test_workers_split_images_and_take_one_cell_each():
    assert Cost(800.0, "").wall(8) == 100.0
    assert Cost(600.0, "", cells=6).wall(4) == 200.0  # two rounds of 100 s cells
    assert Cost(600.0, "", cells=6).wall(8) == 100.0
    assert Cost(None, "").wall(2) is None


@pytest.mark.parametrize("args, says", [
    (["--plan-device", "a100", "--dry-run"], "'--plan-device': 'a100' is not one of 'h100', 'h200'"),
    (["--plan-workers", "0", "--dry-run"], "0 is not in the range x>=1"),
    (["--plan-device", "h100"], "--plan-device and --plan-workers cost a dry run: add --dry-run"),
])
def test_plan_options_are_checked_in_one_line(tmp_path, args, says):
    result = CliRunner().invoke(main, ["sweep", "--run-dir", str(tmp_path / "run"), "--device", "cpu", *args])
    assert result.exit_code == 2 and says in result.output and "Traceback" not in result.output
    assert not (tmp_path / "run").exists()
