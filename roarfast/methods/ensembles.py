"""The SmoothGrad family: SG (mean), SG-SQ (mean of squares) and VAR (variance) of a base estimator's
maps over n noisy copies of each image, sigma_b = noise_level * (max(x_b) - min(x_b)).

One set of noisy samples yields all three statistics of a base: noise comes from ops.noise
(counter-based, so chunks of samples draw exactly what one call would), the maps of a chunk of
samples x images go through one forward/backward, and ops.ensemble_* folds them into running
fp32 moments (Chan's merge) without keeping all n maps.
"""

from roarfast import ops
from roarfast.methods.gradients import input_attribution, rows_per_input
from roarfast.methods.params import batch_seed

#: separates the noise stream from other per-batch randomness keyed by the same seed.
NOISE_STREAM = 1


def noise_seed(batch, params) -> int:
    """The ops.noise seed of a batch (params.batch_seed of the noise stream)."""
    return batch_seed(batch, params, NOISE_STREAM)


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
    seed = noise_seed(batch, params)
    state = ops.ensemble_init(x)
    for offset in range(0, n, chunk):
        samples = min(chunk, n - offset)
        noisy = ops.noise(x, samples, params.noise_level, seed, offset=offset)
        maps = input_attribution(model, noisy, target.repeat(samples), params, base)
        state = ops.ensemble_update(state, maps.view(samples, *x.shape))
    return tuple(ops.ensemble_finalize(state, reduction="none"))
