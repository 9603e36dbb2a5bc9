"""The mask-only control (README, "Semantics": mask leakage): a model trained and tested on a cell's
removal pattern alone. The pattern loader hands over exactly +-1 patterns; a pattern that encodes the
class is learned, one independent of it is not; retrain records the control beside its cell."""

import pytest
import torch

from roarfast import ops
from roarfast.data import load_dataset
from roarfast.data.loader import pattern_loader
from roarfast.recipe import Recipe
from roarfast.orchestration.retrain import RetrainOptions, run_retrain
from roarfast.train import Masking, train_classifier

RECIPE = Recipe(epochs=6, batch_size=32, lr=0.05, ema_decay=None)  # an EMA lags far behind in 66 steps


@pytest.fixture(scope="module")
def ds():
    return load_dataset("embedded", num_train=400, num_test=100, seed=0)


def _stripe_ranks(labels: torch.Tensor) -> torch.Tensor:
    """Ranks whose top 96 pixels are rows 3c .. 3c+2 of an image of class c: the pattern is the label."""
    n = labels.shape[0]
    scores = torch.zeros(n, 32, 32)
    for i, label in enumerate(labels.tolist()):
        scores[i, 3 * label:3 * label + 3] = 1.0
    return ops.rank(scores)


@pytest.mark.parametrize("keep", [False, True])
def test_pattern_batches_are_the_removal_pattern(ds, keep):
    ranks = ops.rank(torch.rand(len(ds.train), 32, 32, generator=torch.Generator().manual_seed(0)))
    loader = pattern_loader(ds, "train", "cpu", ranks=ranks, fraction=0.25, keep=keep)
    index = torch.tensor([3, 0, 399])
    (x, y), = loader.batches(index, 3)
    replaced = (ranks[index].int() < 256) != keep  # 0.25 of 1024 pixels
    expected = torch.where(replaced, -1.0, 1.0).unsqueeze(1).expand(3, 3, 32, 32)
    assert torch.equal(x, expected) and torch.equal(y, ds.train.labels[index])


def test_control_learns_a_pattern_that_encodes_the_class_and_not_one_that_does_not(ds):
    leaking = Masking(train_ranks=_stripe_ranks(ds.train.labels), test_ranks=_stripe_ranks(ds.test.labels),
                      fraction=96 / 1024, mask_only=True)
    g = torch.Generator().manual_seed(1)
    independent = Masking(train_ranks=ops.rank(torch.rand(len(ds.train), 32, 32, generator=g)),
                          test_ranks=ops.rank(torch.rand(len(ds.test), 32, 32, generator=g)), fraction=0.5,
                          mask_only=True)
    learned = train_classifier(ds, "fastnet", RECIPE, "cpu", seed=0, masking=leaking, progress=False)
    chance = train_classifier(ds, "fastnet", RECIPE, "cpu", seed=0, masking=independent, progress=False)
    assert learned.test_acc >= 0.7, learned.test_acc  # 0.9-1.0 over seeds here; chance is 0.1
    assert chance.test_acc <= 0.3, chance.test_acc


def test_retrain_records_the_control_beside_each_cell(ds, tmp_path):
    options = RetrainOptions(fractions=(0.5,), methods="random", modes=("roar", "kar"), epochs=1, mask_only=True)
    rows = run_retrain(tmp_path, options, dataset_obj=ds, device="cpu", progress=False)
    cells = {(r["method"], r["mode"]): r for r in rows}
    assert set(cells) == {("random", mode) for mode in ("roar", "kar", "roar-mask", "kar-mask")}
    # the control sees no pixel values: another fill is the same control, a new ROAR cell
    other_fill = run_retrain(tmp_path, RetrainOptions(**{**options.__dict__, "fill": "zero", "modes": ("roar",)}),
                             dataset_obj=ds, device="cpu", progress=False)
    again = {r["mode"]: r for r in other_fill}
    assert again["roar-mask"]["config_hash"] == cells[("random", "roar-mask")]["config_hash"]
    assert again["roar"]["config_hash"] != cells[("random", "roar")]["config_hash"]
