"""Chance on a split (roarfast.chance): the share of the most frequent label, computed where a retraining
worker needs it without the statistics' scipy."""

import subprocess
import sys

import pytest
import torch

from roarfast.chance import chance_rate


def test_chance_is_the_share_of_the_most_frequent_label():
    assert chance_rate([0, 1, 1, 2, 1, 0]) == 0.5
    assert chance_rate(torch.tensor([3, 3, 3, 0])) == 0.75  # labels absent from the split count for nothing
    with pytest.raises(ValueError, match="at least one label"):
        chance_rate([])


#: a worker's path: a CellTrainer trains one cell (ranks handed over in memory), then the statistics' scipy and
#: the report's libraries are looked for
_WORKER = """
import sys
from types import SimpleNamespace
import torch
from roarfast.stages.cells import Cell, CellTrainer
from roarfast.data import load_dataset
from roarfast.models import resolve_model
from roarfast.recipe import Recipe

ds = load_dataset("embedded", num_train=64, num_test=20, seed=0)
ranks = {split: torch.zeros(len(ds.split(split)), 32, 32, dtype=torch.int32) for split in ("train", "test")}
run = SimpleNamespace(head=lambda: SimpleNamespace(base="base", ranks={}), ranks_for=lambda ids: None,
                      read_ranks=lambda method, split, fingerprint, **ids: SimpleNamespace(tensor=lambda: ranks[split]))
trainer = CellTrainer(run, ds, resolve_model("fastnet"), Recipe(epochs=1, batch_size=32), "dataset-mean", "cpu")
metrics = trainer.train(Cell("random", "roar", 0.5, 0))
counts = torch.bincount(ds.test.labels)
assert metrics["test_chance"] == counts.max().item() / len(ds.test), metrics
heavy = [name for name in ("scipy", "matplotlib", "pandas", "ray", "captum") if name in sys.modules]
assert not heavy, heavy
"""


def test_a_worker_trains_a_cell_without_importing_scipy_nor_the_report_s_libraries():
    result = subprocess.run([sys.executable, "-c", _WORKER], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
