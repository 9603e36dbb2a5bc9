"""roarfast.ops.impute (ROAD's noisy linear imputation): against scipy's sparse direct solve of the
same system, hand-worked stencils and single pixels, kept pixels bit for bit, the Philox noise
against the reference, the iteration cap, opcheck on every sample, torch.compile, CUDA vs CPU, bad
arguments."""

import pytest
import torch

from roarfast import _reference as ref
from roarfast import ops


def random_removed(shape, fraction, generator):
    return torch.rand(shape, generator=generator) < fraction


def border_removed(batch, height, width, generator):
    """A frame touching all four borders plus random interior pixels."""
    removed = random_removed((batch, height, width), 0.3, generator)
    removed[:, 0, :] = removed[:, -1, :] = removed[:, :, 0] = removed[:, :, -1] = True
    return removed


def strided(t):
    wide = torch.zeros(*t.shape[:-1], 2 * t.shape[-1], dtype=t.dtype)
    wide[..., ::2] = t
    return wide[..., ::2]


def impute_samples(device="cpu"):
    """(name, images, removed): random masks at 50/90/100%, borders, 1x1 images, single pixels."""
    g = torch.Generator().manual_seed(0)
    samples = [
        ("random50", torch.rand(3, 3, 8, 9, generator=g), random_removed((3, 8, 9), 0.5, g)),
        ("random90", torch.rand(2, 3, 10, 10, generator=g), random_removed((2, 10, 10), 0.9, g)),
        ("all", torch.rand(2, 2, 5, 6, generator=g), torch.ones(2, 5, 6, dtype=torch.bool)),
        ("none", torch.rand(2, 1, 4, 4, generator=g), torch.zeros(2, 4, 4, dtype=torch.bool)),
        ("borders", torch.randn(2, 3, 7, 8, generator=g), border_removed(2, 7, 8, g)),
        ("one_pixel_images", torch.rand(3, 2, 1, 1, generator=g), torch.tensor([True, False, True]).view(3, 1, 1)),
        ("single_removed", torch.rand(2, 3, 6, 6, generator=g), torch.zeros(2, 6, 6, dtype=torch.bool)),
        ("row_1xW", torch.rand(2, 1, 1, 9, generator=g), random_removed((2, 1, 9), 0.6, g)),
        ("strided", strided(torch.rand(2, 3, 6, 7, generator=g)), random_removed((2, 6, 7), 0.7, g)),
        ("float64", torch.rand(2, 3, 9, 8, generator=g, dtype=torch.float64), random_removed((2, 9, 8), 0.5, g)),
        ("float16", torch.rand(2, 3, 6, 6, generator=g).half(), random_removed((2, 6, 6), 0.5, g)),
        ("cifar32", torch.randn(2, 3, 32, 32, generator=g), random_removed((2, 32, 32), 0.9, g)),
    ]
    samples[6][2][0, 0, 0] = True  # a corner pixel alone
    samples[6][2][1, 3, 2] = True  # an interior pixel alone
    return [(name, images.to(device), removed.to(device)) for name, images, removed in samples]


SAMPLES = impute_samples()
IDS = [s[0] for s in SAMPLES]


def tolerance(dtype):
    return 2e-3 if dtype == torch.float16 else 1e-4


@pytest.mark.parametrize("sample", SAMPLES, ids=IDS)
def test_impute_matches_scipy_spsolve(sample):
    _, images, removed = sample
    out = ops.impute(images, removed)
    assert out.shape == images.shape and out.dtype == images.dtype and out.is_contiguous()
    assert torch.isfinite(out).all()
    torch.testing.assert_close(out.double(), ref.impute(images, removed), atol=tolerance(images.dtype), rtol=0)
    kept = ~removed.unsqueeze(1).expand_as(images)
    assert torch.equal(out[kept], images[kept])  # bit for bit


def test_impute_everything_removed_is_zero():
    images = torch.rand(2, 3, 4, 5) + 1.0
    assert torch.equal(ops.impute(images, torch.ones(2, 4, 5, dtype=torch.bool)), torch.zeros(2, 3, 4, 5))


def test_impute_one_pixel_is_its_neighbours_weighted_mean():
    images = torch.arange(9, dtype=torch.float32).view(1, 1, 3, 3) ** 2  # 0 1 4 / 9 16 25 / 36 49 64
    removed = torch.zeros(1, 3, 3, dtype=torch.bool)
    removed[0, 1, 1] = True
    edges, diagonals = 1 + 9 + 25 + 49, 0 + 4 + 36 + 64
    assert ops.impute(images, removed)[0, 0, 1, 1].item() == pytest.approx(edges / 6 + diagonals / 12, rel=1e-6)
    removed[0, 1, 1], removed[0, 0, 0] = False, True  # a corner: 2 edges, 1 diagonal, weights sum 5/12
    want = ((1 + 9) / 6 + 16 / 12) / (5 / 12)
    assert ops.impute(images, removed)[0, 0, 0, 0].item() == pytest.approx(want, rel=1e-6)


def test_impute_two_pixels_solve_jointly():
    # 1x3 row [a, ?, ?]: x1 = (a + x2) / 2 and x2 = x1 (only in-bounds edge neighbours), so both = a.
    images = torch.tensor([[[[3.0, -7.0, 11.0]]]])
    removed = torch.tensor([[[False, True, True]]])
    torch.testing.assert_close(ops.impute(images, removed), torch.full((1, 1, 1, 3), 3.0))


def test_impute_stencil_hand_worked():
    v = torch.zeros(1, 1, 3, 3)
    v[0, 0, 1, 1] = 1.0
    removed = torch.ones(1, 3, 3, dtype=torch.bool)
    out = torch.ops.roarfast.impute_stencil.default(v, removed)[0, 0]
    want = torch.tensor([[-1 / 12, -1 / 6, -1 / 12], [-1 / 6, 1.0, -1 / 6], [-1 / 12, -1 / 6, -1 / 12]])
    torch.testing.assert_close(out, want)
    removed[0, 0, 1] = False  # kept pixels get 0
    assert torch.ops.roarfast.impute_stencil.default(v, removed)[0, 0, 0, 1].item() == 0.0


def test_impute_noise_is_the_reference_philox_on_removed_pixels_only():
    g = torch.Generator().manual_seed(1)
    images, removed = torch.rand(3, 3, 5, 6, generator=g), random_removed((3, 5, 6), 0.5, g)
    ids = torch.tensor([7, 2**40 + 3, -5])
    delta = ops.impute(images, removed, noise=0.05, seed=2**63 + 9, ids=ids) - ops.impute(images, removed)
    z = ref.impute_noise_normals(ids, 3 * 5 * 6, 2**63 + 9).view(3, 3, 5, 6)
    rem = removed.unsqueeze(1).expand_as(images)
    torch.testing.assert_close(delta[rem], 0.05 * z[rem], atol=1e-6, rtol=1e-5)
    assert torch.equal(delta[~rem], torch.zeros_like(delta[~rem]))


def test_impute_noise_is_reproducible_per_seed_and_id():
    g = torch.Generator().manual_seed(2)
    images, removed = torch.rand(4, 3, 6, 6, generator=g), random_removed((4, 6, 6), 0.5, g)
    a = ops.impute(images, removed, noise=0.1, seed=3)
    assert torch.equal(a, ops.impute(images, removed, noise=0.1, seed=3))
    assert not torch.equal(a, ops.impute(images, removed, noise=0.1, seed=4))
    # The same image under the same id gets the same noise in another batch position.
    shuffled = ops.impute(images.flip(0), removed.flip(0), noise=0.1, seed=3, ids=torch.arange(4).flip(0))
    assert torch.equal(shuffled.flip(0), a)


@pytest.mark.parametrize("sample", SAMPLES, ids=IDS)
def test_impute_opcheck(sample):
    _, images, removed = sample
    v = images.float() if images.dtype == torch.float16 else images
    ids = torch.arange(images.shape[0], device=images.device)
    torch.library.opcheck(torch.ops.roarfast.impute_solve.default, (v, removed, ids, 50, 1e-6, 0.1, 5))
    torch.library.opcheck(torch.ops.roarfast.impute_stencil.default, (v, removed))


def test_impute_solve_stops_at_max_iterations():
    # One kept pixel in the centre: the solution is that value everywhere, and the start is it too (the
    # kept pixels' mean), so 0 iterations already solve it; a kept pair needs iterations.
    solve = torch.ops.roarfast.impute_solve.default
    images, removed, ids = torch.rand(1, 1, 5, 5), torch.ones(1, 5, 5, dtype=torch.bool), torch.zeros(1).long()
    removed[0, 2, 2] = False
    torch.testing.assert_close(solve(images, removed, ids, 0, 1e-6, 0.0, 0), images[:, :, 2:3, 2:3].expand_as(images))
    removed[0, 0, 0] = False
    start = solve(images, removed, ids, 0, 1e-6, 0.0, 0)
    mean = (images[0, 0, 2, 2] + images[0, 0, 0, 0]) / 2
    assert start[0, 0, 4, 4].item() == pytest.approx(mean.item())
    one = solve(images, removed, ids, 1, 1e-6, 0.0, 0)
    converged = solve(images, removed, ids, 100, 1e-6, 0.0, 0)
    assert not torch.allclose(one, start) and not torch.allclose(one, converged, atol=1e-4)
    torch.testing.assert_close(converged.double(), ref.impute(images, removed), atol=1e-4, rtol=0)


def test_impute_compiles_fullgraph():
    images, removed = torch.rand(2, 3, 6, 6), torch.rand(2, 6, 6) < 0.5
    stencil = torch.compile(lambda v, r: torch.ops.roarfast.impute_stencil.default(v, r) * 2, fullgraph=True,
                            backend="aot_eager")
    assert torch.equal(stencil(images, removed), torch.ops.roarfast.impute_stencil.default(images, removed) * 2)
    whole = torch.compile(lambda x, r: ops.impute(x, r, noise=0.01, seed=2), fullgraph=True, backend="aot_eager")
    torch.testing.assert_close(whole(images, removed), ops.impute(images, removed, noise=0.01, seed=2))


@pytest.mark.parametrize("removed,message", [
    (torch.zeros(2, 4, 4, dtype=torch.uint8), r"removed should be a bool Tensor\[B, H, W\]"),
    (torch.zeros(2, 4, 5, dtype=torch.bool), r"removed should be a bool Tensor\[B, H, W\] = \[2, 4, 4\]"),
    (torch.zeros(2, 1, 4, 4, dtype=torch.bool), r"removed should be a bool Tensor\[B, H, W\]"),
], ids=["dtype", "shape", "dim"])
def test_impute_bad_removed(removed, message):
    with pytest.raises(ValueError, match=message):
        ops.impute(torch.zeros(2, 3, 4, 4), removed)


def test_impute_bad_images_and_noise():
    with pytest.raises(ValueError, match=r"images should be a float Tensor\[B, C, H, W\]"):
        ops.impute(torch.zeros(3, 4, 4), torch.zeros(3, 4, 4, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"images should be a float Tensor"):
        ops.impute(torch.zeros(1, 3, 4, 4, dtype=torch.uint8), torch.zeros(1, 4, 4, dtype=torch.bool))
    with pytest.raises(ValueError, match="noise should be >= 0"):
        ops.impute(torch.zeros(1, 3, 4, 4), torch.zeros(1, 4, 4, dtype=torch.bool), noise=-0.1)


@pytest.mark.parametrize("args,message", [
    ((torch.zeros(1, 3, 4, 4, dtype=torch.float16), torch.zeros(1, 4, 4, dtype=torch.bool)), "v should be float32"),
    ((torch.zeros(1, 3, 4, 4), torch.zeros(1, 4, 3, dtype=torch.bool)), r"removed should be \[B,H,W\]"),
    ((torch.zeros(1, 3, 4, 4), torch.zeros(1, 4, 4)), "removed should be bool"),
], ids=["dtype", "shape", "mask_dtype"])
def test_impute_stencil_bad_arguments_name_the_argument(args, message):
    with pytest.raises(RuntimeError, match=message):
        torch.ops.roarfast.impute_stencil.default(*args)


@pytest.mark.parametrize("args,message", [
    ((torch.arange(2), -1, 1e-6, 0.0), "max_iterations should be >= 0"),
    ((torch.arange(2), 5, -1.0, 0.0), "rtol should be >= 0"),
    ((torch.arange(2), 5, 1e-6, -0.5), "noise should be >= 0"),
    ((torch.arange(3), 5, 1e-6, 0.0), r"ids should be \[B\] with B = 2"),
    ((torch.arange(2).int(), 5, 1e-6, 0.0), "ids should be int64"),
], ids=["max_iterations", "rtol", "noise", "ids_shape", "ids_dtype"])
def test_impute_solve_bad_arguments_name_the_argument(args, message):
    x, removed = torch.zeros(2, 1, 3, 3), torch.zeros(2, 3, 3, dtype=torch.bool)
    with pytest.raises(RuntimeError, match=message):
        torch.ops.roarfast.impute_solve.default(x, removed, *args, 0)


@pytest.mark.cuda
@pytest.mark.parametrize("sample", SAMPLES, ids=IDS)
def test_impute_cuda_matches_spsolve_and_cpu(sample):
    _, images, removed = sample
    out = ops.impute(images.cuda(), removed.cuda(), noise=0.02, seed=4)
    torch.testing.assert_close(out.cpu(), ops.impute(images, removed, noise=0.02, seed=4),
                               atol=tolerance(images.dtype), rtol=0)
    torch.testing.assert_close(ops.impute(images.cuda(), removed.cuda()).cpu().double(), ref.impute(images, removed),
                               atol=tolerance(images.dtype), rtol=0)
    v = images.float().cuda() if images.dtype == torch.float16 else images.cuda()
    ids = torch.arange(images.shape[0], device="cuda")
    torch.library.opcheck(torch.ops.roarfast.impute_solve.default, (v, removed.cuda(), ids, 50, 1e-6, 0.1, 5))
    torch.library.opcheck(torch.ops.roarfast.impute_stencil.default, (v, removed.cuda()))
