"""The no-retrain evaluation (`roarfast evaluate`: MoRF / LeRF / ROAD without retraining): argument checks
that write nothing, and on the embedded dataset (slow): the oracle first under MoRF and ROAD, random as good
removed most- as least-relevant first. (Its estimator scores and Kendall tau: tests/test_stats.py.)"""

import pytest
import torch
from click.testing import CliRunner
from torch import nn

from roarfast.cli import main
from roarfast.errors import UserError
from roarfast.stages.noretrain import NoRetrainOptions
from roarfast.results import NO_RETRAIN
from roarfast.rundir.directory import RunDir
from roarfast.stats import estimator_scores


def test_bad_metric_and_fraction():
    with pytest.raises(UserError, match="--metric should be a comma-separated subset of morf,lerf,road"):
        NoRetrainOptions(metrics=("morf", "roar"))
    result = CliRunner().invoke(main, ["evaluate", "--metric", "mof"])
    assert result.exit_code == 2 and "--metric should be" in result.output
    result = CliRunner().invoke(main, ["evaluate", "--fraction", "1.5"])
    assert result.exit_code == 2 and "--fraction: fractions must lie in (0, 1], got 1.5" in result.output
    with pytest.raises(UserError, match=r"--fraction: fractions must lie in \(0, 1\], got 0.0"):
        NoRetrainOptions(fractions=(0.0,))


def test_evaluate_without_base_model_writes_nothing(tmp_path):
    run_dir = tmp_path / "run"
    result = CliRunner().invoke(main, ["evaluate", "--run-dir", str(run_dir), "--no-progress"])
    assert result.exit_code != 0 and "no base model" in result.output
    assert not RunDir(run_dir).results_path.exists()


@pytest.mark.slow
def test_evaluate_embedded_oracle_first_random_even(tmp_path):
    run_dir = tmp_path / "run"
    runner = CliRunner()
    base = ["--run-dir", str(run_dir), "--no-progress"]
    assert runner.invoke(main, ["train", *base], catch_exceptions=False).exit_code == 0
    # without ranks: one message, nothing written
    result = runner.invoke(main, ["evaluate", *base])
    assert result.exit_code != 0 and "no complete test ranks" in result.output
    assert not RunDir(run_dir).results_path.exists()
    result = runner.invoke(main, ["extract", "--method", "oracle,random,sobel", "--split", "test", *base],
                           catch_exceptions=False)
    assert result.exit_code == 0, result.output
    result = runner.invoke(main, ["evaluate", *base], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    from roarfast.results import ResultsDB

    rows = ResultsDB(RunDir(run_dir).results_path).rows()
    assert {r["mode"] for r in rows} == {"morf", "lerf", "road-morf", "road-lerf"}
    assert len(rows) == 3 * 4 * 5 and all(0.0 <= r["extra"]["mean_probability"] <= 1.0 for r in rows)
    # no-retrain measurements, not cells: nothing drawn, nothing trained, the fill their mode names
    assert {r["kind"] for r in rows} == {NO_RETRAIN} and {(r["seed"], r["epochs"]) for r in rows} == {(None, None)}
    assert {r["fill"] for r in rows if r["mode"].startswith("road-")} == {"road"}
    assert {r["fill"] for r in rows if not r["mode"].startswith("road-")} == {"dataset-mean"}
    # a rerun measures nothing again
    again = runner.invoke(main, ["evaluate", *base], catch_exceptions=False)
    assert again.exit_code == 0 and ResultsDB(RunDir(run_dir).results_path).rows() == rows
    scores = estimator_scores(rows)
    for benchmark in ("morf", "road"):
        assert max(scores[benchmark], key=scores[benchmark].get) == "oracle", scores
    # random ranks carry no order: removing its "most" or "least" relevant pixels first is the same
    acc = {(r["mode"], r["fraction"]): r["test_acc"] for r in rows if r["method"] == "random"}
    for prefix in ("", "road-"):
        for fraction in (0.1, 0.3, 0.5, 0.7, 0.9):
            assert abs(acc[(prefix + "morf", fraction)] - acc[(prefix + "lerf", fraction)]) <= 0.1, acc
    assert abs(scores["road"]["random"]) <= 0.05, scores


# A hand-made case where the most relevant pixels are known: 4x4 images on a flat grey background whose
# class lives only in the top-left 2x2 block R (black: class 0, white: class 1), a model that reads R
# alone (class 1 when R's mean pixel value is above 0.75), and ranks that put R's 4 pixels first.
SIDE, R = 4, (0, 1, 4, 5)  # R's flat pixel indices
GREY = 128


def _block_split(n: int) -> "ImageSet":
    from roarfast.data.base import ImageSet

    labels = torch.arange(n) % 2
    images = torch.full((n, 3, SIDE, SIDE), GREY, dtype=torch.uint8)
    images[:, :, :2, :2] = (labels * 255).to(torch.uint8).view(n, 1, 1, 1)
    return ImageSet(images, labels, None, ["black", "white"])


class BlockReader(nn.Module):
    """Class 1 when the mean pixel value (in [0, 1]) of the top-left 2x2 block exceeds 0.75, else 0."""

    def __init__(self, mean, std):
        super().__init__()
        self.register_buffer("mean", torch.tensor(mean).view(1, 3, 1, 1))
        self.register_buffer("std", torch.tensor(std).view(1, 3, 1, 1))

    def forward(self, x):
        block = (x * self.std + self.mean)[:, :, :2, :2].mean((1, 2, 3))
        return torch.stack([0.75 - block, block - 0.75], dim=1) * 100


class RemovedCounter(nn.Module):
    """Predicts the number of pixels at the normalized fill value 0 (the dataset mean): how many were
    replaced, on images none of whose pixels sit at the mean."""

    def __init__(self, num_classes):
        super().__init__()
        self.register_buffer("classes", torch.arange(num_classes, dtype=torch.float32))

    def forward(self, x):
        replaced = (x == 0).all(dim=1).flatten(1).sum(1).float()
        return -(replaced.view(-1, 1) - self.classes.view(1, -1)).abs()


def _hand_made_run(tmp_path, monkeypatch, make_model, test, ranks):
    """(run directory, dataset): make_model(dataset) saved as the base model of a dataset whose splits are
    both `test`, `ranks` (uint16 Tensor[N, SIDE, SIDE]) stored as the test ranks of method "grad"."""
    from roarfast.data.base import make_dataset
    from roarfast.records.ranks import RankStoreRecord
    from roarfast.models import ModelSpec

    ds = make_dataset("hand-made", test, test, {})
    model = make_model(ds)
    monkeypatch.setattr("roarfast.records.checkpoint.resolve_model",
                        lambda name, **_: ModelSpec("hand-made", lambda *args: model, builtin=True))
    run = RunDir(tmp_path / "run")
    base = run.save_base_model(model, {"model": "hand-made", "num_classes": len(test.classes), "image_size": SIDE,
                                       "in_channels": 3, "dataset_fingerprint": ds.fingerprint})
    grad = RankStoreRecord("grad", {}, run.base_checkpoint_sha256(base), ds.fingerprint).id
    run.update_head("test", base=base, ranks={"grad": grad}, dataset=run.remember_dataset(ds))
    with run.rank_store.open_writer("grad", "test", shape=tuple(ranks.shape), dtype="uint16", chunk_size=len(ranks),
                                    params={}, checkpoint_sha256=run.base_checkpoint_sha256(),
                                    dataset_fingerprint=ds.fingerprint) as writer:
        writer.write_chunk(0, ranks.numpy())
    return run, ds


def _block_first_ranks(n: int) -> torch.Tensor:
    """R's pixels ranked 0-3 (most relevant), the background 4-15 in a fixed shuffled order."""
    background = [p for p in range(SIDE * SIDE) if p not in R]
    order = list(R) + [background[i] for i in torch.randperm(len(background), generator=torch.Generator().manual_seed(0))]
    flat = torch.empty(SIDE * SIDE, dtype=torch.int64)
    flat[torch.tensor(order)] = torch.arange(SIDE * SIDE)
    return flat.view(1, SIDE, SIDE).expand(n, SIDE, SIDE).to(torch.uint16).contiguous()


@pytest.mark.parametrize("metric", ["morf,lerf", "road"])
def test_morf_removes_the_known_relevant_pixels_and_lerf_keeps_them(tmp_path, monkeypatch, metric):
    """Replacing R (MoRF, 25%) leaves a grey or mean block that reads as class 0: half the images (the white
    ones) are misclassified; replacing the 25% least relevant (LeRF) leaves R whole: all are right. With
    MoRF and LeRF swapped (in the evaluation or in ROAD's modes) the two accuracies trade places."""
    from roarfast.stages.noretrain import run_noretrain

    run, ds = _hand_made_run(tmp_path, monkeypatch, lambda ds: BlockReader(ds.mean, ds.std), _block_split(8),
                             _block_first_ranks(8))
    rows = run_noretrain(run.root, NoRetrainOptions(metrics=tuple(metric.split(",")), fractions=(0.25,)),
                         dataset_obj=ds, device="cpu", progress=False)
    assert {r["method"] for r in rows} == {"grad", "random"}  # random's test ranks made here: the baseline
    accuracy = {r["mode"]: r["test_acc"] for r in rows if r["method"] == "grad"}
    prefix = "road-" if metric == "road" else ""
    assert accuracy == {f"{prefix}morf": 0.5, f"{prefix}lerf": 1.0}


def test_lerf_removes_as_many_pixels_as_morf(tmp_path, monkeypatch):
    """Both replace floor(fraction x N) pixels: at 30% of 16 pixels, 4 (LeRF once kept floor(0.7 x 16) = 11
    and so replaced 5). The model predicts the number of replaced pixels; every test image's label is 4."""
    from roarfast.data.base import ImageSet
    from roarfast.stages.noretrain import run_noretrain

    n, g = 6, torch.Generator().manual_seed(1)
    images = torch.randint(0, 2, (n, 3, SIDE, SIDE), generator=g).to(torch.uint8) * 255  # never at the mean
    test = ImageSet(images, torch.full((n,), 4), None, [str(c) for c in range(SIDE * SIDE + 1)])
    ranks = torch.stack([torch.randperm(SIDE * SIDE, generator=g) for _ in range(n)]).view(n, SIDE, SIDE)
    run, ds = _hand_made_run(tmp_path, monkeypatch, lambda ds: RemovedCounter(len(test.classes)), test,
                             ranks.to(torch.uint16))
    rows = run_noretrain(run.root, NoRetrainOptions(metrics=("morf", "lerf"), fractions=(0.3,)), dataset_obj=ds,
                         device="cpu", progress=False)
    assert {r["mode"]: r["test_acc"] for r in rows} == {"morf": 1.0, "lerf": 1.0}
