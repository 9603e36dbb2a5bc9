"""roarfast::reduce_channels: against the plain-PyTorch reference for every reduction and dtype, NaN
propagation, agreement with the reduction rank applies, opcheck, compile, bad arguments, CUDA vs CPU."""

import pytest
import torch

from roarfast import _reference as ref
from roarfast import ops
from tests.conftest import devices

REDUCTIONS = ["sum_sq", "abs_sum", "max"]


def samples(device="cpu"):
    g = torch.Generator().manual_seed(0)
    out = []
    for shape, dtype in [((2, 3, 5, 7), torch.float32), ((1, 1, 4, 4), torch.float16), ((3, 4, 2, 9), torch.bfloat16),
                         ((0, 3, 4, 4), torch.float32)]:
        out.append(torch.randn(shape, generator=g).to(dtype).to(device))
    return out


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("index", range(4))
def test_matches_reference(device, reduction, index):
    scores = samples(device)[index]
    out = ops.reduce_channels(scores, reduction)
    assert out.dtype == torch.float32 and out.shape == (scores.shape[0], *scores.shape[2:])
    torch.testing.assert_close(out.cpu(), ref.reduce_channels(scores.cpu(), reduction), rtol=1e-6, atol=1e-6)
    torch.library.opcheck(torch.ops.roarfast.reduce_channels.default, (scores, reduction))


def test_non_contiguous_and_nan():
    scores = torch.randn(2, 6, 4, 4)[:, ::2]  # every other channel: a strided view
    scores[0, 1, 2, 3] = float("nan")
    for reduction in REDUCTIONS:
        out = ops.reduce_channels(scores, reduction)
        torch.testing.assert_close(out, ref.reduce_channels(scores, reduction), equal_nan=True)
        assert out[0, 2, 3].isnan() and not out[1].isnan().any()


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_ranking_the_reduced_map_equals_ranking_the_channels(reduction):
    scores = torch.randn(3, 3, 8, 8)
    assert torch.equal(ops.rank(ops.reduce_channels(scores, reduction)), ops.rank(scores, reduction))


def test_compiles_fullgraph():
    scores = torch.randn(2, 3, 4, 4)
    compiled = torch.compile(lambda s: ops.reduce_channels(s, "abs_sum") + 1, fullgraph=True, backend="aot_eager")
    assert torch.equal(compiled(scores), ops.reduce_channels(scores, "abs_sum") + 1)


@pytest.mark.parametrize("args,message", [
    ((torch.zeros(3, 4, 4), "sum_sq"), r"scores should be \[B,C,H,W\]"),
    ((torch.zeros(1, 3, 4, 4, dtype=torch.int32), "sum_sq"), "scores should be float32, float16 or bfloat16"),
    ((torch.zeros(1, 3, 4, 4), "value"), "reduction should be sum_sq, abs_sum or max"),
    ((torch.zeros(1, 3, 4, 4), "mean"), "reduction should be one of"),
], ids=["dim", "dtype", "value", "unknown"])
def test_bad_arguments_name_the_argument(args, message):
    with pytest.raises(RuntimeError, match=message):
        torch.ops.roarfast.reduce_channels.default(*args)


def test_sum_sq_is_float32_in_channel_order_without_fused_multiply_add():
    # The numerics policy (csrc/ops/common.h): no a*b+c contracted into an FMA, so the CPU and the
    # CUDA kernel both give exactly ((x0*x0) + (x1*x1)) + (x2*x2), each op rounded to float32.
    x = torch.randn(4, 3, 64, 64, generator=torch.Generator().manual_seed(0))
    x0, x1, x2 = x.unbind(1)
    expected = ((x0 * x0) + (x1 * x1)) + (x2 * x2)
    out = ops.reduce_channels(x, "sum_sq")
    assert torch.equal(out.view(torch.int32), expected.view(torch.int32))
    # The data tells the two roundings apart: fma(x, x, acc) (x*x exact in float64) differs on some pixels.
    fused = x0 * x0
    for xc in (x1, x2):
        fused = (xc.double() * xc.double() + fused.double()).float()
    assert (fused != expected).sum() > 100


@pytest.mark.cuda
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
def test_cuda_nan_and_strided_match_cpu_bit_for_bit(reduction, dtype):
    scores = torch.randn(3, 8, 30, 30, generator=torch.Generator().manual_seed(4)).to(dtype)[:, ::2, :, 1::2]
    scores[0, 1, 2, 3] = float("nan")
    scores[2, :, 5, 5] = float("nan")
    assert not scores.is_contiguous()
    cpu = ops.reduce_channels(scores, reduction)
    cuda = ops.reduce_channels(scores.cuda(), reduction).cpu()
    assert torch.equal(cuda.isnan(), cpu.isnan()) and cpu[0, 2, 3].isnan()
    assert torch.equal(cuda.nan_to_num(7.0).view(torch.int32), cpu.nan_to_num(7.0).view(torch.int32))
