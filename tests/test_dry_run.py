"""`roarfast sweep --dry-run` (roarfast.preview): the canvas, the base model's recipe and whether it is trained
or reused, the ranks extracted again when their provenance changed (their cells never shown as done), every
stage's estimated time, without training, extracting or writing anything, and without loading a dataset that the
run directory records."""

import re

import pytest
from click.testing import CliRunner

from roarfast.cli import main
from roarfast.results import ResultsDB
from roarfast.rundir import RunDir

DATA = ["--data-option", "num_train=200", "--data-option", "num_test=60"]
GRID = ["--method", "grad", "--mode", "roar", "--fraction", "0.5", "--seeds", "1", "--epochs", "1", "--device", "cpu",
        "--no-progress"]


def sweep(run_dir, *args):
    result = CliRunner().invoke(main, ["sweep", "--run-dir", str(run_dir), *args])
    assert result.exit_code == 0, result.output
    return result.output


def listing(root):
    """Every path under root with its size and modification time."""
    return {(str(p), p.stat().st_size, p.stat().st_mtime_ns) for p in root.rglob("*")}


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    """A run directory where the grid's 4 cells (random and grad, roar, each with its control) are done."""
    run_dir = tmp_path_factory.mktemp("dry") / "run"
    sweep(run_dir, *GRID, *DATA)
    return run_dir


def line(output: str, what: str) -> str:
    return next(text for text in output.splitlines() if text.startswith(f"{what}: "))


def test_a_fresh_run_directory_shows_what_would_be_trained_and_estimates_every_stage(tmp_path):
    run_dir = tmp_path / "run"
    out = sweep(run_dir, *GRID, *DATA, "--dry-run")
    assert not run_dir.exists()
    assert line(out, "data").startswith("data: embedded: canvas 3x32x32, 200 train (20 of them held out for "
                                        "validation) / 60 test images, 10 classes")
    assert re.match(r"base model: fastnet, \d+ epochs, batch \d+, lr [\d.]+: to train, ~", line(out, "base model"))
    assert line(out, "ranks").startswith("ranks: to extract: random, grad, ~")
    assert line(out, "cells").startswith("cells: fastnet, 1 epochs, ")
    assert "done: 0, to do: 4" in out
    eta = line(out, "ETA")
    assert re.match(r"ETA: [\d.hms]+: base model [\d.hms]+ \(estimated from a measured step\), ranks [\d.hms]+ "
                    r"\(estimated from a measured batch\), cells [\d.hms]+ \(estimated from a measured step", eta), eta


def test_a_finished_grid_is_done_and_its_rates_are_the_measured_ones(swept, monkeypatch):
    before = listing(swept)

    def no_loading(*args, **kwargs):
        raise AssertionError("the dry run loaded the dataset that dataset.json records")

    monkeypatch.setattr(RunDir, "open_dataset", no_loading)
    out = sweep(swept, *GRID, "--dry-run")
    assert listing(swept) == before
    assert f"(as {RunDir(swept).dataset_path} records it; not read again)" in line(out, "data")
    assert re.match(r"base model: fastnet, .*: reused [0-9a-f]{8} \(as its record says; trained on this dataset, test "
                    r"[\d.]+%\)", line(out, "base model"))
    assert line(out, "ranks") == "ranks: to extract: none; stored: random, grad"
    assert "done: 4, to do: 0" in out and line(out, "ETA") == "ETA: 0s (nothing left to do)"
    more = sweep(swept, *GRID, "--seeds", "2", "--dry-run")
    assert "done: 4, to do: 2" in more
    assert re.search(r"cells [\d.]+s \(measured here: [\d.]+s per cell, [\d.]+s per control\)", line(more, "ETA"))


def test_ranks_of_another_provenance_are_extracted_again_and_their_cells_are_not_done(swept):
    before = listing(swept)
    out = sweep(swept, *GRID, "--method-arg", "target=label", "--dry-run")
    assert listing(swept) == before
    assert line(out, "ranks").startswith("ranks: to extract: grad, ~") and line(out, "ranks").endswith("stored: random")
    assert "done: 2, to do: 2" in out  # random's cell and control stay done; grad's are to do


def write_tree(root, sizes):
    """An ImageFolder tree: train/ and test/ with the classes a and b, images of the given (height, width)."""
    import numpy as np
    from PIL import Image

    for split, per_class in (("train", 3), ("test", 2)):
        for cls in ("a", "b"):
            for i in range(per_class):
                (root / split / cls).mkdir(parents=True, exist_ok=True)
                h, w = sizes[i % len(sizes)]
                Image.fromarray(np.full((h, w, 3), 40 * i + 20, dtype=np.uint8)).save(root / split / cls / f"{i}.jpg")
    return root


@pytest.mark.parametrize("name, options", [("embedded", {"num_train": 40, "num_test": 20, "copies": 2}),
                                           ("imagefolder", {"resize": 12, "crop": 10}),
                                           ("imagefolder", {"num_train": 4, "num_test": 3, "crop": 12})])
def test_an_outline_says_what_loading_would_load_without_reading_an_image(tmp_path, name, options):
    from roarfast.data import load_dataset, outline_dataset

    data_dir = write_tree(tmp_path / "tree", [(14, 18), (16, 16)]) if name == "imagefolder" else None
    outline = outline_dataset(name, data_dir, **options)
    ds = load_dataset(name, data_dir, **options)
    assert outline == {"shape": tuple(ds.train.shape), "train": len(ds.train), "test": len(ds.test),
                       "validation": len(ds.val_index), "classes": ds.num_classes,
                       "ground_truth": ds.train.masks is not None}


def test_a_dry_run_on_a_fresh_run_directory_reads_no_image(tmp_path, monkeypatch):
    from roarfast.data import registry

    def no_loading(*args, **kwargs):
        raise AssertionError("the dry run loaded the dataset")

    monkeypatch.setattr(registry._Source, "dataset", no_loading)
    tree = write_tree(tmp_path / "tree", [(16, 16)])
    out = sweep(tmp_path / "run", *GRID, "--dataset", "imagefolder", "--data-dir", str(tree), "--data-option",
                "resize=16", "--data-option", "crop=16", "--dry-run")
    assert line(out, "data") == ("data: imagefolder: canvas 3x16x16, 6 train (1 of them held out for validation) / 4 "
                                 "test images, 2 classes (outlined without decoding an image)")
    assert "to train" in line(out, "base model") and not (tmp_path / "run").exists()


@pytest.mark.parametrize("recorded", [False, True])
def test_oracle_on_data_without_masks_is_refused_before_anything_is_trained(tmp_path, recorded):
    """The quick preset's oracle on an image tree: the dry run refuses it as the sweep does, and the sweep
    refuses it before it trains a base model (it used to train one, then fail at extraction). `recorded`: the
    run directory already holds the tree's record (a dry run then reads the record, not the tree)."""
    tree = write_tree(tmp_path / "tree", [(16, 16)])
    run_dir = tmp_path / "run"
    data = ["--dataset", "imagefolder", "--data-dir", str(tree)]
    if recorded:
        sweep(run_dir, *GRID, *data)
        assert RunDir(run_dir).dataset_record()["ground_truth"] is False
    before = listing(run_dir) if recorded else set()
    for dry in (["--dry-run"], []):
        result = CliRunner().invoke(main, ["sweep", "--run-dir", str(run_dir), *GRID, *data, "--method",
                                           "oracle,grad", *dry])
        assert result.exit_code != 0
        assert "dataset imagefolder has no ground-truth masks, so it has no 'oracle' method" in result.output
        assert (listing(run_dir) if recorded else set(run_dir.rglob("*"))) == before  # nothing trained or written


def test_the_quick_preset_leaves_oracle_out_where_the_data_has_no_masks_and_says_so(tmp_path):
    """Named by the user, oracle is refused on such data (above); from the preset, it is left out with a line,
    in the dry run and the sweep alike, and the sweep runs the rest."""
    tree = write_tree(tmp_path / "tree", [(16, 16)])
    data = ["--dataset", "imagefolder", "--data-dir", str(tree)]
    quick = ["--preset", "quick", "--mode", "roar", "--fraction", "0.5", "--seeds", "1", "--epochs", "1",
             "--device", "cpu", "--no-progress"]
    said = "the preset's oracle left out: dataset imagefolder has no ground-truth masks"
    dry = sweep(tmp_path / "run", *quick, *data, "--dry-run")
    assert said in line(dry, "grid") and "methods random, grad, sg-sq-grad x" in line(dry, "grid")
    out = sweep(tmp_path / "run", *quick, *data)
    assert f"[sweep] {said}" in out
    with ResultsDB(RunDir(tmp_path / "run").results_path) as db:
        assert sorted({row["method"] for row in db.rows()}) == ["grad", "random", "sg-sq-grad"]
