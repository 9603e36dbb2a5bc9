"""Two recipe choices that airbench94 makes and roarfast's defaults do not: shifts padded by reflection
(`pad`), and the last epoch kept instead of the best on validation (`select`)."""

import dataclasses
import math

import pytest
import torch
from torch import nn

from roarfast.data import load_dataset
from roarfast.data.augment import Augment, augment
from roarfast.errors import UserError
from roarfast.recipe import Recipe, check_overrides
from roarfast.train import train_classifier
from roarfast.train.views import tta_logits

TINY = Recipe(epochs=3, batch_size=32, lr=0.05)


@pytest.fixture(scope="module")
def tiny():
    return load_dataset("embedded", num_train=160, num_test=40, seed=0)


def _reflected(image: torch.Tensor, dy: int, dx: int) -> torch.Tensor:
    """image (Tensor[C, H, W]) shifted by (dy, dx), its border filled by mirroring at the edge pixel, indexed by
    hand: source row r - dy, reflected into [0, H) as -r -> r and H - 1 + k -> H - 1 - k."""
    c, h, w = image.shape

    def reflect(i, n):
        return -i if i < 0 else 2 * (n - 1) - i if i >= n else i

    rows = [reflect(r - dy, h) for r in range(h)]
    cols = [reflect(q - dx, w) for q in range(w)]
    return image[:, rows][:, :, cols]


def test_reflected_shifts_are_crops_of_the_mirrored_image():
    x = torch.rand(200, 2, 5, 5) + 1.0  # no zero anywhere: a zero-padded border would show
    out = augment(x, Augment(flip=False, translate=1, pad="reflect"), torch.Generator().manual_seed(0))
    assert out.is_contiguous(memory_format=torch.channels_last)
    seen = set()
    for i in range(len(x)):
        shifts = [(dy, dx) for dy in (-1, 0, 1) for dx in (-1, 0, 1) if torch.equal(out[i], _reflected(x[i], dy, dx))]
        assert shifts, f"sample {i} is not a reflected shift"
        seen.add(shifts[0])
    assert len(seen) == 9
    assert (out != 0).all()
    zero = augment(x, Augment(flip=False, translate=1), torch.Generator().manual_seed(0))
    assert (zero == 0).any()  # the default still pads with zeros (the mean once normalized)


def test_reflected_test_time_views_as_written_out_by_hand():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Flatten(), nn.Linear(2 * 5 * 5, 3))
    x = torch.randn(4, 2, 5, 5)
    mirror = lambda v: 0.5 * model(v) + 0.5 * model(v.flip(3))  # noqa: E731
    down_right = torch.stack([_reflected(i, 1, 1) for i in x])
    up_left = torch.stack([_reflected(i, -1, -1) for i in x])
    with torch.no_grad():
        torch.testing.assert_close(tta_logits(model, x, 2, "reflect"),
                                   0.5 * mirror(x) + 0.25 * mirror(down_right) + 0.25 * mirror(up_left))
        assert not torch.allclose(tta_logits(model, x, 2, "reflect"), tta_logits(model, x, 2))


def test_select_last_keeps_the_last_epoch(tiny):
    result = train_classifier(tiny, "fastnet", TINY.replace(select="last"), "cpu", seed=1, progress=False)
    assert result.best_epoch == TINY.epochs
    assert result.val_acc == result.history[-1]["val_acc"]
    assert len(result.history) == TINY.epochs


def test_without_validation_images_only_the_last_epoch_can_be_kept(tiny):
    everything = dataclasses.replace(tiny, val_index=torch.empty(0, dtype=torch.int64))
    assert len(everything.train_index) == len(tiny.train)
    result = train_classifier(everything, "fastnet", TINY.replace(epochs=2, select="last"), "cpu", seed=0,
                              progress=False)
    assert result.best_epoch == 2 and 0.0 <= result.test_acc <= 1.0
    assert all(math.isnan(h["val_acc"]) for h in result.history)
    with pytest.raises(UserError, match="select=last"):
        train_classifier(everything, "fastnet", TINY.replace(epochs=1), "cpu", seed=0, progress=False)


def test_the_new_fields_are_checked_and_left_out_of_records_at_their_defaults():
    assert check_overrides({"pad": "reflect", "select": "last"}) == {"pad": "reflect", "select": "last"}
    for bad in ({"pad": "mirror"}, {"select": "best"}, {"pad": True}):
        with pytest.raises(UserError, match=next(iter(bad))):
            check_overrides(bad)
    assert "pad" not in Recipe().to_dict() and "select" not in Recipe().to_dict()  # earlier records' ids hold
    record = Recipe(pad="reflect", select="last").to_dict()
    assert (record["pad"], record["select"]) == ("reflect", "last")
    assert Recipe.from_dict(record) == Recipe(pad="reflect", select="last")
