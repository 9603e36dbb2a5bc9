"""The SmoothGrad family: SG (mean), SG-SQ (mean of squares) and VAR (variance) of a base estimator's
maps over n noisy copies of each image, sigma_b = noise_level * (max(x_b) - min(x_b)).

One set of noisy samples yields all three statistics of a base. Image b's sample s is drawn by ops.noise
(Philox, counter-based) keyed by (the seed, the family's stream, b's index in its split) with counter s
(roarfast.methods.draws), so it is the same whatever batch or chunk b is computed in and however the samples
are split. The maps of a chunk of samples x images go through one forward/backward, and ops.ensemble_*
folds them one sample at a time, in sample order, into running fp32 moments: the fold's rounding then does
not depend on how many samples a chunk holds (which the batch's size sets) either.
"""

import torch

from roarfast import ops
from roarfast.methods.draws import image_seeds, stream_of
from roarfast.methods.gradients import input_attribution, rows_per_input


def noise_stream(base: str) -> int:
    """The stream of the noise of `base`'s family (sg-, sg-sq-, var-<base> share it: one set of samples)."""
    return stream_of(f"smoothgrad:{base}")


def noisy_samples(batch, params, base: str, samples: int, offset: int = 0) -> torch.Tensor:
    """Samples offset .. offset+samples-1 of every image of `batch`, sample-major: Tensor[samples*B, C, H, W]
    (row s*B + b: image b's sample offset+s)."""
    return ops.noise_per_image(batch.x, samples, params.noise_level, image_seeds(batch, params, noise_stream(base)),
                               offset=offset)


def smoothgrad_statistics(model, batch, target, params, base: str) -> tuple:
    """(SG, SG-SQ, VAR) of the `base` ("grad", "ig", "gb") maps over params.samples noisy copies of batch.x,
    each float32 Tensor[B, C, H, W].

    Samples are processed in chunks of s samples x B images (s*B rows, times ig_steps for IG) under
    params.max_chunk_elements; at least one sample of the whole batch per chunk.
    """
    x = batch.x
    n = params.samples
    per_sample = x.numel() * rows_per_input(base, params)
    chunk = max(1, min(n, params.max_chunk_elements // per_sample))
    state = ops.ensemble_init(x)
    for offset in range(0, n, chunk):
        samples = min(chunk, n - offset)
        noisy = noisy_samples(batch, params, base, samples, offset)
        maps = input_attribution(model, noisy, target.repeat(samples), params, base)
        for sample in maps.view(samples, *x.shape).split(1):
            state = ops.ensemble_update(state, sample)
    return tuple(ops.ensemble_finalize(state, reduction="none"))
