"""The keys of every random draw an estimator makes: a draw is keyed by (the run's seed, the estimator's stream,
the image's index in its split, the sample number), never by the batch or the chunk it was computed in, so a
rank store holds the same bytes for any --chunk-images, --batch-size, executor and worker count (on one device
kind and thread count).

- SmoothGrad's noise: ops.noise (Philox4x32-10, counter = element, sample) keyed by `image_seed` per image
  (roarfast.methods.ensembles);
- random's scores: a generator per image seeded by `image_seed` (roarfast.methods.estimators.baselines);
- an estimator from outside (a plug-in, a `captum:` class) that draws from torch's or numpy's global generators
  (captum:GradientShap draws numpy's): called once per image with them seeded by `image_seed`
  (`keyed_per_image`); one that draws nothing runs on the whole batch. Other generators (Python's `random`, a
  generator of its own) are the estimator's to seed.

roarfast.methods.declaration.KEYING names this scheme in a rank store's identity (Selection.ranks_identity's
`keying`); a SmoothGrad or outside estimator's store without it was made by the release before, whose draws were
keyed by each batch's first image.
"""

import hashlib
from collections.abc import Callable

import numpy as np
import torch

#: the streams (stream_of) of outside estimators seen drawing from torch's generators in this process: each of
#: their batches goes image by image at once, without a whole-batch try
_DRAWING: set[int] = set()


def derive_seed(*parts: int) -> int:
    """A 63-bit seed mixed from integers (SplitMix64 finalizer per part), so that neighbouring inputs
    (seed 0 image 1, seed 1 image 0) give unrelated streams."""
    mask = (1 << 64) - 1
    state = 0x9E3779B97F4A7C15
    for part in parts:
        z = (state ^ (int(part) & mask)) * 0xBF58476D1CE4E5B9 & mask
        z = (z ^ (z >> 27)) * 0x94D049BB133111EB & mask
        state = (z ^ (z >> 31)) + 0x9E3779B97F4A7C15 & mask
    return state >> 1


def stream_of(name: str) -> int:
    """The 64-bit stream of the estimator (or family) called `name`: estimators draw independently of each other."""
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "little")


def image_seed(seed: int, stream: int, index: int) -> int:
    """The seed of the draws of `stream` for the image at `index` of its split under the run's `seed`."""
    return derive_seed(seed, stream, index)


def image_seeds(batch, params, stream: int) -> list[int]:
    """image_seed of each image of an ExplainBatch (its seed: params.seed_for(batch)), in batch order."""
    seed = params.seed_for(batch)
    return [image_seed(seed, stream, index) for index in batch.index.tolist()]


def keyed_per_image(call: Callable, batch, params, stream: int) -> torch.Tensor:
    """call(rows) -> maps of batch.x[rows] (rows: a slice), with torch's and numpy's global random draws keyed
    per image: the whole batch is tried once with the generators seeded; if the call drew nothing from them
    (their states unchanged), that is the result, else each image is computed alone under its image_seed, and
    this process's later batches for `stream` go image by image at once. The generators are restored after."""
    x = batch.x
    devices = [x.device] if x.device.type == "cuda" else []
    numpy_state = np.random.get_state()
    try:
        with torch.random.fork_rng(devices=devices):
            if stream not in _DRAWING:
                _seed_all(image_seed(params.seed_for(batch), stream, -1))
                before = _states(devices)
                maps = call(slice(None))
                if _same(before, _states(devices)):
                    return maps
                _DRAWING.add(stream)
            pieces = []
            for row, seed in enumerate(image_seeds(batch, params, stream)):
                _seed_all(seed)
                pieces.append(call(slice(row, row + 1)))
    finally:
        np.random.set_state(numpy_state)
    return torch.cat(pieces)


def _seed_all(seed: int) -> None:
    torch.manual_seed(seed)
    np.random.seed(seed & 0xFFFFFFFF)  # numpy's legacy seed takes 32 bits


def _states(devices) -> list:
    """The states of torch's CPU generator, of each CUDA device's in `devices`, and of numpy's global one."""
    position = np.random.get_state()
    return [torch.random.get_rng_state(), *(torch.cuda.get_rng_state(device) for device in devices),
            torch.from_numpy(position[1].copy()), torch.tensor(position[2:4])]


def _same(a: list, b: list) -> bool:
    return all(torch.equal(x, y) for x, y in zip(a, b, strict=True))
