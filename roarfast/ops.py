"""The custom ops of roarfast._C, with shapes. Each has a CPU and a CUDA kernel (csrc/ops/) and a
fake implementation so that torch.compile can trace it. Plain-PyTorch versions of the same math,
for tests and benchmarks only, live in roarfast._reference.
"""

import functools
import math
import struct
from typing import NamedTuple

import torch

from roarfast import _extension
from roarfast.errors import UserError

_extension.load()

#: the channel reductions of a [B,C,H,W] map to one score per pixel (README, "Semantics");
#: "value" ranks every C*H*W value as a unit of its own.
CHANNEL_REDUCTIONS = ("sum_sq", "abs_sum", "max", "value")


def rank_dtype(units: int) -> torch.dtype:
    """dtype of the ranks of an image with `units` ranked units: uint16 when they fit, else int32."""
    return torch.uint16 if units <= 65536 else torch.int32


def rank_rows(ranks: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """ranks[index] for ranks of any rank dtype on any device (index: int64 Tensor[B] on ranks' device).

    torch's CUDA indexing has no uint16 kernel: uint16 rows are gathered as their int16 bits and viewed back.
    """
    if ranks.dtype == torch.uint16:
        return ranks.view(torch.int16)[index].view(torch.uint16)
    return ranks[index]


def ranks_as_int32(ranks: torch.Tensor) -> torch.Tensor:
    """ranks (uint16 or int32) as int32, bit-exact: uint16 tensors have few comparison or copy kernels on CUDA."""
    if ranks.dtype == torch.uint16:
        return ranks.view(torch.int16).to(torch.int32) & 0xFFFF
    return ranks.to(torch.int32)


def rank(scores: torch.Tensor, reduction: str | None = None) -> torch.Tensor:
    """Ranks the units of each image by descending score: rank 0 = most important.

    Ties go to the lower flat index first (TF top_k order); NaN ranks last.

    Args:
        scores (Tensor[B, H, W] or Tensor[B, C, H, W]): float32, float16 or bfloat16
            (float64 is ranked at float32 precision).
        reduction: for [B,C,H,W] scores, how channels fold into one pixel score: "sum_sq" (default),
            "abs_sum", "max"; or "value" to rank all C*H*W values. Must be None/"none" for [B,H,W].

    Returns:
        ranks (Tensor[B, H, W], or Tensor[B, C, H, W] for "value"): uint16 when a image has at most
        65536 units, else int32.
    """
    if reduction is None:
        reduction = "sum_sq" if scores.dim() == 4 else "none"
    if scores.dtype == torch.float64:
        scores = scores.float()
    return torch.ops.roarfast.rank.default(scores, reduction)


@torch.library.register_fake("roarfast::rank")
def _rank_fake(scores, reduction="none"):
    if reduction in ("none", "value"):
        shape = scores.shape
    else:
        shape = (scores.shape[0], scores.shape[-2], scores.shape[-1])
    units = 1
    for size in shape[1:]:
        units *= size
    return scores.new_empty(shape, dtype=rank_dtype(units))


def reduce_channels(scores: torch.Tensor, reduction: str = "sum_sq") -> torch.Tensor:
    """Folds the channels of each pixel into one score, as rank does before ranking pixels.

    Args:
        scores (Tensor[B, C, H, W]): float32, float16 or bfloat16 (float64 is reduced at float32 precision).
        reduction: "sum_sq", "abs_sum" or "max" (a NaN in any channel makes the pixel NaN).

    Returns:
        Tensor[B, H, W]: float32.
    """
    if scores.dtype == torch.float64:
        scores = scores.float()
    return torch.ops.roarfast.reduce_channels.default(scores, reduction)


@torch.library.register_fake("roarfast::reduce_channels")
def _reduce_channels_fake(scores, reduction):
    return scores.new_empty((scores.shape[0], scores.shape[2], scores.shape[3]), dtype=torch.float32)


def units_for_fraction(fraction: float, units: int) -> int:
    """k = floor(fraction * units), the number of units a fraction in [0, 1] removes (README, "Semantics")."""
    if isinstance(fraction, bool) or not 0.0 <= fraction <= 1.0:
        raise ValueError(f"fraction should be a number in [0, 1], got {fraction!r}")
    # Rounded to 6 decimals first so that 0.29 * 100 = 28.999999999999996 still removes 29 units.
    return min(units, math.floor(round(fraction * units, 6)))


def per_image_k(k, images: torch.Tensor, ranks: torch.Tensor) -> torch.Tensor:
    """k as the int64 Tensor[B] the kernels take, from an int (same for every image), a float
    fraction in [0, 1] (k = floor(fraction * units)) or a Tensor[B]; units = ranked units per image."""
    units = math.prod(ranks.shape[1:])
    if isinstance(k, torch.Tensor):
        return k
    if isinstance(k, float):
        k = units_for_fraction(k, units)
    elif isinstance(k, bool) or not isinstance(k, int):
        raise TypeError(f"k should be an int, a float fraction or an int64 Tensor[B], got {type(k).__name__}")
    if not 0 <= k <= units:
        raise ValueError(f"k should be in [0, {units}] (units per image), got {k}")
    return torch.full((images.shape[0],), k, dtype=torch.int64, device=images.device)


@functools.lru_cache(maxsize=64)
def _channel_tensor(bits: bytes, device: torch.device) -> torch.Tensor:
    """The float32 Tensor[C] of the float64 values packed in `bits`, on `device`, built once: a list
    given on every call (a fill, a mean) then costs no host-to-device copy after the first. Keyed by
    bits, not ==, so -0.0 and 0.0 stay apart. Callers never write to it."""
    values = struct.unpack(f"{len(bits) // 8}d", bits)
    return torch.tensor(values, dtype=torch.float32, device=device)


def per_channel(values, images: torch.Tensor, name: str) -> torch.Tensor:
    """A sequence or Tensor[C] as float32 Tensor[C] on the images' device. A tensor must already be
    there (no hidden copy per call); a sequence is converted once per device and reused."""
    channels = images.shape[1]
    if isinstance(values, torch.Tensor):
        if values.device != images.device:
            raise UserError(f"{name} should be on the images' device ({images.device}), got {values.device}")
        if values.shape != (channels,):
            raise UserError(f"{name} should be a Tensor[{channels}] (one value per channel), got shape "
                            f"{tuple(values.shape)}")
        return values.to(torch.float32)
    try:
        values = tuple(float(v) for v in values)
    except (TypeError, ValueError) as err:
        raise TypeError(f"{name} should be a sequence of numbers or a Tensor[C], got {values!r}") from err
    if len(values) != channels:
        raise UserError(f"{name} should have {channels} values (one per channel), got {len(values)}")
    if torch.compiler.is_compiling():  # traced: the tensor becomes a constant of the graph anyway
        return torch.tensor(values, dtype=torch.float32, device=images.device)
    return _channel_tensor(struct.pack(f"{len(values)}d", *values), images.device)


def mask(images: torch.Tensor, ranks: torch.Tensor, k, fill, keep: bool = False) -> torch.Tensor:
    """Replaces the ranked units of each image by a per-channel fill (ROAR), or all but them (KAR).

    Args:
        images (Tensor[B, C, H, W]): uint8, float32, float16 or bfloat16; contiguous or channels_last.
        ranks (Tensor[B, H, W] or Tensor[B, C, H, W]): uint16, int32 or int64 from `rank`; [B,H,W]
            masks all channels of a pixel together, [B,C,H,W] each value on its own.
        k: units to replace (ROAR) or keep (KAR) per image: an int, a float fraction in [0, 1]
            (k = floor(fraction * units)), or an int64 Tensor[B] on the images' device (range-checked
            on CPU only: checking a GPU tensor would stall the stream).
        fill (sequence or Tensor[C] on the images' device): the replacement in the images' own value
            space (uint8 images: rounded to nearest, saturated to [0, 255]); a sequence is copied to
            the device once and reused.
        keep: False (ROAR) replaces units with rank < k; True (KAR) replaces those with rank >= k.

    Returns:
        masked (Tensor[B, C, H, W]): a new tensor, dtype and memory format of images.
    """
    return torch.ops.roarfast.mask.default(images, ranks, per_image_k(k, images, ranks),
                                           per_channel(fill, images, "fill"), keep)


def mask_normalize(images: torch.Tensor, ranks: torch.Tensor | None, k=None, fill=None, keep: bool = False, *,
                   mean, std, out_dtype: torch.dtype = torch.float32, channels_last: bool = False) -> torch.Tensor:
    """mask fused with the uint8 -> float normalization a model's input needs, in one pass.

    Kept values become (x / 255 - mean[c]) / std[c]; replaced ones fill[c].

    Args:
        images (Tensor[B, C, H, W]): uint8, contiguous or channels_last.
        ranks (Tensor[B, H, W] or Tensor[B, C, H, W], or None): as for `mask`; None normalizes only.
        k, keep: as for `mask` (k unused when ranks is None).
        fill (sequence or Tensor[C]): replacement in the NORMALIZED space (0 = the dataset mean).
        mean, std (sequence or Tensor[C]): per channel, in [0, 1] pixel space (torchvision convention).
            Tensors must be on the images' device; sequences are copied there once and reused.
        out_dtype: float32, float16 or bfloat16.
        channels_last: memory format of the output.

    Returns:
        normalized (Tensor[B, C, H, W]): out_dtype, channels_last or contiguous.
    """
    if ranks is not None:
        if k is None or fill is None:
            raise ValueError("k and fill should be given when ranks are")
        k = per_image_k(k, images, ranks)
        fill = per_channel(fill, images, "fill")
    else:
        k = fill = None
    return torch.ops.roarfast.mask_normalize.default(
        images, ranks, k, fill, keep, per_channel(mean, images, "mean"), per_channel(std, images, "std"),
        out_dtype, channels_last)


def mask_scores(images: torch.Tensor, scores: torch.Tensor, k, fill, keep: bool = False,
                reduction: str | None = None) -> torch.Tensor:
    """rank(scores, reduction) then mask(images, ranks, k, fill, keep); see both for the arguments.

    scores (Tensor[B, H, W] or Tensor[B, C, H, W]) are ranked in pixel units, or value units for
    reduction="value". Returns Tensor[B, C, H, W] like images.
    """
    return mask(images, rank(scores, reduction), k, fill, keep)


def _memory_format(images):
    """The layout the mask kernels read (and mask writes): channels_last only when not also contiguous."""
    if images.is_contiguous(memory_format=torch.channels_last) and not images.is_contiguous():
        return torch.channels_last
    return torch.contiguous_format


@torch.library.register_fake("roarfast::mask")
def _mask_fake(images, ranks, k, fill, keep=False):
    return torch.empty_like(images, memory_format=_memory_format(images))


@torch.library.register_fake("roarfast::mask_normalize")
def _mask_normalize_fake(images, ranks, k, fill, keep, mean, std, out_dtype, channels_last):
    memory_format = torch.channels_last if channels_last else torch.contiguous_format
    return torch.empty_like(images, dtype=out_dtype, memory_format=memory_format)


def noise(x: torch.Tensor, n: int, noise_level: float, seed: int, offset: int = 0) -> torch.Tensor:
    """n noisy copies of every image for SmoothGrad: out[s*B + b] = x[b] + sigma_b * z.

    sigma_b = noise_level * (max(x[b]) - min(x[b])); z ~ N(0, 1) from Philox4x32-10 keyed by seed with
    counter (element, image b, sample s + offset), so the same seed gives the same noise, bit for bit,
    on CPU and CUDA (the same uncontracted float32 arithmetic on both), and drawing samples in chunks
    (offset = samples already drawn) gives the same samples as one call.

    Args:
        x (Tensor[B, C, H, W]): float32, float16 or bfloat16.
        n: samples per image (>= 0).
        noise_level: >= 0, relative to each image's value range.
        seed: any integer in [-2**63, 2**64).
        offset: index of the first sample (>= 0).

    Returns:
        noisy (Tensor[n*B, C, H, W]): sample-major, dtype of x, computed in float32.
    """
    return torch.ops.roarfast.noise.default(x, n, float(noise_level), _signed_key(seed, "seed"), offset)


def _signed_key(seed: int, name: str) -> int:
    """A noise key in [-2**63, 2**64) as the schema's signed int64: the key is its 64 bits."""
    if not -2**63 <= seed < 2**64:
        raise ValueError(f"{name} should be in [-2**63, 2**64), got {seed}")
    return seed - 2**64 if seed >= 2**63 else seed


def noise_per_image(x: torch.Tensor, n: int, noise_level: float, seeds, offset: int = 0) -> torch.Tensor:
    """noise with a key per image, in one call: image b's samples are exactly those of
    noise(x[b:b+1], n, noise_level, seeds[b], offset), so the noise of an image does not depend on the batch it
    is drawn in (SmoothGrad's draws are keyed per image: roarfast.methods.draws).

    Args:
        x (Tensor[B, C, H, W]): float32, float16 or bfloat16.
        seeds: B integers, each in [-2**63, 2**64) (a sequence, or an int64 Tensor[B] of their 64 bits).

    Returns:
        noisy (Tensor[n*B, C, H, W]): sample-major, as noise's.
    """
    if not isinstance(seeds, torch.Tensor):
        seeds = torch.tensor([_signed_key(s, "seeds") for s in seeds], dtype=torch.int64)
    return torch.ops.roarfast.noise.default(x, n, float(noise_level), 0, offset, seeds.to(x.device))


@torch.library.register_fake("roarfast::noise")
def _noise_fake(x, n, noise_level, seed, offset=0, seeds=None):
    return x.new_empty((n * x.shape[0], *x.shape[1:]))


class EnsembleState(NamedTuple):
    """Running moments of the noisy gradients of a batch, per value, in float32.

    mean (Tensor[B, C, H, W]): mean of the samples so far; m2 (Tensor[B, C, H, W]): sum of squared
    deviations from it; count: samples merged so far.
    """

    mean: torch.Tensor
    m2: torch.Tensor
    count: int


def ensemble_init(like: torch.Tensor) -> EnsembleState:
    """An empty state (zeros, count 0) for gradients shaped like `like` (Tensor[B, C, H, W])."""
    zeros = dict(dtype=torch.float32, device=like.device)
    return EnsembleState(torch.zeros(like.shape, **zeros), torch.zeros(like.shape, **zeros), 0)


def ensemble_update(state: EnsembleState, grads: torch.Tensor) -> EnsembleState:
    """Merges a chunk of n gradients per image into the state, in one pass (Welford within the
    chunk, Chan merge with the state, float32 whatever the grads dtype).

    Args:
        state: from ensemble_init or a previous update; its mean and m2 are UPDATED IN PLACE.
        grads (Tensor[n, B, C, H, W]): float32, float16 or bfloat16.

    Returns:
        the state with count + n (same mean and m2 tensors).
    """
    torch.ops.roarfast.ensemble_update.default(state.mean, state.m2, state.count, grads)
    return EnsembleState(state.mean, state.m2, state.count + grads.shape[0])


def ensemble_finalize(state: EnsembleState, reduction: str = "none"):
    """SmoothGrad's three maps from the moments of the samples g_i (README, "Semantics").

    Per value: sg = mean g, sg_sq = mean g^2, var = mean g^2 - (mean g)^2 (population, >= 0).

    Args:
        state: with count > 0.
        reduction: "none", or the channel reduction "sum_sq" | "abs_sum" | "max" of each map.

    Returns:
        (sg, sg_sq, var): float32, each Tensor[B, C, H, W] for "none", else Tensor[B, H, W].
    """
    if state.count <= 0:
        raise ValueError(f"state should hold at least one sample to finalize, got count {state.count}")
    return tuple(torch.ops.roarfast.ensemble_finalize.default(state.mean, state.m2, state.count, reduction))


@torch.library.register_fake("roarfast::ensemble_update")
def _ensemble_update_fake(mean, m2, count, grads):
    return None


@torch.library.register_fake("roarfast::ensemble_finalize")
def _ensemble_finalize_fake(mean, m2, count, reduction="none"):
    shape = mean.shape if reduction == "none" else (mean.shape[0], mean.shape[2], mean.shape[3])
    return tuple(mean.new_empty(shape) for _ in range(3))


#: impute's conjugate gradients stop once a plane's residual norm is below this fraction of its start.
IMPUTE_RTOL = 1e-6


def _impute_max_iterations(height: int, width: int) -> int:
    """A cap on the CG iterations: CG on a grid Laplacian needs O(H + W); the cap only bounds stagnation."""
    return 4 * (height + width) + 64


def _check_impute_args(images, removed):
    if not isinstance(images, torch.Tensor) or images.dim() != 4 or not images.is_floating_point():
        raise ValueError(f"images should be a float Tensor[B, C, H, W], got "
                         f"{tuple(images.shape) if isinstance(images, torch.Tensor) else type(images).__name__}")
    b, _, h, w = images.shape
    if not isinstance(removed, torch.Tensor) or removed.dtype != torch.bool or tuple(removed.shape) != (b, h, w):
        got = f"{removed.dtype} {tuple(removed.shape)}" if isinstance(removed, torch.Tensor) else type(removed).__name__
        raise ValueError(f"removed should be a bool Tensor[B, H, W] = [{b}, {h}, {w}] matching images, got {got}")
    if removed.device != images.device:
        raise ValueError(f"removed should be on the images' device ({images.device}), got {removed.device}")


def impute(images: torch.Tensor, removed: torch.Tensor, noise: float = 0.0, seed: int = 0,
           ids: torch.Tensor | None = None) -> torch.Tensor:
    """ROAD's noisy linear imputation of the removed pixels of a batch (Rong et al., ICML 2022; README, "Semantics").

    Every removed pixel becomes the weighted mean of its in-bounds 8 neighbours (1/6 edge, 1/12
    diagonal), all removed pixels of an image and channel solved jointly by conjugate gradients, then
    N(0, noise^2) added to them; every plane of the batch in one impute_solve kernel (the noise is
    Philox4x32-10 with counter (element, id, "ROAD"), CPU and CUDA alike).
    A removed region with no kept neighbour takes the channel mean of the image's kept pixels (0 when
    nothing is kept: the dataset mean after normalization).

    Args:
        images (Tensor[B, C, H, W]): float32, float64, float16 or bfloat16 (solved in float32, float64 in float64).
        removed (Tensor[B, H, W]): bool, True where a pixel (all its channels) is replaced.
        noise: absolute std of the Gaussian noise, in the images' units (>= 0).
        seed: the Philox key, any integer in [-2**63, 2**64).
        ids (Tensor[B] int64, optional): each image's noise counter (default 0..B-1); pass dataset
            indices so an image gets the same noise in whatever batch it comes.

    Returns:
        imputed (Tensor[B, C, H, W]): contiguous, images' dtype; kept pixels bit for bit as given.
    """
    _check_impute_args(images, removed)
    if not noise >= 0.0:
        raise ValueError(f"noise should be >= 0 (an absolute std), got {noise!r}")
    if not -2**63 <= seed < 2**64:
        raise ValueError(f"seed should be in [-2**63, 2**64), got {seed}")
    if ids is None:
        ids = torch.arange(images.shape[0], dtype=torch.int64, device=images.device)
    seed = seed - 2**64 if seed >= 2**63 else seed  # the schema's int is signed; the key is its 64 bits
    work = images if images.dtype in (torch.float32, torch.float64) else images.float()
    out = torch.ops.roarfast.impute_solve.default(work, removed, ids, _impute_max_iterations(*images.shape[2:]),
                                                  IMPUTE_RTOL, float(noise), seed)
    if work is images:
        return out
    return torch.where(removed.unsqueeze(1), out.to(images.dtype), images).contiguous()  # kept bits as given


@torch.library.register_fake("roarfast::impute_solve")
def _impute_solve_fake(images, removed, ids, max_iterations, rtol, noise, seed):
    return torch.empty_like(images, memory_format=torch.contiguous_format)


@torch.library.register_fake("roarfast::impute_stencil")
def _impute_stencil_fake(v, removed):
    return torch.empty_like(v, memory_format=torch.contiguous_format)
