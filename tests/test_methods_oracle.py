"""On the embedded dataset with a trained model, SG-SQ and VAR put their top pixels on the ground-truth
object far more often than random scores do (the oracle's own top pixels are all on it)."""

import pytest
import torch

from roarfast import ops

pytestmark = pytest.mark.slow

#: small enough to train with the default CPU recipe on 2 cores in well under a minute
NUM_TRAIN, NUM_TEST = 2000, 100


def precision_at_mask_size(maps: torch.Tensor, masks: torch.Tensor) -> torch.Tensor:
    """Per image, the share of its top-|mask| pixels (ops.rank order) that lie inside the mask -> Tensor[N]."""
    ranks = ops.rank(maps if maps.shape[1] > 1 else maps[:, 0]).flatten(1).long()
    area = masks.flatten(1).sum(1, keepdim=True)
    return ((ranks < area) & masks.flatten(1)).sum(1) / area.squeeze(1)


def test_sg_sq_and_var_find_the_object_better_than_random():
    from roarfast.data import load_dataset
    from roarfast.methods import ExplainBatch, MethodParams, compute_maps
    from roarfast.recipe import effective_recipe
    from roarfast.train import train_classifier

    dataset = load_dataset("embedded", num_train=NUM_TRAIN, num_test=NUM_TEST)
    recipe = effective_recipe("fastnet", "cpu", dataset)
    result = train_classifier(dataset, "fastnet", recipe, "cpu",
                              seed=0, progress=False)
    assert result.test_acc >= 0.5, f"the model should have learned the task, got {result.test_acc:.1%} test accuracy"
    test = dataset.test
    x = ops.mask_normalize(test.images, None, 0, [0.0] * dataset.channels, mean=dataset.mean, std=dataset.std)
    batch = ExplainBatch(x=x, target=test.labels, index=torch.arange(len(test)), gt_mask=test.masks)
    maps = compute_maps(result.model, batch, "sg-sq,var,random,oracle", MethodParams())
    precision = {name: float(precision_at_mask_size(m, test.masks).mean()) for name, m in maps.items()}
    assert precision["oracle"] == 1.0
    # Random finds the object in proportion to its area (8x8 of 32x32 = 6%).
    assert precision["random"] < 0.15, precision
    assert precision["sg-sq-grad"] > precision["random"] + 0.2, precision
    assert precision["var-grad"] > precision["random"] + 0.2, precision
