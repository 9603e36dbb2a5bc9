"""Training-time augmentation of a batch on its device: random translation (zero padding, which is the
dataset mean after normalization) and horizontal flips, as one index gather."""

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Augment:
    """flip: random horizontal flips (p = 1/2); translate: random shift of up to this many pixels per axis."""

    flip: bool = True
    translate: int = 2


def augment(x: torch.Tensor, spec: Augment, generator: torch.Generator) -> torch.Tensor:
    """Randomly shifted (zero padded) and flipped copy of x (Tensor[B, C, H, W]): one gather for both."""
    b, c, h, w = x.shape
    pad = spec.translate
    if pad:
        x = torch.nn.functional.pad(x, (pad, pad, pad, pad))
    rows = torch.arange(h, device=x.device).expand(b, h)
    cols = torch.arange(w, device=x.device).expand(b, w)
    if pad:
        rows = rows + torch.randint(0, 2 * pad + 1, (b, 1), generator=generator, device=x.device)
        cols = cols + torch.randint(0, 2 * pad + 1, (b, 1), generator=generator, device=x.device)
    if spec.flip:
        flipped = torch.rand(b, 1, generator=generator, device=x.device) < 0.5
        cols = torch.where(flipped, cols.flip(1), cols)
    source = (rows.unsqueeze(2) * (w + 2 * pad) + cols.unsqueeze(1)).view(b, 1, h * w).expand(b, c, h * w)
    return x.contiguous().flatten(2).gather(2, source).view(b, c, h, w)
