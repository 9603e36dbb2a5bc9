"""Evaluation and selection: each member's accuracy on a split (`member_accuracies`, with the recipe's test-time
views where asked: roarfast.train.views), its epoch offered to its `Selection` at every epoch's end (`end_epoch`:
the best validation accuracy, or recipe.select "last", the last epoch), and the selected weights tested at the
end (`selected_test_accs`).
"""

import math
import time
from dataclasses import dataclass

import torch

from roarfast.errors import UserError
from roarfast.common.memory import release_after_batch, release_freed_memory
from roarfast.recipe import Recipe, autocast
from roarfast.train.fused import member_logits, member_weights, stack_weights
from roarfast.train.parallel import all_reduce_sum, average_buffers, distributed
from roarfast.train.state import TrainState
from roarfast.train.views import tta_logits


@torch.no_grad()
def accuracy(model, loader, index, recipe: Recipe, tta: int = 0) -> float:
    """Top-1 accuracy of model on loader's samples `index` (int64 Tensor[M]), no augmentation (test-time views
    at level `tta`); under a process group each rank scores a share and the counts are summed."""
    return member_accuracies(model, [loader], index, recipe, tta)[0]


@torch.no_grad()
def member_accuracies(model, loaders: list, index, recipe: Recipe, tta: int = 0) -> list:
    """Top-1 accuracy of each member of `model` (one network, or len(loaders) fused) on its own loader's samples
    `index`, no augmentation (test-time views at level `tta`)."""
    was_training = model.training
    model.eval()
    device = loaders[0].device
    members = len(loaders)
    correct = torch.zeros(members, dtype=torch.int64, device=device)
    shard = distributed()
    # the training steps' freed blocks go back to the system before an evaluation, a large evaluation batch's after
    # it, and the evaluation's at its end: a CPU process then holds one batch's blocks, not those of the training
    # steps and of every batch it evaluated (roarfast.common.memory)
    release_freed_memory()
    for batches in zip(*(loader.batches(index, recipe.eval_batch_size, shard=shard) for loader in loaders)):
        x = batches[0][0] if members == 1 else torch.cat([x for x, _ in batches], 1)
        y = torch.stack([y for _, y in batches], 1)  # [B, K]
        with autocast(device, recipe):
            logits = tta_logits(model, x, tta, recipe.pad)
        logits = logits.unsqueeze(1) if members == 1 else member_logits(logits, members)
        correct += (logits.argmax(2) == y).sum(0)
        input_bytes = x.nbytes
        del batches, x, y, logits  # freed before the loaders make the next batch
        release_after_batch(input_bytes)
    release_freed_memory()
    model.train(was_training)
    return [float(c) / max(1, index.shape[0]) for c in all_reduce_sum(correct)]


@dataclass
class Selection:
    """The epoch with the best validation accuracy so far: its accuracy, its number (0: none yet) and the
    evaluated model's weights then, on the CPU."""

    val_acc: float = -1.0
    epoch: int = 0
    weights: dict | None = None

    def offer(self, val_acc: float, epoch: int, model, always: bool = False) -> None:
        """Keeps `model`'s weights (an nn.Module, or a function returning its state dict) when `val_acc` beats
        the best so far (the earliest epoch wins a tie), or `always`."""
        if always or val_acc > self.val_acc:
            state = model.state_dict() if isinstance(model, torch.nn.Module) else model()
            self.val_acc, self.epoch = val_acc, epoch
            self.weights = {k: v.detach().to("cpu", copy=True) for k, v in state.items()}


def end_epoch(state: TrainState, epoch: int, val_index: torch.Tensor, tallies: list, images: int,
              started: float) -> list:
    """Scores the evaluated model (EMA or network) of each member on the samples `val_index` of its train
    loader, offers it to the member's selection and appends the epoch's history entries (returned); `tallies`
    per member, `images`: the images an epoch trained each member on over all ranks, `started`: its
    perf_counter start."""
    selected = state.evaluated
    average_buffers(selected, distributed()[1])
    members = state.members
    if val_index.numel():
        val_accs = member_accuracies(selected, [m.loaders["train"] for m in members], val_index, state.recipe)
    elif state.recipe.select == "last":
        val_accs = [math.nan] * len(members)
    else:
        raise UserError("an empty validation split leaves nothing to select the epoch by: train with "
                        "--recipe select=last")
    # "last": only the final epoch is offered, and kept whatever its accuracy (no copy of the others' weights)
    offered = state.recipe.select != "last" or epoch == state.recipe.epochs
    entries = []
    for k, (member, tally, val_acc) in enumerate(zip(members, tallies, val_accs)):
        entry = {"epoch": epoch, "lr": state.optimizer.param_groups[0]["lr"],
                 "train_loss": float(all_reduce_sum(tally.loss_sum)) / images,
                 "train_acc": float(all_reduce_sum(tally.correct)) / images,
                 "val_acc": val_acc, "seconds": time.perf_counter() - started}
        member.history.append(entry)
        weights = selected if len(members) == 1 else (
            lambda k=k: member_weights(selected.state_dict(), k, len(members)))
        if offered:
            member.selection.offer(val_acc, epoch, weights, always=state.recipe.select == "last")
        entries.append(entry)
    return entries


def selected_test_accs(state: TrainState, test_index: torch.Tensor) -> list:
    """Loads each member's selected weights into its network (and, fused, into the network stepped), leaves
    them in eval mode and returns each member's accuracy on the samples `test_index` of its test loader."""
    members = state.members
    for member in members:
        member.net.load_state_dict(member.selection.weights)
        member.net.eval()
    tested = members[0].net
    if len(members) > 1:
        state.net.load_state_dict(stack_weights([m.selection.weights for m in members]))
        tested = state.net
    return member_accuracies(tested, [m.loaders["test"] for m in members], test_index, state.recipe, state.recipe.tta)
