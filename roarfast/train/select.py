"""Evaluation and model selection: at each epoch's end a model's validation accuracy, its history entry and
the best epoch's weights kept; at the end the test accuracy of the selected weights."""

import time

import torch

from roarfast.recipe import Recipe
from roarfast.train.parallel import all_reduce_sum, average_buffers, distributed
from roarfast.train.state import TrainState
from roarfast.train.step import EpochTally, autocast


@torch.no_grad()
def accuracy(model, loader, index, recipe: Recipe) -> float:
    """Top-1 accuracy of model on loader's samples `index` (int64 Tensor[M]), no augmentation; under a
    process group each rank scores a share and the counts are summed."""
    was_training = model.training
    model.eval()
    correct = torch.zeros((), dtype=torch.int64, device=loader.device)
    for x, y in loader.batches(index, recipe.eval_batch_size, shard=distributed()):
        with autocast(loader.device, recipe):
            correct += (model(x).argmax(1) == y).sum()
    model.train(was_training)
    return float(all_reduce_sum(correct)) / max(1, index.shape[0])


def end_epoch(state: TrainState, epoch: int, val_index: torch.Tensor, tally: EpochTally, images: int,
              started: float) -> dict:
    """Scores the evaluated model (EMA or network) on the samples `val_index` of the train loader, offers it
    to the selection and appends the epoch's history entry (returned); `images`: the images the epoch
    trained on over all ranks, `started`: its perf_counter start."""
    selected = state.evaluated
    average_buffers(selected, distributed()[1])
    val_acc = accuracy(selected, state.loaders["train"], val_index, state.recipe)
    entry = {"epoch": epoch, "lr": state.optimizer.param_groups[0]["lr"],
             "train_loss": float(all_reduce_sum(tally.loss_sum)) / images,
             "train_acc": float(all_reduce_sum(tally.correct)) / images,
             "val_acc": val_acc, "seconds": time.perf_counter() - started}
    state.history.append(entry)
    state.selection.offer(val_acc, epoch, selected)
    return entry


def selected_test_acc(state: TrainState, test_index: torch.Tensor) -> float:
    """Loads the selected epoch's weights into the network (left in eval mode) and returns its accuracy on
    the samples `test_index` of the test loader."""
    state.net.load_state_dict(state.selection.weights)
    state.net.eval()
    return accuracy(state.net, state.loaders["test"], test_index, state.recipe)
