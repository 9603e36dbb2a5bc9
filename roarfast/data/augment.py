"""Training-time augmentation of a batch on its device: random translation (zero padding, which is the
dataset mean after normalization, or reflected borders) and horizontal flips, as one index gather."""

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Augment:
    """flip: random horizontal flips (p = 1/2); translate: random shift of up to this many pixels per axis;
    pad: what a shift brings in at the border, "zero" or "reflect" (roarfast.recipe.PADS)."""

    flip: bool = True
    translate: int = 2
    pad: str = "zero"


def augment(x: torch.Tensor, spec: Augment, generator: torch.Generator) -> torch.Tensor:
    """Randomly shifted (padded as spec.pad says) and flipped copy of x (Tensor[B, C, H, W]): one gather for both, done on
    the pixels as [B, H, W, C], so a channels_last batch (what training takes) is never copied to another
    layout and back; the result is channels_last."""
    b, c, h, w = x.shape
    pad = spec.translate
    pixels = x.permute(0, 2, 3, 1)  # a view of a channels_last batch
    if pad and spec.pad == "reflect":  # reflection pads the last two dimensions: H and W of the NCHW view
        pixels = torch.nn.functional.pad(x, (pad, pad, pad, pad), mode="reflect").permute(0, 2, 3, 1)
    elif pad:
        pixels = torch.nn.functional.pad(pixels, (0, 0, pad, pad, pad, pad))
    rows = torch.arange(h, device=x.device).expand(b, h)
    cols = torch.arange(w, device=x.device).expand(b, w)
    if pad:
        rows = rows + torch.randint(0, 2 * pad + 1, (b, 1), generator=generator, device=x.device)
        cols = cols + torch.randint(0, 2 * pad + 1, (b, 1), generator=generator, device=x.device)
    if spec.flip:
        flipped = torch.rand(b, 1, generator=generator, device=x.device) < 0.5
        cols = torch.where(flipped, cols.flip(1), cols)
    source = (rows.unsqueeze(2) * (w + 2 * pad) + cols.unsqueeze(1)).view(b, h * w, 1).expand(b, h * w, c)
    return pixels.contiguous().flatten(1, 2).gather(1, source).view(b, h, w, c).permute(0, 3, 1, 2)
