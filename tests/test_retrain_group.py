"""`roarfast retrain --group-size K`: cells trained together give the rows of the same cells trained one at a
time (the same keys and configuration hashes, the same accuracies on a CPU), each row saying it was grouped
and holding its share of the group's time."""

import shutil

import pytest

from roarfast.stages.basemodel import TrainOptions, run_train
from roarfast.data import load_dataset
from roarfast.orchestration.retrain import RetrainOptions, run_retrain

KEYS = ("kind", "dataset", "model", "method", "mode", "fill", "fraction", "seed", "config_hash")


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    ds = load_dataset("embedded", num_train=200, num_test=60, seed=0)
    run_dir = tmp_path_factory.mktemp("group") / "base"
    run_train(run_dir, TrainOptions(epochs=1, batch_size=32), dataset_obj=ds, device="cpu", progress=False)
    return run_dir, ds


@pytest.mark.slow  # about 50 s on the 2-core development machine (5 s when it is not loaded)
def test_grouped_rows_equal_the_rows_of_cells_trained_alone(prepared, tmp_path):
    base, ds = prepared
    options = RetrainOptions(methods="random", modes=("roar", "kar"), fractions=(0.5,), epochs=1, mask_only=True,
                             recipe={"batch_size": 32})
    rows = {}
    for size in (1, 4):
        run_dir = tmp_path / f"size{size}"
        shutil.copytree(base, run_dir)
        rows[size] = run_retrain(run_dir, options, dataset_obj=ds, device="cpu", progress=False, group_size=size)
    assert len(rows[4]) == 4  # a ROAR cell, a KAR cell and their mask-only controls, in one group
    for alone, grouped in zip(rows[1], rows[4]):
        assert [alone[k] for k in KEYS] == [grouped[k] for k in KEYS]
        assert (alone["test_acc"], alone["val_acc"]) == (grouped["test_acc"], grouped["val_acc"])
        assert "group_size" not in alone["extra"]
        assert (grouped["extra"]["group_size"], grouped["extra"]["group"]) == (4, "loop")
    assert len({r["seconds"] for r in rows[4]}) == 1  # each its share of the group's wall time
