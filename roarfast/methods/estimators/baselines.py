"""Estimators that do not look at the model: random, sobel, oracle."""

from roarfast.errors import UserError
from roarfast.methods.declaration import register

#: random's stream (roarfast.methods.draws): a number, not stream_of("random"), since its scores have been
#: keyed per image by it from the start, and its stores keep their bytes and their ids
RANDOM_STREAM = 2
#: Sobel derivative along width (x); its transpose differentiates along height.
SOBEL_X = ((-1.0, 0.0, 1.0), (-2.0, 0.0, 2.0), (-1.0, 0.0, 1.0))


@register("random", "fixed uniform random scores per image (the reference of every verdict)", uses_model=False,
          seeded=True, keying=None, target_mode="none", order=3)
def random(model, batch, target, params):
    """Fixed uniform random scores per image -> float32 Tensor[B, C, H, W]: image i's scores come from a
    generator seeded by (the seed, random's stream, i's index in its split), so they do not depend on the
    batching."""
    # late: loads torch, and the --method listing imports this module
    import torch

    from roarfast.methods.draws import image_seeds

    shape = batch.x.shape[1:]
    scores = torch.empty((batch.x.shape[0], *shape), dtype=torch.float32)
    generator = torch.Generator()
    for row, seed in enumerate(image_seeds(batch, params, RANDOM_STREAM)):
        generator.manual_seed(seed)
        torch.rand(shape, generator=generator, out=scores[row])
    return scores.to(batch.x.device)


@register("sobel", "Sobel edge magnitude of the image, summed over channels", uses_model=False, target_mode="none",
          order=3)
def sobel(model, batch, target, params):
    """Per-channel Sobel magnitude sqrt(Gx^2 + Gy^2) of the (normalized) input, summed over channels ->
    float32 Tensor[B, 1, H, W]. Borders are replicated so that the image edge is not an edge."""
    # late: loads torch, and the --method listing imports this module
    import torch
    import torch.nn.functional as F

    x = batch.x.float()
    channels = x.shape[1]
    sobel_x = torch.tensor(SOBEL_X)
    kernel = torch.stack([sobel_x, sobel_x.t()]).to(x.device)
    weight = kernel.repeat(channels, 1, 1).unsqueeze(1)  # [2C, 1, 3, 3]: (gx, gy) per channel
    grads = F.conv2d(F.pad(x, (1, 1, 1, 1), mode="replicate"), weight, groups=channels)
    gx, gy = grads[:, 0::2], grads[:, 1::2]
    return torch.sqrt(gx * gx + gy * gy).sum(1, keepdim=True)


@register("oracle", "the dataset's ground-truth importance mask", uses_model=False, target_mode="none",
          ground_truth=True, order=3)
def oracle(model, batch, target, params):
    """The ground-truth importance mask as float32 Tensor[B, 1, H, W] (1 = important)."""
    # late: loads torch, and the --method listing imports this module
    import torch

    if batch.gt_mask is None:
        raise UserError("oracle needs ground-truth importance masks (batch.gt_mask), and this dataset has none; "
                        "the embedded dataset has them")
    return batch.gt_mask.to(device=batch.x.device, dtype=torch.float32).unsqueeze(1)
