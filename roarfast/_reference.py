"""Plain-PyTorch versions of the custom ops: the oracle for tests and the naive baseline for
benchmarks. Never a substitute for a kernel at run time.
"""

import numpy as np
import torch

from roarfast.ops import units_for_fraction


def reduce_channels(scores: torch.Tensor, reduction: str, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """[B,C,H,W] -> [B,H,W] by "sum_sq" | "abs_sum" | "max" (NaN propagates), in dtype."""
    s = scores.to(dtype)
    if reduction == "sum_sq":
        return (s * s).sum(1)
    if reduction == "abs_sum":
        return s.abs().sum(1)
    if reduction == "max":
        out = s.amax(1)
        return torch.where(s.isnan().any(1), torch.full_like(out, float("nan")), out)
    raise ValueError(f"unknown reduction {reduction!r}")


def rank(scores: torch.Tensor, reduction: str | None = None) -> torch.Tensor:
    """Same contract as roarfast.ops.rank, returned as int64: argsort + scatter."""
    if reduction is None:
        reduction = "sum_sq" if scores.dim() == 4 else "none"
    s = scores.float() if reduction in ("none", "value") else reduce_channels(scores, reduction)
    flat = s.flatten(1)
    nan = flat.isnan()
    # Two stable sorts: by descending score, then NaN last; ties keep the lower index first.
    order = torch.argsort(-flat.masked_fill(nan, 0.0), dim=1, stable=True)
    order = order.gather(1, torch.argsort(nan.gather(1, order).to(torch.uint8), dim=1, stable=True))
    ranks = torch.empty_like(order)
    ranks.scatter_(1, order, torch.arange(flat.shape[1], device=flat.device).expand_as(order))
    return ranks.view(s.shape)


def _replaced(ranks: torch.Tensor, k, keep: bool) -> torch.Tensor:
    """bool [B,1|C,H,W]: the units a mask replaces, for k an int, fraction or Tensor[B]."""
    units = ranks[0].numel()
    if isinstance(k, float):
        k = units_for_fraction(k, units)
    k = torch.as_tensor(k, dtype=torch.int64, device=ranks.device).expand(ranks.shape[0])
    r = ranks.long()
    r = r[:, None] if r.dim() == 3 else r
    kk = k.view(-1, 1, 1, 1)
    return r >= kk if keep else r < kk


def mask(images: torch.Tensor, ranks: torch.Tensor, k, fill, keep: bool = False) -> torch.Tensor:
    """Same contract as roarfast.ops.mask: torch.where over a broadcast rank comparison."""
    fill = torch.as_tensor(fill, dtype=torch.float32, device=images.device)
    fill = fill.round().clamp(0, 255).to(torch.uint8) if images.dtype == torch.uint8 else fill.to(images.dtype)
    return torch.where(_replaced(ranks, k, keep), fill.view(1, -1, 1, 1), images)


def mask_normalize(images: torch.Tensor, ranks, k=None, fill=None, keep: bool = False, *, mean, std,
                   out_dtype: torch.dtype = torch.float32, channels_last: bool = False) -> torch.Tensor:
    """Same contract as roarfast.ops.mask_normalize: normalize in float32, then torch.where."""
    mean = torch.as_tensor(mean, dtype=torch.float32, device=images.device).view(1, -1, 1, 1)
    std = torch.as_tensor(std, dtype=torch.float32, device=images.device).view(1, -1, 1, 1)
    x = (images.float() / 255.0 - mean) / std
    if ranks is not None:
        fill = torch.as_tensor(fill, dtype=torch.float32, device=images.device).view(1, -1, 1, 1)
        x = torch.where(_replaced(ranks, k, keep), fill, x)
    x = x.to(out_dtype)
    return x.contiguous(memory_format=torch.channels_last if channels_last else torch.contiguous_format)


def mask_scores(images: torch.Tensor, scores: torch.Tensor, k, fill, keep: bool = False, reduction=None):
    """Same contract as roarfast.ops.mask_scores: argsort ranks, then mask."""
    return mask(images, rank(scores, reduction), k, fill, keep)


_MASK32 = 0xFFFFFFFF
_PHILOX_M = (0xD2511F53, 0xCD9E8D57)
_PHILOX_W = (0x9E3779B9, 0xBB67AE85)


def _mulhilo32(a: int, b: torch.Tensor):
    """(hi, lo) 32-bit halves of a * b for a 32-bit constant and int64 b < 2**32, without int64 overflow."""
    p_hi, p_lo = (a >> 16) * b, (a & 0xFFFF) * b
    return (p_hi + (p_lo >> 16)) >> 16, (((p_hi & 0xFFFF) << 16) + p_lo) & _MASK32


def philox4x32_10(counter, key):
    """Philox4x32-10 on int64 tensors holding uint32 words: counter (4 tensors), key (2 ints) -> 4 tensors."""
    c0, c1, c2, c3 = counter
    k0, k1 = key
    for r in range(10):
        if r:
            k0, k1 = (k0 + _PHILOX_W[0]) & _MASK32, (k1 + _PHILOX_W[1]) & _MASK32
        hi0, lo0 = _mulhilo32(_PHILOX_M[0], c0)
        hi1, lo1 = _mulhilo32(_PHILOX_M[1], c2)
        c0, c1, c2, c3 = hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0
    return c0, c1, c2, c3


def _box_muller(a: torch.Tensor, b: torch.Tensor):
    radius = torch.sqrt(-2.0 * torch.log(((a >> 8) + 1).float() * 2.0**-24))
    angle = 6.28318530717958647692 * ((b >> 8).float() * 2.0**-24)
    return radius * torch.cos(angle), radius * torch.sin(angle)


def noise_normals(batch: int, image_elems: int, n: int, seed: int, offset: int = 0) -> torch.Tensor:
    """The z of roarfast.ops.noise as float32 [n, batch, image_elems]."""
    groups = (image_elems + 3) // 4
    s = torch.arange(offset, offset + n, dtype=torch.int64).view(-1, 1, 1)
    b = torch.arange(batch, dtype=torch.int64).view(1, -1, 1)
    g = torch.arange(groups, dtype=torch.int64).view(1, 1, -1)
    shape = (n, batch, groups)
    counter = (g.expand(shape), b.expand(shape), (s & _MASK32).expand(shape), (s >> 32).expand(shape))
    seed &= 2**64 - 1
    w = philox4x32_10(counter, (seed & _MASK32, seed >> 32))
    z = torch.stack([*_box_muller(w[0], w[1]), *_box_muller(w[2], w[3])], dim=-1)
    return z.view(n, batch, groups * 4)[..., :image_elems]


def noise_sigma(x: torch.Tensor, noise_level: float) -> torch.Tensor:
    """float32 [B]: noise_level * (max - min) of each image."""
    flat = x.flatten(1)
    return (flat.amax(1).float() - flat.amin(1).float()) * noise_level


def noise(x: torch.Tensor, n: int, noise_level: float, seed: int, offset: int = 0) -> torch.Tensor:
    """Same contract as roarfast.ops.noise: Philox in int64 tensor arithmetic, then x + sigma * z."""
    b = x.shape[0]
    z = noise_normals(b, x[0].numel(), n, seed, offset).to(x.device)
    out = x.float().flatten(1)[None] + noise_sigma(x, noise_level).view(1, -1, 1) * z
    return out.to(x.dtype).view(n * b, *x.shape[1:])


def noise_naive(x: torch.Tensor, n: int, noise_level: float, generator=None) -> torch.Tensor:
    """The usual SmoothGrad noise (randn + mul + add over repeated copies): the benchmark baseline."""
    sigma = noise_sigma(x, noise_level).to(x.dtype).view(1, -1, 1, 1, 1)
    reps = x.unsqueeze(0).repeat(n, 1, 1, 1, 1)
    z = torch.randn(reps.shape, generator=generator, device=x.device, dtype=x.dtype)
    return (reps + sigma * z).view(n * x.shape[0], *x.shape[1:])


def ensemble(grads: torch.Tensor, reduction: str = "none", dtype: torch.dtype = torch.float64):
    """Same maps as roarfast.ops.ensemble_finalize after updating with all of grads (Tensor[n,B,C,H,W]),
    by stack-style mean and var in `dtype`: (sg, sg_sq, var), reduced per pixel unless "none"."""
    g = grads.to(dtype)
    sg, sg_sq, var = g.mean(0), (g * g).mean(0), g.var(0, unbiased=False)
    if reduction == "none":
        return sg, sg_sq, var
    return tuple(reduce_channels(m, reduction, dtype) for m in (sg, sg_sq, var))


#: ROAD's 8 neighbours (dy, dx, weight): 1/6 for the edge neighbours, 1/12 for the diagonal ones.
IMPUTE_NEIGHBOURS = tuple((dy, dx, 1 / 6 if dy == 0 or dx == 0 else 1 / 12)
                          for dy in (-1, 0, 1) for dx in (-1, 0, 1) if (dy, dx) != (0, 0))


def impute(images: torch.Tensor, removed: torch.Tensor) -> torch.Tensor:
    """Same contract as roarfast.ops.impute with noise 0, the ROAD reference way: per image, the
    sparse system of its removed pixels assembled with numpy and solved by scipy's direct solver
    (all channels as right-hand sides), in float64. Regions with no kept neighbour take the
    channel mean of the kept pixels (0 when none). Returns float64 [B,C,H,W] on the CPU."""
    from scipy import ndimage, sparse
    from scipy.sparse import linalg

    x = images.detach().cpu().double().numpy().copy()
    rem_all = removed.detach().cpu().numpy()
    _, channels, height, width = x.shape
    ring = np.ones((3, 3), dtype=bool)
    for b in range(x.shape[0]):
        rem, known, img = rem_all[b], ~rem_all[b], x[b]
        labels, _ = ndimage.label(rem, structure=ring)
        touching = np.unique(labels[rem & ndimage.binary_dilation(known, structure=ring)])
        isolated = rem & ~np.isin(labels, touching)
        if isolated.any():
            img[:, isolated] = (img[:, known].mean(1) if known.any() else np.zeros(channels))[:, None]
        solve = rem & ~isolated
        m = int(solve.sum())
        if m == 0:
            continue
        index = np.full((height, width), -1)
        index[solve] = np.arange(m)
        ys, xs = np.nonzero(solve)
        diagonal, rhs = np.zeros(m), np.zeros((m, channels))
        rows, cols, vals = [np.arange(m)], [np.arange(m)], []
        for dy, dx, w in IMPUTE_NEIGHBOURS:
            y, xx = ys + dy, xs + dx
            inside = np.nonzero((y >= 0) & (y < height) & (xx >= 0) & (xx < width))[0]
            y, xx = y[inside], xx[inside]
            diagonal[inside] += w
            neighbour = index[y, xx]
            unknown = neighbour >= 0
            rows.append(inside[unknown])
            cols.append(neighbour[unknown])
            vals.append(np.full(int(unknown.sum()), -w))
            rhs[inside[~unknown]] += w * img[:, y[~unknown], xx[~unknown]].T
        a = sparse.csc_matrix((np.concatenate([diagonal, *vals]), (np.concatenate(rows), np.concatenate(cols))),
                              shape=(m, m))
        img[:, ys, xs] = np.asarray(linalg.spsolve(a, rhs)).reshape(m, channels).T
    return torch.from_numpy(x)


#: the fourth Philox counter word of impute's noise ("ROAD"), as in csrc/ops/impute_math.h.
IMPUTE_NOISE_TAG = 0x524F4144


def impute_noise_normals(ids: torch.Tensor, image_elems: int, seed: int) -> torch.Tensor:
    """The z of roarfast.ops.impute's noise as float32 [B, image_elems]: counter (element group, id lo, id hi, tag)."""
    groups = (image_elems + 3) // 4
    g = torch.arange(groups, dtype=torch.int64).view(1, -1)
    i = ids.cpu().to(torch.int64).view(-1, 1)
    shape = (i.shape[0], groups)
    counter = (g.expand(shape), (i & _MASK32).expand(shape), ((i >> 32) & _MASK32).expand(shape),
               torch.full(shape, IMPUTE_NOISE_TAG, dtype=torch.int64))
    seed &= 2**64 - 1
    w = philox4x32_10(counter, (seed & _MASK32, seed >> 32))
    z = torch.stack([*_box_muller(w[0], w[1]), *_box_muller(w[2], w[3])], dim=-1)
    return z.view(i.shape[0], groups * 4)[:, :image_elems]
