"""Training a classifier from scratch, on the unmodified dataset (the base model) or on ROAR/KAR-masked
images (every retraining cell): data on the device, SGD with Nesterov momentum, a warmup then decay
schedule, label smoothing, an EMA (or lookahead) of the weights, model selection on the validation split
only.

`classifier` is one training run read top to bottom (`train_classifier`: data, model, optimizer, schedule, loop,
evaluation, selection), its parts in `state` (what a step updates: optimizer, schedule, EMA, lookahead), `loop`
(epochs, batches, steps) and `evaluation` (accuracies, the selected epoch); the other modules are what it, or
several cells trained together, call on: `group` trains several models as one loop of states (`train_group`:
each its own seed, masking and result), on CUDA `streams` or `fused` into one network; `masking` holds a cell's
masking settings and loaders; `parallel` the data-parallel helpers (torchrun, DDP).
"""

from roarfast.train.classifier import TrainResult, train_classifier
from roarfast.train.evaluation import accuracy
from roarfast.train.group import Grouping, Run, default_grouping, train_group
from roarfast.train.masking import Masking

__all__ = ["Grouping", "Masking", "Run", "TrainResult", "accuracy", "default_grouping", "train_classifier",
           "train_group"]
