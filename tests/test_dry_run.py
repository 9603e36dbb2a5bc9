"""`roarfast sweep --dry-run` (roarfast.planning.preview): the canvas, the base model's recipe (a reused one's as recorded)
and whether it is reused by id or trained beside those kept, the ranks reused by id or extracted again when their
provenance changed (their cells never shown as done), every stage's cost from the step times measured here
(scaled to the epochs and images asked), without training, extracting or writing anything, and without loading a
dataset that the run directory records."""

import os
import re
import subprocess
import sys

import pytest
import torch
from click.testing import CliRunner

from roarfast import stats
from roarfast.cli import main
from roarfast.results import ResultsDB
from roarfast.rundir.directory import RunDir

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
    """A run directory where a base model was trained for 2 epochs (not its recipe's 8), then the grid's 4 cells
    (random and grad, roar, each with its control) swept on it."""
    run_dir = tmp_path_factory.mktemp("dry") / "run"
    result = CliRunner().invoke(main, ["train", "--run-dir", str(run_dir), "--epochs", "2", "--device", "cpu",
                                       "--no-progress", *DATA])
    assert result.exit_code == 0, result.output
    sweep(run_dir, *GRID, *DATA)
    return run_dir


def line(output: str, what: str) -> str:
    return next(text for text in output.splitlines() if text.startswith(f"{what}: "))


def cpu_preview(run_dir, data=None, **grid):
    """The Preview of a sweep of the test grid (with `grid`'s changes) on the test data (with `data`'s), on the CPU."""
    import torch

    from roarfast.stages.extract import ExtractOptions
    from roarfast.planning.grid import preset_grid
    from roarfast.planning.preview import preview_sweep
    from roarfast.methods.selection import Selection
    from roarfast.stages.cells import cell_estimators

    settings = {"methods": "grad", "modes": ("roar",), "fractions": (0.5,), "seeds": 1, "epochs": 1, **grid}
    quick = preset_grid("quick", **settings)
    selection = Selection.of(cell_estimators(quick.methods), ExtractOptions(), 0)  # as the sweep resolves them
    return preview_sweep(RunDir(run_dir), quick, selection, ExtractOptions(),
                         dataset_options={"num_train": 200, "num_test": 60, **(data or {})}, device=torch.device("cpu"))


def test_a_fresh_run_directory_shows_what_would_be_trained_and_costs_every_stage(tmp_path):
    run_dir = tmp_path / "run"
    out = sweep(run_dir, *GRID, *DATA, "--dry-run")
    assert not run_dir.exists()
    assert line(out, "data").startswith("data: embedded: canvas 3x32x32, 200 train (20 of them held out for "
                                        "validation) / 60 test images, 10 classes")
    assert re.match(r"base model: fastnet, \d+ epochs, batch \d+, lr [\d.]+: to train, ~", line(out, "base model"))
    assert line(out, "ranks").startswith("ranks: to extract: random, grad, ~")
    assert line(out, "cells").startswith("cells: fastnet, 1 epochs, ")
    # the threads each cell would train with: this process's by default, as asked for otherwise
    threads = torch.get_num_threads()
    assert line(out, "cells").endswith(f"; {threads} CPU thread{'s' if threads > 1 else ''} a cell (its row records "
                                       f"it: --threads-per-cell)")
    asked = sweep(run_dir, *GRID, *DATA, "--dry-run", "--threads-per-cell", "3")
    assert line(asked, "cells").endswith("; 3 CPU threads a cell (its row records it: --threads-per-cell)")
    assert "done: 0, to do: 4" in out
    assert re.match(r"plan: on cpu: .*, \d+ threads, 1 worker$", line(out, "plan"))
    assert re.match(r"plan, base model: 180 images x \d+ epochs; peak memory [\d.]+ MiB of [\d.]+ GiB; [\d.e+-]+ "
                    r"device-hours \(a (step measured|training here)", line(out, "plan, base model"))
    # two stores of 260 images' ranks: 32 x 32 pixels, a uint16 rank each
    assert line(out, "plan, ranks").startswith(f"plan, ranks: 2 estimators x 260 images; "
                                               f"{2 * 260 * 32 * 32 * 2 / 2**20:.1f} MiB on disk; peak memory ")
    assert line(out, "plan, cells").startswith("plan, cells: 4 x 180 images x 1 epochs; peak memory ")
    # what each stage's time is read from: what this machine recorded before (the suite shares one cache: an earlier
    # test's training or extraction here), else what the dry run measures now
    eta = line(out, "ETA")
    assert re.match(r"ETA: [\d.hms]+: base model [\d.hms]+ \(a (step measured|training here).*\), ranks [\d.hms]+ "
                    r"\((their FLOPs at a gradient pass measured (now|here earlier)|an extraction here)\), "
                    r"cells [\d.hms]+ \(a ", eta), eta


def test_method_arguments_are_taken_before_a_base_model_exists(tmp_path):
    """The issue's trial: --method-arg ig_steps=8 on a run directory without a base model (it used to say that no
    estimator of the run takes it); a Study's display the same."""
    from roarfast import Study

    out = sweep(tmp_path / "run", *GRID, *DATA, "--method", "ig", "--method-arg", "ig_steps=8", "--dry-run")
    assert line(out, "ranks").startswith("ranks: to extract: random, ig, ~")
    study = Study(tmp_path / "study", methods=["ig"], method_args={"ig_steps": 8}, modes="roar", fractions=(0.5,),
                  seeds=1, dataset_options={"num_train": 200, "num_test": 60}, device="cpu", progress=False)
    assert "ranks: to extract: random, ig, ~" in repr(study) and "to extract: random, ig, ~" in study._repr_html_()
    assert not (tmp_path / "run").exists() and not (tmp_path / "study").exists()


def test_a_finished_grid_is_done_reused_by_id_with_its_recorded_recipe(swept, monkeypatch):
    before = listing(swept)
    run = RunDir(swept)
    head = run.head()

    def no_loading(*args, **kwargs):
        raise AssertionError("the dry run loaded the dataset that dataset.json records")

    monkeypatch.setattr(RunDir, "open_dataset", no_loading)
    out = sweep(swept, *GRID, "--dry-run")
    assert listing(swept) == before
    assert f"(as {RunDir(swept).dataset_path} records it; not read again)" in line(out, "data")
    # the recipe its meta.json records (2 epochs), not the one a sweep would train with (fastnet's 8)
    assert re.match(rf"base model: fastnet, 2 epochs, batch \d+, lr [\d.]+ \(as its meta.json records it\): reused "
                    rf"{head.base[:8]} \(trained [\d-]+ [\d:]+ UTC on this dataset, test [\d.]+%\)$",
                    line(out, "base model"))
    assert line(out, "ranks") == (f"ranks: to extract: none; reused: random {head.ranks['random'][:8]}, "
                                  f"grad {head.ranks['grad'][:8]}")
    assert line(out, "progress") == (f"progress: done: 4, to do: 0; configuration {head.configuration[:8]} "
                                     f"(recorded: its done cells are reused)")
    assert line(out, "ETA") == "ETA: 0s (nothing left to do)"
    more = sweep(swept, *GRID, "--seeds", "2", "--dry-run")
    assert "done: 4, to do: 2" in more
    assert re.search(r"cells [\d.]+s \(measured here: [\d.]+s per cell, [\d.]+s per control\)", line(more, "ETA"))


def test_a_dry_run_after_training_leaves_scipy_stats_unloaded(swept):
    """The dry run's learning check reads the trained base model's epochs through an exact interval (scipy.special);
    scipy.stats, which loads in seconds on 2 cores, stays out of the everyday command (a process of its own)."""
    code = ("import sys\nfrom roarfast.cli import main\n"
            f"sys.argv = ['roarfast', 'sweep', '--run-dir', {str(swept)!r}, {', '.join(map(repr, GRID))}, '--dry-run']\n"
            "try:\n    main()\nexcept SystemExit as done:\n    assert not done.code, done.code\n"
            "print(sorted(m for m in ('scipy.stats', 'scipy.special') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, "ROARFAST_ALLOCATOR": "0"})
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "base model: fastnet" in done.stdout  # the trained model was read, and with it its epochs' accuracies
    assert done.stdout.strip().splitlines()[-1] == "['scipy.special']"  # the interval computed, without scipy.stats


def test_the_measured_cell_times_scale_with_the_epochs_and_images_asked(swept):
    """The cells swept trained 1 epoch on 180 images: a cell of 3 epochs costs 3 times as much, one on 360 images
    (another subset: a new base model, whose cells are all to do) twice as much."""
    one = cpu_preview(swept, seeds=2).plan.seconds
    three = cpu_preview(swept, seeds=2, epochs=3).plan.seconds
    assert set(one) == {"cell", "control"}
    assert three["cell"] == pytest.approx(3 * one["cell"]) and three["control"] == pytest.approx(3 * one["control"])
    larger = cpu_preview(swept, data={"num_train": 400})
    assert not larger.base_reused and len(larger.plan.todo) == 4
    assert larger.plan.seconds["cell"] == pytest.approx(2 * one["cell"])
    assert larger.stages["cells"].source.startswith("measured here")


def test_the_stages_cost_what_trainings_and_extractions_on_this_machine_took(swept, tmp_path):
    """The fixture's training and extraction ran in this process: a fresh run directory on the same data is costed
    from them, not from a measured step; its cells, of 2 epochs, from their recipe's step times too, so that cells
    of 8 epochs cost about 4 times as much (the test pass once each)."""
    out = sweep(tmp_path / "run", *GRID, *DATA, "--dry-run")
    assert "ranks " in line(out, "ETA") and "(an extraction here)" in line(out, "ETA")
    two, eight = (cpu_preview(tmp_path / "other", epochs=epochs).stages["cells"] for epochs in (2, 8))
    assert two.source == eight.source == "a training here"
    assert 3 < eight.seconds / two.seconds < 4


def test_a_new_base_model_is_trained_beside_the_one_kept(swept):
    before = listing(swept)
    kept = RunDir(swept).head().base
    out = sweep(swept, *GRID, "--seed", "1", "--dry-run")
    assert listing(swept) == before
    assert re.match(rf"base model: fastnet, 8 epochs, .*: to train beside the 1 kept \({kept[:8]}\), which stay as "
                    rf"they are as [0-9a-f]{{8}}, ~", line(out, "base model"))
    assert kept[:8] not in line(out, "base model").split(" as ")[-1] and "replace" not in out


def test_ranks_of_another_provenance_are_extracted_again_and_their_cells_are_not_done(swept):
    before = listing(swept)
    out = sweep(swept, *GRID, "--method-arg", "target=label", "--dry-run")
    assert listing(swept) == before
    assert line(out, "ranks").startswith("ranks: to extract: grad, ~")
    assert line(out, "ranks").endswith(f"reused: random {RunDir(swept).head().ranks['random'][:8]}")
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



def test_a_dry_run_previews_the_selection_the_sweep_was_given_and_resolves_no_name_again(tmp_path, monkeypatch):
    """Names resolved once: the dry run hands the Selection its caller (the CLI's sweep, a Study) resolved to the
    preview, so it and the run it previews cannot disagree; a lookup of a name on the way fails the test."""
    from types import SimpleNamespace

    from roarfast.methods import selection as selection_module
    from roarfast.methods.selection import Selection
    from roarfast.planning.grid import preset_grid
    from roarfast.orchestration import sweep as sweep_module
    from roarfast.stages.cells import cell_estimators
    from roarfast.stages.extract import ExtractOptions

    grid = preset_grid("quick", methods="grad", modes=("roar",), fractions=(0.5,), seeds=1, epochs=1)
    given = Selection.of(cell_estimators(grid.methods), ExtractOptions(), 0)

    def looked_up(*args, **kwargs):
        raise AssertionError("a name was resolved again")

    previewed = []
    monkeypatch.setattr(Selection, "of", looked_up)
    monkeypatch.setattr(Selection, "resolve", looked_up)
    monkeypatch.setattr(selection_module, "resolve_methods", looked_up)
    monkeypatch.setattr(sweep_module, "preview_sweep", lambda run, grid, selection, **kw: previewed.append(
        selection) or SimpleNamespace(lines=lambda: [], plan="the plan"))
    out = sweep_module.run_sweep(tmp_path / "run", grid, selection=given, dry_run=True, device="cpu",
                                 echo=lambda text: None)
    assert previewed == [given] and out["plan"] == "the plan" and not (tmp_path / "run").exists()


def test_the_dry_run_says_what_the_planned_seeds_detect_and_what_detect_needs(swept):
    grid = [*GRID[:6], "--epochs", "1", "--device", "cpu", "--no-progress", "--dry-run", *DATA]
    # one seed per cell so far: no spread recorded, so the stated prior (3 points) is read
    said = [text for text in sweep(swept, *grid, "--seeds", "4", "--detect", "10").splitlines()
            if text.startswith("seeds: ")]
    detect = stats.detectable(stats.PRIOR_SD, 4)
    assert said == [f"seeds: seeds 4: detect a difference from random of {stats.points(detect)} points with 80% power "
                    f"at alpha 0.05 (sd 3 points, the stated prior: results.sqlite holds no earlier cells of this model "
                    f"on this data)",
                    f"seeds: --detect 10: {stats.seeds_needed(0.10, stats.PRIOR_SD)} seeds per cell detect it with 80% "
                    f"power"]
    auto = line(sweep(swept, *grid, "--seeds", "auto", "--max-seeds", "7"), "seeds")
    assert auto.startswith("seeds: seeds auto: looks at 3, 5, 7 seeds per cell, seeds added only where a verdict is "
                           "undecided")
