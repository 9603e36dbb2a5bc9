"""roarfast::ensemble_update / ensemble_finalize: chunked = single pass = float64 reference,
variance never negative, bf16 accuracy against plain PyTorch bf16, opcheck, compile, CUDA vs CPU,
and the messages of bad arguments."""

import pytest
import torch

from roarfast import _reference as ref
from roarfast import ops

REDUCTIONS = ["none", "sum_sq", "abs_sum", "max"]

# (shape [B,C,H,W], grads dtype, chunk sizes)
CASES = [
    ((2, 3, 5, 7), torch.float32, [15]),
    ((2, 3, 5, 7), torch.float32, [5, 10]),
    ((3, 3, 8, 8), torch.float16, [4, 4, 7]),
    ((3, 3, 8, 8), torch.bfloat16, [1, 14]),
    ((1, 1, 1, 1), torch.float32, [1, 1, 1]),  # one-pixel image, B=1, one sample a chunk
    ((2, 1, 4, 3), torch.float32, [0, 6]),  # an empty chunk changes nothing
]


def random_grads(shape, n, dtype, seed, scale=1.0, shift=0.0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn((n, *shape), generator=g) * scale + shift).to(dtype)


def run_chunks(grads, chunks):
    state = ops.ensemble_init(grads[0])
    start = 0
    for size in chunks:
        state = ops.ensemble_update(state, grads[start:start + size])
        start += size
    return state


def case_id(case):
    shape, dtype, chunks = case
    return f"{shape}-{dtype}-{chunks}"


@pytest.mark.parametrize("case", CASES, ids=case_id)
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_ensemble_matches_float64_reference(case, reduction):
    shape, dtype, chunks = case
    grads = random_grads(shape, sum(chunks), dtype, seed=len(chunks))
    state = run_chunks(grads, chunks)
    assert state.count == sum(chunks)
    got = ops.ensemble_finalize(state, reduction)
    want = ref.ensemble(grads, reduction)
    for name, g, w in zip(("sg", "sg_sq", "var"), got, want):
        assert g.dtype == torch.float32 and g.shape == w.shape, name
        torch.testing.assert_close(g.double(), w, rtol=1e-5, atol=1e-5, msg=name)


@pytest.mark.parametrize("chunks", [[3, 12], [5, 5, 5], [1] * 15])
def test_ensemble_chunked_equals_single_pass(chunks):
    grads = random_grads((2, 3, 6, 6), 15, torch.float32, seed=3, scale=2.0, shift=1.0)
    single = ops.ensemble_finalize(run_chunks(grads, [15]))
    chunked = ops.ensemble_finalize(run_chunks(grads, chunks))
    for s, c in zip(single, chunked):
        torch.testing.assert_close(c, s, rtol=1e-5, atol=1e-6)


def test_ensemble_variance_of_constant_gradients_is_exactly_zero():
    grads = torch.full((16, 2, 3, 4, 4), 1000.1)
    grads[:, 1] = -3.3e-4
    sg, sg_sq, var = ops.ensemble_finalize(run_chunks(grads, [3, 5, 8]))
    assert torch.equal(var, torch.zeros_like(var))
    torch.testing.assert_close(sg, grads[0])
    torch.testing.assert_close(sg_sq, grads[0] ** 2)


def test_ensemble_variance_stays_accurate_far_from_zero_mean():
    # Mean 100, spread 1e-2: float32 E[g^2] - E[g]^2 cancels to noise (or below zero); the merge does not.
    grads = random_grads((2, 3, 8, 8), 15, torch.float32, seed=5, scale=1e-2, shift=100.0)
    _, _, var = ops.ensemble_finalize(run_chunks(grads, [4, 11]))
    want = ref.ensemble(grads)[2]
    naive = (grads * grads).mean(0) - grads.mean(0) ** 2
    assert (var >= 0).all()
    torch.testing.assert_close(var.double(), want, rtol=1e-2, atol=0)
    assert (naive.double() - want).abs().max() > 100 * (var.double() - want).abs().max()


def test_ensemble_bf16_error_within_twice_plain_pytorch_bf16():
    grads = random_grads((4, 3, 16, 16), 15, torch.bfloat16, seed=7, scale=1.0, shift=0.5)
    want = ref.ensemble(grads)
    got = ops.ensemble_finalize(run_chunks(grads, [5, 10]))
    plain = ref.ensemble(grads, dtype=torch.bfloat16)
    for name, g, p, w in zip(("sg", "sg_sq", "var"), got, plain, want):
        ours = (g.double() - w).abs().max()
        torch_bf16 = (p.double() - w).abs().max()
        assert ours <= 2 * torch_bf16, f"{name}: {ours} > 2 * {torch_bf16}"


def update_samples():
    samples = []
    for shape, dtype, chunks in CASES:
        grads = random_grads(shape, chunks[-1], dtype, seed=1)
        mean, m2 = torch.randn(shape), torch.rand(shape)
        samples.append((mean, m2, 4, grads))
    return samples


@pytest.mark.parametrize("sample", update_samples(), ids=[case_id(c) for c in CASES])
def test_ensemble_update_opcheck(sample):
    torch.library.opcheck(torch.ops.roarfast.ensemble_update.default, sample)


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_ensemble_finalize_opcheck(reduction):
    for mean, m2, count, _ in update_samples():
        torch.library.opcheck(torch.ops.roarfast.ensemble_finalize.default, (mean, m2, count, reduction))


def test_ensemble_compiles_fullgraph():
    grads = random_grads((2, 3, 4, 4), 6, torch.float32, seed=2)

    def smoothgrad(grads):
        state = ops.ensemble_init(grads[0])
        state = ops.ensemble_update(state, grads[:2])
        state = ops.ensemble_update(state, grads[2:])
        return ops.ensemble_finalize(state, "sum_sq")

    compiled = torch.compile(smoothgrad, fullgraph=True, backend="aot_eager")
    for got, want in zip(compiled(grads), smoothgrad(grads)):
        torch.testing.assert_close(got, want, rtol=0, atol=0)


@pytest.mark.cuda
@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_ensemble_cuda_matches_cpu(case):
    shape, dtype, chunks = case
    grads = random_grads(shape, sum(chunks), dtype, seed=9)
    cpu_state, cuda_state = run_chunks(grads, chunks), run_chunks(grads.cuda(), chunks)
    for reduction in REDUCTIONS:
        for c, g in zip(ops.ensemble_finalize(cpu_state, reduction), ops.ensemble_finalize(cuda_state, reduction)):
            torch.testing.assert_close(g.cpu(), c, rtol=0, atol=0)  # the same uncontracted float32 math
    for mean, m2, count, grads in update_samples():
        torch.library.opcheck(torch.ops.roarfast.ensemble_update.default,
                              (mean.cuda(), m2.cuda(), count, grads.cuda()))


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_ensemble_cuda_large_non_contiguous_and_non_finite_match_cpu(dtype):
    # 15 samples of 8 x 3 x 224 x 224 (18 M values), read through a strided view, with NaN and +-Inf
    grads = random_grads((8, 3, 224, 448), 15, dtype, seed=12)[..., ::2]
    grads[3, 0, 0, 5, 5] = float("nan")
    grads[:, 1, 2, 7, 7] = float("inf")
    grads[4, 2, 1, 9, 9] = -float("inf")
    assert not grads.is_contiguous()
    cpu_state, cuda_state = run_chunks(grads, [6, 9]), run_chunks(grads.cuda(), [6, 9])
    for reduction in REDUCTIONS:
        for c, g in zip(ops.ensemble_finalize(cpu_state, reduction), ops.ensemble_finalize(cuda_state, reduction)):
            torch.testing.assert_close(g.cpu(), c, rtol=0, atol=0, equal_nan=True)
    assert cpu_state.mean[0, 0, 5, 5].isnan() and cpu_state.mean[1, 2, 7, 7].isnan()  # inf - inf in Welford


def good_update_args():
    return dict(mean=torch.zeros(2, 3, 4, 4), m2=torch.zeros(2, 3, 4, 4), count=0, grads=torch.zeros(5, 2, 3, 4, 4))


BAD_UPDATE_ARGS = [
    (dict(mean=torch.zeros(2, 3, 4, 4, dtype=torch.float64)), "mean should be float32"),
    (dict(mean=torch.zeros(2, 3, 16)), r"mean should be \[B,C,H,W\]"),
    (dict(m2=torch.zeros(2, 3, 4, 5)), "m2 should have the shape of mean"),
    (dict(m2=torch.zeros(2, 3, 4, 4, dtype=torch.float16)), "m2 should be float32"),
    (dict(mean=torch.zeros(2, 3, 4, 8)[..., ::2]), "mean should be contiguous"),
    (dict(count=-1), "count should be >= 0"),
    (dict(grads=torch.zeros(2, 3, 4, 4)), r"grads should be \[n,B,C,H,W\]"),
    (dict(grads=torch.zeros(5, 2, 3, 4, 5)), r"grads should be \[n,B,C,H,W\] with"),
    (dict(grads=torch.zeros(5, 2, 3, 4, 4, dtype=torch.int32)), "grads should be float32"),
]


@pytest.mark.parametrize("override,message", BAD_UPDATE_ARGS, ids=[m for _, m in BAD_UPDATE_ARGS])
def test_ensemble_update_bad_arguments_name_the_argument(override, message):
    with pytest.raises(RuntimeError, match=message):
        torch.ops.roarfast.ensemble_update.default(**{**good_update_args(), **override})


@pytest.mark.parametrize("count,reduction,message", [
    (0, "none", "count should be > 0"),
    (3, "value", "reduction should be none, sum_sq, abs_sum or max"),
    (3, "l2", "reduction should be one of"),
])
def test_ensemble_finalize_bad_arguments_name_the_argument(count, reduction, message):
    with pytest.raises(RuntimeError, match=message):
        torch.ops.roarfast.ensemble_finalize.default(torch.zeros(1, 3, 2, 2), torch.zeros(1, 3, 2, 2), count, reduction)


def test_ensemble_finalize_of_empty_state_is_an_error():
    with pytest.raises(ValueError, match="at least one sample"):
        ops.ensemble_finalize(ops.ensemble_init(torch.zeros(1, 1, 2, 2)))
