"""The views of a batch that training adds to roarfast.data.augment's random flips and shifts (airbench's):
alternating flips while training, each image flipped in every other epoch, and the test-time views averaged
when evaluating (recipe.tta)."""

import torch

#: pixels of the shifted test-time views (recipe.tta = 2): airbench's, the smallest shift that is not the image
TTA_SHIFT = 1


def alternate_flips(batches, flips: torch.Tensor | None, epoch: int):
    """(x, y) of `batches` ((x, y, rows) each), with alternating flips: rows flipped where `flips` says in odd
    epochs, the others in even epochs (None: no alternating flips)."""
    for x, y, rows in batches:
        if flips is not None:
            chosen = flips[rows] ^ (epoch % 2 == 0)
            last = x.is_contiguous(memory_format=torch.channels_last)
            x = torch.where(chosen.view(-1, 1, 1, 1), x.flip(3), x)
            x = x.contiguous(memory_format=torch.channels_last if last else torch.contiguous_format)
        yield x, y


def tta_logits(model, x: torch.Tensor, level: int, pad: str = "zero") -> torch.Tensor:
    """model's logits on x (Tensor[B, C, H, W]) averaged over test-time views: level 0 x alone; 1 x and its
    mirror image; 2 half of that plus a quarter each of the same on x shifted TTA_SHIFT pixels down-right and
    up-left, the border padded as the training shifts pad (`pad`: "zero", the dataset mean once normalized,
    or "reflect")."""
    if level == 0:
        return model(x)

    def mirrored(views):
        return 0.5 * model(views) + 0.5 * model(views.flip(3))

    out = mirrored(x)
    if level == 1:
        return out
    s = TTA_SHIFT
    padded = torch.nn.functional.pad(x, (s, s, s, s), mode="reflect" if pad == "reflect" else "constant")
    h, w = x.shape[2:]
    shifted = [padded[:, :, :h, :w], padded[:, :, 2 * s:2 * s + h, 2 * s:2 * s + w]]
    layout = torch.channels_last if x.is_contiguous(memory_format=torch.channels_last) else torch.contiguous_format
    return 0.5 * out + 0.25 * sum(mirrored(view.contiguous(memory_format=layout)) for view in shifted)
