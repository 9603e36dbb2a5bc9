"""Training a classifier from scratch, on the unmodified dataset (the base model) or on ROAR/KAR-masked
images (every retraining cell): data on the device, SGD with Nesterov momentum, a warmup then decay
schedule, label smoothing, an EMA (or lookahead) of the weights, model selection on the validation split
only.

The loop is written in parts, each per model, so that one loop can advance several models:
- `state`: what one model's training holds (a `Member`: its masked loaders, random generator, best epoch
  and history) and what a step updates (a `TrainState`: network, EMA copy, optimizer, schedule, loss scaler);
- `step`: one batch per member in, the state updated in place, each batch's loss and correct count out;
- `select`: at each epoch's end the validation accuracies and the best epochs' weights kept; at the end the
  test accuracies of the selected weights (with the recipe's test-time views).
`loop` composes them (`train_classifier`: one model); `group` trains several together (`train_group`:
each its own seed, masking and result), as a loop of states, on CUDA streams (`streams`) or fused into one
network (`fused`); `masking` holds a cell's masking settings and loaders; `parallel` the data-parallel
helpers (torchrun, DDP).
"""

from roarfast.train.group import Grouping, Run, default_grouping, train_group
from roarfast.train.loop import TrainResult, train_classifier
from roarfast.train.masking import Masking
from roarfast.train.select import accuracy

__all__ = ["Grouping", "Masking", "Run", "TrainResult", "accuracy", "default_grouping", "train_classifier",
           "train_group"]
