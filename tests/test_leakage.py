"""Fill leakage (roarfast.leakage): with a structured removal pattern (square blocks at random
places) the per-pixel detector finds the removed pixels after the mean fill almost perfectly and
far less well after the road fill; bad fill names."""

import pytest
import torch

from roarfast.errors import UserError
from roarfast.leakage import measure, parse_fills

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


def test_bad_fill_names():
    with pytest.raises(UserError, match="--fill should be a comma-separated subset of"):
        parse_fills("dataset-mean,blur")


def test_run_leakage_names_methods_as_stored_and_keeps_earlier_rows(tmp_path):
    """leakage.json gains the rows of a second method instead of losing the first's; a method alias is
    read under its stored name; an unknown method is one clear error."""
    import json

    from roarfast import leakage
    from roarfast.data import load_dataset
    from roarfast.extract import ExtractOptions, run_extract

    options = {"num_train": 64, "num_test": 32}
    ds = load_dataset("embedded", **options)
    run_extract(tmp_path, ExtractOptions(methods="random,sobel"), dataset_obj=ds, device="cpu", progress=False)
    for method in ("random", "sobel"):
        leakage.run_leakage(tmp_path, ["dataset-mean"], (0.25,), method=method, dataset="embedded",
                            dataset_options=options, device="cpu", max_images=32)
    rows = json.loads((tmp_path / "leakage.json").read_text())
    assert sorted((r["method"], r["fill"], r["fraction"]) for r in rows) == [
        ("random", "dataset-mean", 0.25), ("sobel", "dataset-mean", 0.25)]
    with pytest.raises(UserError, match="no complete train and test ranks of 'sg-sq-grad'"):
        leakage.run_leakage(tmp_path, ["dataset-mean"], (0.25,), method="sg-sq", dataset="embedded",
                            dataset_options=options, device="cpu")
    with pytest.raises(UserError, match="--method names one estimator"):
        leakage.run_leakage(tmp_path, ["dataset-mean"], (0.25,), method="nope", dataset="embedded",
                            dataset_options=options, device="cpu")
