"""Fill leakage (roarfast.stages.fill_leakage): with a structured removal pattern (square blocks at random
places) the per-pixel detector finds the removed pixels after the mean fill almost perfectly and
far less well after the road fill; its measurements in results.sqlite; bad options."""

import pytest
import torch

from roarfast.errors import UserError
from roarfast.stages.fill_leakage import FillLeakageOptions, measure, run_fill_leakage

SIZE, BLOCK = 16, 8  # a quarter of each image removed as one 8x8 block


def smooth_images(n, generator):
    """Smooth random uint8 images with a little pixel noise (~ the road fill's own 0.01 in [0, 1])."""
    coarse = torch.rand(n, 3, 4, 4, generator=generator)
    smooth = torch.nn.functional.interpolate(coarse, size=(SIZE, SIZE), mode="bilinear", align_corners=False)
    noisy = smooth * 0.8 + 0.1 + 0.01 * torch.randn(n, 3, SIZE, SIZE, generator=generator)
    return (noisy.clamp(0, 1) * 255).round().to(torch.uint8)


def block_ranks(n, generator):
    """Ranks whose top BLOCK*BLOCK pixels are one square block at a random place."""
    ranks = torch.empty(n, SIZE, SIZE, dtype=torch.int32)
    for i in range(n):
        top, left = torch.randint(0, SIZE - BLOCK + 1, (2,), generator=generator).tolist()
        block = torch.zeros(SIZE, SIZE, dtype=torch.bool)
        block[top:top + BLOCK, left:left + BLOCK] = True
        order = torch.cat([block.flatten().nonzero()[:, 0], (~block).flatten().nonzero()[:, 0]])
        ranks[i].view(-1)[order] = torch.arange(SIZE * SIZE, dtype=torch.int32)
    return ranks


def test_detector_finds_block_holes_after_mean_fill_not_after_road():
    g = torch.Generator().manual_seed(0)
    train = (smooth_images(256, g), block_ranks(256, g))
    test = (smooth_images(64, g), block_ranks(64, g))
    fraction = BLOCK * BLOCK / (SIZE * SIZE)
    rows = {r["fill"]: r for r in measure(train, test, ("dataset-mean", "road"), (fraction,), (0.5,) * 3,
                                          (0.25,) * 3, steps=300)}
    assert rows["road"]["base_rate"] == pytest.approx(0.75)
    assert rows["dataset-mean"]["accuracy"] >= 0.95, rows
    assert rows["dataset-mean"]["accuracy"] - rows["road"]["accuracy"] >= 0.1, rows


@pytest.mark.parametrize("options, message", [
    ({"fills": ("dataset-mean", "blur")}, "--fill should be a comma-separated subset of"),
    ({"fractions": (0.0,)}, r"--fraction: fractions must lie in \(0, 1\]"),
    ({"max_images": 0}, "--max-images should be a positive int"),
])
def test_bad_options(options, message):
    with pytest.raises(UserError, match=message):
        FillLeakageOptions(**options)


def test_measurements_go_to_results_sqlite_per_method_and_name_methods_as_stored(tmp_path):
    """Each method's measurements are kept beside the others'; a method alias is read under its stored
    name; an unknown method is one clear error."""
    from roarfast.data import load_dataset
    from roarfast.stages.extract import ExtractOptions, run_extract
    from roarfast.results import DETECTOR, FILL_LEAKAGE, ResultsDB
    from roarfast.rundir.directory import RunDir

    options = {"num_train": 64, "num_test": 32}
    ds = load_dataset("embedded", **options)
    run_extract(tmp_path, ExtractOptions(methods="random,sobel"), dataset_obj=ds, device="cpu", progress=False)
    for method in ("random", "sobel"):
        returned = run_fill_leakage(tmp_path, FillLeakageOptions(fills=("dataset-mean",), fractions=(0.25,),
                                                                 method=method, max_images=32),
                                    dataset="embedded", dataset_options=options, device="cpu", seed=3)
        (row,) = returned
        assert 0.0 <= row["test_acc"] <= 1.0 and row["extra"]["base_rate"] == pytest.approx(0.75)
    with ResultsDB(RunDir(tmp_path).results_path) as db:
        rows = db.rows(kind=FILL_LEAKAGE)
    assert [(r["method"], r["fill"], r["fraction"]) for r in rows] == [
        ("random", "dataset-mean", 0.25), ("sobel", "dataset-mean", 0.25)]
    assert {(r["model"], r["mode"], r["seed"], r["epochs"]) for r in rows} == {(DETECTOR, "detect", 3, None)}
    with pytest.raises(UserError, match="no complete train and test ranks of 'sg-sq-grad'"):
        run_fill_leakage(tmp_path, FillLeakageOptions(fills=("dataset-mean",), fractions=(0.25,), method="sg-sq"),
                         dataset="embedded", dataset_options=options, device="cpu")
    with pytest.raises(UserError, match="--method names one estimator"):
        run_fill_leakage(tmp_path, FillLeakageOptions(method="nope"), dataset="embedded", dataset_options=options,
                         device="cpu")
