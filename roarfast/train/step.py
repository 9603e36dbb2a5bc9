"""One training step: a batch per member in, the state updated in place (weights, EMA, optimizer, schedule,
loss scale, lookahead), each member's loss and correct count out. One member's network, or several fused
into one (roarfast.train.fused: their batches side by side along the channels, one loss summed over them)."""

import torch

from roarfast.recipe import Recipe, amp_dtype
from roarfast.train.fused import fused_forward_loss
from roarfast.train.state import LOOKAHEAD_DECAY, LOOKAHEAD_EVERY, LOOKAHEAD_POWER, TrainState


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


@torch.no_grad()
def lookahead_update(state: TrainState) -> None:
    """After the step just taken: every LOOKAHEAD_EVERY steps the slow copy moves towards the weights and the
    weights are set to it; after the last step the weights are set to the slow copy."""
    step = state.scheduler.last_epoch
    pull, last = step % LOOKAHEAD_EVERY == 0, step >= state.total_steps
    if not (pull or last):
        return
    keep = LOOKAHEAD_DECAY ** LOOKAHEAD_EVERY * (step / state.total_steps) ** LOOKAHEAD_POWER
    current = state.net.state_dict()
    for name, slow in state.lookahead.items():
        if pull:
            slow.lerp_(current[name], 1.0 - keep)
        current[name].copy_(slow)


def train_step(state: TrainState, batches: list) -> list:
    """One optimizer step of `state` on one batch per member ((x Tensor[B, C, H, W], y int64 Tensor[B]) each);
    returns per member the batch's mean loss (detached) and its count of correct predictions (int64), both
    0-d on the device."""
    recipe = state.recipe
    with autocast(state.device, recipe):
        if len(state.members) == 1:
            x, y = batches[0]
            logits = state.model(x)
            loss = state.loss_fn(logits.float(), y)
            losses, correct = [loss], [(logits.argmax(1) == y).sum()]
        else:
            loss, losses, correct = fused_forward_loss(state, batches)
    state.optimizer.zero_grad(set_to_none=True)
    state.scaler.scale(loss).backward()
    state.scaler.step(state.optimizer)
    state.scaler.update()
    state.scheduler.step()
    if state.ema is not None:
        ema_update(state.ema, state.net, recipe.ema_decay)
    if state.lookahead is not None:
        lookahead_update(state)
    return [(member_loss.detach(), member_correct) for member_loss, member_correct in zip(losses, correct)]


class EpochTally:
    """The loss and correct predictions of one model's steps in an epoch, summed on the device (no sync)."""

    def __init__(self, device):
        self.loss_sum = torch.zeros((), device=device)
        self.correct = torch.zeros((), dtype=torch.int64, device=device)

    def add(self, loss: torch.Tensor, correct: torch.Tensor, images: int) -> None:
        self.loss_sum += loss * images
        self.correct += correct
