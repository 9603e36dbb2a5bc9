"""Extraction's stored ranks against the independent plain-PyTorch path (roarfast._reference), not against
the ranking function extraction itself calls: pixel ranks by the sum of squares over channels (the
default), every C*H*W value with --granularity value."""

import pytest
import torch

from roarfast import _reference, ops
from roarfast.records.checkpoint import load_checkpoint
from roarfast.data import load_dataset
from roarfast.stages.extract import ExtractOptions, explained_model, run_extract
from roarfast.methods import ExplainBatch, MethodParams, compute_maps
from roarfast.methods.params import black_baseline
from roarfast.rundir.directory import RunDir
from tests.test_extract import untrained_base


@pytest.fixture(scope="module")
def dataset():
    return load_dataset("embedded", num_train=10, num_test=20)


@pytest.fixture()
def run_dir(tmp_path, dataset):
    """A run directory holding an untrained base model of the dataset."""
    return untrained_base(tmp_path, dataset)


def _maps(run_dir, dataset, method):
    """The estimator's maps of the whole test split, computed directly."""
    model = explained_model(load_checkpoint(RunDir(run_dir).base_checkpoint)[0], "cpu")  # as extraction runs it
    split = dataset.split("test")
    x = ops.mask_normalize(split.images, None, mean=dataset.mean, std=dataset.std)
    batch = ExplainBatch(x=x, target=split.labels, index=torch.arange(len(split)))
    params = MethodParams(ig_baseline=black_baseline(dataset.mean, dataset.std))
    return compute_maps(model, batch, [method], params)[method]


@pytest.mark.parametrize("granularity, reduction", [("pixel", "sum_sq"), ("value", "value")])
def test_stored_ranks_equal_the_reference_ranking(run_dir, dataset, granularity, reduction):
    run_extract(run_dir, ExtractOptions(methods="grad", splits=("test",), granularity=granularity, batch_size=8),
                dataset_obj=dataset, device="cpu", progress=False)
    maps = _maps(run_dir, dataset, "grad")
    assert maps.shape[1] == 3 and (maps < 0).any()  # signed, multi-channel: the reductions disagree here
    stored = RunDir(run_dir).rank_store.read("grad", "test", dataset_fingerprint=dataset.fingerprint).tensor().long()
    expected = _reference.rank(maps, reduction)
    assert stored.shape == expected.shape
    assert torch.equal(stored, expected)
    if granularity == "pixel":  # the check can tell the documented reduction from the others
        for other in ("abs_sum", "max"):
            assert not torch.equal(stored, _reference.rank(maps, other)), other
