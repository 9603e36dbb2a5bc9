"""What a retrained model sees: ROAR replaces the top floor(fraction x N) ranked pixels, KAR keeps them
and replaces the rest, and replaced pixels take the training split's per-channel mean, on a fabricated
dataset whose statistics and masked test images are worked by hand."""

import pytest
import torch

from roarfast.data.base import ImageSet, make_dataset
from roarfast.fills import resolve_fill
from roarfast.orchestration.retrain import RetrainOptions, run_retrain
from roarfast.rundir.directory import RunDir
from tests.model_inputs import record_eval_inputs

#: pixel colour of each class: per channel the train split is half one value, half the other, so its mean
#: is (0.5, 0.4, 0.6) and its std (0.5, 0.2, 0.2) in [0, 1] units; class 0 normalizes to -1, class 1 to +1
COLOURS = ((0, 51, 102), (255, 153, 204))


def _split(labels):
    labels = torch.tensor(labels)
    images = torch.tensor(COLOURS, dtype=torch.uint8)[labels].view(-1, 3, 1, 1).expand(-1, 3, 32, 32).contiguous()
    return ImageSet(images=images, labels=labels, masks=None, classes=["dark", "light"])


#: --fill -> the replacement in the normalized space, by hand from the mean and std above: the mean is 0,
#: black is -mean/std, ImageNet's mean (0.485, 0.456, 0.406) is (im - mean) / std
FILLS = {"dataset-mean": (0.0, 0.0, 0.0), "zero": (-1.0, -2.0, -3.0), "imagenet-mean": (-0.03, 0.28, -0.97)}


@pytest.mark.parametrize("fill", FILLS)
def test_fill_values_hand_worked(fill):
    assert resolve_fill(fill).values((0.5, 0.4, 0.6), (0.5, 0.2, 0.2)) == pytest.approx(FILLS[fill])


@pytest.mark.parametrize("fill", ["dataset-mean", "zero"])
def test_roar_and_kar_cells_see_hand_worked_masked_images(tmp_path, monkeypatch, fill):
    ds = make_dataset("two-colours", _split([0, 1] * 10), _split([0, 1] * 3), {})
    assert ds.mean == pytest.approx((0.5, 0.4, 0.6)) and ds.std == pytest.approx((0.5, 0.2, 0.2))
    seen = record_eval_inputs(monkeypatch)
    run_retrain(tmp_path, RetrainOptions(fractions=(0.25,), modes=("roar", "kar"), epochs=1, fill=fill), dataset_obj=ds,
                device="cpu", progress=False)
    ranks = RunDir(tmp_path).rank_store.read("random", "test").tensor().long()  # [6, 32, 32], made by run_retrain
    sign = torch.tensor([-1.0, 1.0])[ds.test.labels].view(6, 1, 1, 1)
    k = 256  # floor(0.25 * 1024)
    assert len(seen) == 2  # random x (roar, kar), one training each
    for inputs, replaced in zip(seen, (ranks < k, ranks >= k)):
        tested = inputs[-1]  # the last evaluation: the selected model on the test split
        expected = torch.where(replaced.unsqueeze(1), torch.tensor(FILLS[fill]).view(1, 3, 1, 1),
                               sign.expand(6, 3, 32, 32))
        torch.testing.assert_close(tested, expected, rtol=0, atol=1e-6)
