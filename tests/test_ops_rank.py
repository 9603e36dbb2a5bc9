"""roarfast::rank: against the argsort reference, hand-worked orderings (ties, NaN, signed zeros),
the rank dtype, opcheck on every sample, torch.compile, CUDA vs CPU, bad-argument messages."""

import pytest
import torch

from roarfast import _reference as ref
from roarfast import ops

DTYPES = [torch.float32, torch.float16, torch.bfloat16]


def with_ties_and_nan(scores):
    """Rounds scores so that many tie, and puts NaN, infinities and signed zeros in."""
    s = (scores * 2).round() / 2
    flat = s.view(-1)
    flat[:: 7] = float("nan")
    flat[3:: 11] = float("inf")
    flat[5:: 13] = -float("inf")
    flat[1:: 17] = -0.0
    flat[2:: 19] = 0.0
    return s


def layout(t, kind):
    if kind == "channels_last" and t.dim() == 4:
        return t.contiguous(memory_format=torch.channels_last)
    if kind == "strided":
        return torch.cat([t, t], dim=-1)[..., ::2]
    return t


# (shape, reduction, content, layout)
CASES = [
    ((3, 5, 7), None, "random", "contiguous"),
    ((3, 5, 7), None, "ties_nan", "strided"),
    ((2, 4, 6), None, "all_equal", "contiguous"),
    ((2, 3, 4, 5), "sum_sq", "random", "channels_last"),
    ((2, 3, 4, 5), "abs_sum", "ties_nan", "contiguous"),
    ((2, 3, 4, 5), "max", "ties_nan", "strided"),
    ((2, 3, 4, 5), "value", "ties_nan", "channels_last"),
    ((1, 1, 1), None, "random", "contiguous"),  # one pixel, B=1
    ((1, 3, 1, 1), "value", "all_equal", "contiguous"),
    ((2, 70, 70), None, "ties_nan", "contiguous"),  # more units than one CUDA block sorts
]


def rank_samples(device="cpu"):
    g = torch.Generator().manual_seed(0)
    samples = []
    for i, (shape, reduction, content, kind) in enumerate(CASES):
        s = torch.randn(shape, generator=g)
        if content == "ties_nan":
            s = with_ties_and_nan(s)
        elif content == "all_equal":
            s = torch.full(shape, 0.25)
        dtype = DTYPES[i % len(DTYPES)]
        samples.append((layout(s.to(dtype), kind).to(device), reduction))
    return samples


def sample_id(sample):
    return f"{tuple(sample[0].shape)}-{sample[0].dtype}-{sample[1]}"


def op_args(sample):
    scores, reduction = sample
    return scores, reduction if reduction else ("sum_sq" if scores.dim() == 4 else "none")


@pytest.mark.parametrize("sample", rank_samples(), ids=sample_id)
def test_rank_matches_reference(sample):
    ranks = ops.rank(*sample)
    want = ref.rank(*sample)
    assert ranks.dtype == torch.uint16 and ranks.shape == want.shape
    assert torch.equal(ranks.long(), want)
    units = ranks[0].numel()
    assert torch.equal(ranks.long().flatten(1).sort(1).values, torch.arange(units).expand(ranks.shape[0], units))


def test_rank_hand_worked_order():
    scores = torch.tensor([[[3.0, 1.0, 2.0, float("nan"), 2.0, -float("inf")]]])
    assert ops.rank(scores).tolist() == [[[0, 3, 1, 5, 2, 4]]]


def test_rank_ties_go_to_lower_index_and_zeros_tie():
    scores = torch.tensor([[[0.0, -0.0, 0.0, 1.0, -0.0]]])
    assert ops.rank(scores).tolist() == [[[1, 2, 3, 0, 4]]]
    assert ops.rank(torch.full((1, 2, 3), 7.0)).flatten().tolist() == [0, 1, 2, 3, 4, 5]


def test_rank_channel_reductions():
    # Pixel 0 = (3, -4): sum_sq 25, abs_sum 7, max 3; pixel 1 = (-5, 1): 26, 6, 1; pixel 2 = (2, 2): 8, 4, 2.
    scores = torch.tensor([[3.0, -5.0, 2.0], [-4.0, 1.0, 2.0]]).view(1, 2, 1, 3)
    assert ops.rank(scores, "sum_sq").flatten().tolist() == [1, 0, 2]
    assert ops.rank(scores, "abs_sum").flatten().tolist() == [0, 1, 2]
    assert ops.rank(scores, "max").flatten().tolist() == [0, 2, 1]
    assert ops.rank(scores, "value").flatten().tolist() == [0, 5, 1, 4, 3, 2]


def test_rank_dtype_widens_past_65536_units():
    scores = torch.randn(1, 257, 256)
    ranks = ops.rank(scores)
    assert ranks.dtype == torch.int32
    assert torch.equal(ranks.long(), ref.rank(scores))
    assert ops.rank_dtype(65536) == torch.uint16 and ops.rank_dtype(65537) == torch.int32


@pytest.mark.parametrize("sample", rank_samples(), ids=sample_id)
def test_rank_opcheck(sample):
    torch.library.opcheck(torch.ops.roarfast.rank.default, op_args(sample))


def test_rank_compiles_fullgraph():
    scores = torch.randn(2, 3, 5, 5)
    compiled = torch.compile(lambda s: ops.rank(s, "abs_sum"), fullgraph=True, backend="aot_eager")
    assert torch.equal(compiled(scores), ops.rank(scores, "abs_sum"))


@pytest.mark.cuda
@pytest.mark.parametrize("sample", rank_samples(), ids=sample_id)
def test_rank_cuda_matches_cpu(sample):
    cpu = ops.rank(*sample)
    cuda = ops.rank(sample[0].cuda(), sample[1])
    assert cuda.dtype == cpu.dtype and torch.equal(cuda.cpu(), cpu)
    torch.library.opcheck(torch.ops.roarfast.rank.default, op_args((sample[0].cuda(), sample[1])))


@pytest.mark.cuda
def test_rank_cuda_device_sort_path_matches_cpu():
    scores = with_ties_and_nan(torch.randn(3, 300, 300))
    assert torch.equal(ops.rank(scores.cuda()).cpu(), ops.rank(scores))


@pytest.mark.parametrize("args,message", [
    ((torch.zeros(4, 4), "none"), r"scores should be \[B,H,W\] or \[B,C,H,W\]"),
    ((torch.zeros(1, 4, 4, dtype=torch.int32), "none"), "scores should be float32"),
    ((torch.zeros(1, 4, 4), "sum_sq"), "reduction should be 'none' for"),
    ((torch.zeros(1, 2, 4, 4), "none"), "reduction should be sum_sq"),
    ((torch.zeros(1, 2, 4, 4), "l1"), "reduction should be one of"),
], ids=["dim", "dtype", "reduce-3d", "none-4d", "unknown"])
def test_rank_bad_arguments_name_the_argument(args, message):
    with pytest.raises(RuntimeError, match=message):
        torch.ops.roarfast.rank.default(*args)
