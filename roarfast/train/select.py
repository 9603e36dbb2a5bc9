"""Evaluation and model selection: at each epoch's end each member's validation accuracy, its history entry
and the best epoch's weights kept; at the end the test accuracy of the selected weights, with the recipe's
test-time views (recipe.tta: the mirror image, and 1-pixel shifts of both, averaged)."""

import time

import torch

from roarfast.recipe import Recipe
from roarfast.train.fused import member_logits, member_weights, stack_weights
from roarfast.train.parallel import all_reduce_sum, average_buffers, distributed
from roarfast.train.state import TrainState
from roarfast.train.step import EpochTally, autocast

#: pixels of the shifted test-time views (recipe.tta = 2)
TTA_SHIFT = 1


def tta_logits(model, x: torch.Tensor, level: int) -> torch.Tensor:
    """model's logits on x (Tensor[B, C, H, W]) averaged over test-time views: level 0 x alone; 1 x and its
    mirror image; 2 half of that plus a quarter each of the same on x shifted TTA_SHIFT pixels down-right and
    up-left (zero padding, the dataset mean once normalized, as the training shifts pad)."""
    if level == 0:
        return model(x)

    def mirrored(views):
        return 0.5 * model(views) + 0.5 * model(views.flip(3))

    out = mirrored(x)
    if level == 1:
        return out
    s = TTA_SHIFT
    padded = torch.nn.functional.pad(x, (s, s, s, s))
    h, w = x.shape[2:]
    shifted = [padded[:, :, :h, :w], padded[:, :, 2 * s:2 * s + h, 2 * s:2 * s + w]]
    return 0.5 * out + 0.25 * sum(mirrored(view.contiguous(memory_format=_format(x))) for view in shifted)


def _format(x: torch.Tensor):
    return torch.channels_last if x.is_contiguous(memory_format=torch.channels_last) else torch.contiguous_format


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
    for batches in zip(*(loader.batches(index, recipe.eval_batch_size, shard=shard) for loader in loaders)):
        x = batches[0][0] if members == 1 else torch.cat([x for x, _ in batches], 1)
        y = torch.stack([y for _, y in batches], 1)  # [B, K]
        with autocast(device, recipe):
            logits = tta_logits(model, x, tta)
        logits = logits.unsqueeze(1) if members == 1 else member_logits(logits, members)
        correct += (logits.argmax(2) == y).sum(0)
    model.train(was_training)
    return [float(c) / max(1, index.shape[0]) for c in all_reduce_sum(correct)]


def end_epoch(state: TrainState, epoch: int, val_index: torch.Tensor, tallies: list, images: int,
              started: float) -> list:
    """Scores the evaluated model (EMA or network) of each member on the samples `val_index` of its train
    loader, offers it to the member's selection and appends the epoch's history entries (returned); `tallies`
    per member, `images`: the images an epoch trained each member on over all ranks, `started`: its
    perf_counter start."""
    selected = state.evaluated
    average_buffers(selected, distributed()[1])
    members = state.members
    val_accs = member_accuracies(selected, [m.loaders["train"] for m in members], val_index, state.recipe)
    entries = []
    for k, (member, tally, val_acc) in enumerate(zip(members, tallies, val_accs)):
        entry = {"epoch": epoch, "lr": state.optimizer.param_groups[0]["lr"],
                 "train_loss": float(all_reduce_sum(tally.loss_sum)) / images,
                 "train_acc": float(all_reduce_sum(tally.correct)) / images,
                 "val_acc": val_acc, "seconds": time.perf_counter() - started}
        member.history.append(entry)
        if len(members) == 1:
            member.selection.offer(val_acc, epoch, selected)
        else:
            member.selection.offer(val_acc, epoch, lambda k=k: member_weights(selected.state_dict(), k, len(members)))
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


def new_tally(state: TrainState) -> list:
    """An empty EpochTally per member."""
    return [EpochTally(state.device) for _ in state.members]
