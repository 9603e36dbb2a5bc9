"""Training a classifier from scratch, on the unmodified dataset (the base model) or on ROAR/KAR-masked
images (every retraining cell): data on the device, SGD with Nesterov momentum, warmup then cosine
learning rate, label smoothing, an EMA of the weights, model selection on the validation split only.

The loop is written in three parts, each per model, so that one loop can advance several models:
- `state`: what one model's training holds (network, EMA copy, optimizer, schedule, loss scaler, random
  generator, its masked loaders, the best epoch so far and its history);
- `step`: one batch in, the state updated in place, the batch's loss and correct count out;
- `select`: at each epoch's end the validation accuracy and the best epoch's weights kept; at the end the
  test accuracy of the selected weights.
`loop` composes them (`train_classifier`); `masking` holds a cell's masking settings and loaders;
`parallel` the data-parallel helpers (torchrun, DDP).
"""

from roarfast.train.loop import TrainResult, train_classifier
from roarfast.train.masking import Masking
from roarfast.train.select import accuracy

__all__ = ["Masking", "TrainResult", "accuracy", "train_classifier"]
