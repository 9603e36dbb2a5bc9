"""K networks of one architecture trained as one (horizontal fusion, as in HFTA): every convolution a grouped
convolution over K x C channels, every batch norm over K x C channels, every linear layer a batched one.
The members' batches go in side by side along the channels (member k's images are channels k*C..(k+1)*C-1),
so each member's channels see only its own images and its own weights; the loss is the sum of the members'
mean losses, so each member's gradients are those of its own loss. Every fused tensor is the members'
tensors stacked along its first dimension, under the same names: a member's weights are a slice, and its
optimizer group, EMA and lookahead are what they would be alone (all elementwise).

Equal to the members trained alone up to floating point: a grouped convolution sums the same products in
another order. A network with a layer this module cannot fuse (or a forward that mixes channels outside its
layers, caught by comparing one fused forward with the members') raises NotFusable.
"""

import copy

import torch
from torch import nn

#: the fused forward must give the members' logits within this, relative to their largest magnitude: far
#: above rounding (TF32 convolutions on a GPU differ by about 1e-3), far below what mixing members gives
PROBE_TOLERANCE = 1e-2


class NotFusable(Exception):
    """The networks cannot be trained as one (the group trains them one after another instead)."""


class FusedLinear(nn.Module):
    """K linear layers as one: weight Tensor[K*out, in] and bias Tensor[K*out] (each member's rows stacked, so
    the tensors keep the dimensions of a member's). Takes Tensor[B, K*in] (members side by side) or
    Tensor[B, K, in]; returns Tensor[B, K, out]."""

    def __init__(self, members: int, in_features: int, out_features: int, bias: bool):
        super().__init__()
        self.members, self.in_features, self.out_features = members, in_features, out_features
        self.weight = nn.Parameter(torch.empty(members * out_features, in_features))
        self.bias = nn.Parameter(torch.empty(members * out_features)) if bias else None

    def forward(self, x):
        k = self.members
        x = x.reshape(x.shape[0], k, self.in_features)
        out = torch.bmm(x.transpose(0, 1), self.weight.view(k, self.out_features, -1).transpose(1, 2)).transpose(0, 1)
        return out if self.bias is None else out + self.bias.view(k, self.out_features)


def _fused_layer(module: nn.Module, k: int) -> nn.Module | None:
    """The fused form of a layer with parameters (None: a layer kept as it is)."""
    if isinstance(module, nn.Conv2d):
        return nn.Conv2d(k * module.in_channels, k * module.out_channels, module.kernel_size, stride=module.stride,
                         padding=module.padding, dilation=module.dilation, groups=k * module.groups,
                         bias=module.bias is not None, padding_mode=module.padding_mode)
    if isinstance(module, nn.BatchNorm2d):
        return nn.BatchNorm2d(k * module.num_features, eps=module.eps, momentum=module.momentum, affine=module.affine,
                              track_running_stats=module.track_running_stats)
    if isinstance(module, nn.Linear):
        return FusedLinear(k, module.in_features, module.out_features, module.bias is not None)
    if module._parameters or module._buffers:
        raise NotFusable(f"{type(module).__name__} layers cannot be fused")
    return None  # kept (its children fused): that it acts on each channel alone is what the probe checks


def _replace_layers(module: nn.Module, k: int) -> None:
    for name, child in module.named_children():
        fused = _fused_layer(child, k)
        if fused is not None:
            setattr(module, name, fused)
        else:
            _replace_layers(child, k)


def stack_weights(states: list) -> dict:
    """The fused state dict of the members' state dicts (same keys): tensors stacked along dimension 0; a
    0-d tensor (BN's step count, equal in every member) taken once."""
    return {name: torch.cat([s[name] for s in states]) if value.dim() else value
            for name, value in states[0].items()}


def member_weights(state: dict, k: int, members: int) -> dict:
    """Member k's state dict (views) of a fused state dict of `members` networks."""
    return {name: value.chunk(members)[k] if value.dim() else value for name, value in state.items()}


def member_logits(out: torch.Tensor, members: int) -> torch.Tensor:
    """A fused network's output as Tensor[B, K, classes] (a batched head gives that; a conv head gives the
    members side by side)."""
    return out if out.dim() == 3 else out.reshape(out.shape[0], members, -1)


def fuse(nets: list, channels: int, image_size: int) -> nn.Module:
    """One network that computes each of `nets` (same architecture, on the same device and memory format,
    taking images of `channels` x `image_size`^2) on its own channels, with their weights, their frozen
    parameters frozen. Raises NotFusable."""
    k = len(nets)
    fused = copy.deepcopy(nets[0])
    _replace_layers(fused, k)
    first = next(nets[0].parameters())
    fused = fused.to(first.device)
    if first.dim() == 4 and first.is_contiguous(memory_format=torch.channels_last):
        fused = fused.to(memory_format=torch.channels_last)
    try:
        fused.load_state_dict(stack_weights([net.state_dict() for net in nets]))
    except RuntimeError as err:  # a layer kept as it is held state of its own
        raise NotFusable(str(err).splitlines()[0]) from None
    flags = dict(nets[0].named_parameters())
    for name, parameter in fused.named_parameters():
        parameter.requires_grad_(flags[name].requires_grad)
    _check_probe(fused, nets, channels, image_size)
    return fused


@torch.no_grad()
def _check_probe(fused: nn.Module, nets: list, channels: int, image_size: int) -> None:
    """One forward in eval mode on two random images per member, compared with the members' own."""
    modes = [module.training for module in (*nets, fused)]
    for module in (*nets, fused):
        module.eval()
    generator = torch.Generator().manual_seed(0)
    device = next(fused.parameters()).device
    xs = [torch.randn(2, channels, image_size, image_size, generator=generator).to(device) for _ in nets]
    try:
        expected = torch.stack([net(x) for net, x in zip(nets, xs)], 1)
        got = member_logits(fused(torch.cat(xs, 1)), len(nets))
    except RuntimeError as err:
        raise NotFusable(f"the fused forward failed: {str(err).splitlines()[0]}") from None
    finally:
        for module, mode in zip((*nets, fused), modes):
            module.train(mode)
    scale = expected.abs().max().clamp(min=1e-6)
    if got.shape != expected.shape or (got - expected).abs().max() > PROBE_TOLERANCE * scale:
        raise NotFusable("the fused forward does not give the members' outputs (its forward mixes channels)")


def fused_forward_loss(state, batches: list) -> tuple:
    """The fused step's forward (inside the caller's autocast): the members' batches side by side along the
    channels -> (the loss to step on: the sum of the members' mean losses, [each member's mean loss],
    [each member's correct count])."""
    members = len(batches)
    memory_format = torch.channels_last if state.recipe.channels_last else torch.contiguous_format
    x = torch.cat([x for x, _ in batches], 1).contiguous(memory_format=memory_format)
    y = torch.stack([y for _, y in batches], 1)  # [B, K]
    logits = member_logits(state.model(x), members)  # [B, K, classes]
    per_image = nn.functional.cross_entropy(logits.float().transpose(1, 2), y, reduction="none",
                                            label_smoothing=state.loss_fn.label_smoothing)  # [B, K]
    losses = per_image.mean(0)
    correct = (logits.argmax(2) == y).sum(0)
    return losses.sum(), list(losses.unbind()), list(correct.unbind())
