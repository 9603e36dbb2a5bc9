"""Chance on a split, apart from the statistics (roarfast.stats imports scipy): a retraining worker records
it beside each cell's accuracy and needs nothing heavier than numpy for it."""

import numpy as np


def chance_rate(labels) -> float:
    """Chance on a split: the share of its most frequent label (what a model that learned only the class
    prior reaches). labels: a sequence of non-negative ints (an int64 Tensor too)."""
    counts = np.bincount(np.asarray(labels, dtype=np.int64))
    if counts.sum() == 0:
        raise ValueError("chance_rate needs at least one label")
    return float(counts.max() / counts.sum())
