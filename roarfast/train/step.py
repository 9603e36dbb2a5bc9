"""One training step of one model: a batch in, its state updated in place (weights, EMA, optimizer,
schedule, loss scale), the batch's loss and correct count out."""

import torch

from roarfast.recipe import Recipe, amp_dtype
from roarfast.train.state import TrainState


def autocast(device, recipe: Recipe):
    """The recipe's autocast context on device (a no-op in fp32)."""
    dtype = amp_dtype(recipe)
    return torch.autocast(torch.device(device).type, dtype=dtype or torch.float32, enabled=dtype is not None)


@torch.no_grad()
def ema_update(ema, model, decay: float):
    """ema <- decay * ema + (1 - decay) * model for float parameters; buffers (BN statistics) copied."""
    for e, p in zip(ema.parameters(), model.parameters()):
        e.lerp_(p, 1.0 - decay)
    for e, b in zip(ema.buffers(), model.buffers()):
        e.copy_(b)


def train_step(state: TrainState, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """One optimizer step of `state` on the batch x (Tensor[B, C, H, W]), y (int64 Tensor[B]); returns the
    batch's mean loss (detached) and its count of correct predictions (int64), both 0-d on the device."""
    recipe = state.recipe
    with autocast(state.device, recipe):
        logits = state.model(x)
        loss = state.loss_fn(logits.float(), y)
    state.optimizer.zero_grad(set_to_none=True)
    state.scaler.scale(loss).backward()
    state.scaler.step(state.optimizer)
    state.scaler.update()
    state.scheduler.step()
    if state.ema is not None:
        ema_update(state.ema, state.net, recipe.ema_decay)
    return loss.detach(), (logits.argmax(1) == y).sum()


class EpochTally:
    """The loss and correct predictions of one model's steps in an epoch, summed on the device (no sync)."""

    def __init__(self, device):
        self.loss_sum = torch.zeros((), device=device)
        self.correct = torch.zeros((), dtype=torch.int64, device=device)

    def add(self, loss: torch.Tensor, correct: torch.Tensor, images: int) -> None:
        self.loss_sum += loss * images
        self.correct += correct
