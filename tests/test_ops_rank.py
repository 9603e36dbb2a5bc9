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


SORTS = ["device", "segmented"]  # ROARFAST_RANK_SORT: the two sorts of images above 4096 units


def assert_rank_cuda_matches_cpu(scores, reduction=None):
    cpu = ops.rank(scores, reduction)
    cuda = ops.rank(scores.cuda(), reduction)
    assert cuda.dtype == cpu.dtype and cuda.shape == cpu.shape
    assert torch.equal(cuda.cpu(), cpu)
    return cpu


@pytest.mark.cuda
@pytest.mark.parametrize("sort", SORTS)
@pytest.mark.parametrize("units", [1025, 2048, 3072, 4096, 4097])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_rank_cuda_block_sort_sizes(units, dtype, sort, monkeypatch):
    # 1025 and 2048: 8 items per thread; 3072 (CIFAR value granularity) and 4096: 16; 4097: the large sort
    monkeypatch.setenv("ROARFAST_RANK_SORT", sort)
    g = torch.Generator().manual_seed(units)
    for content in (torch.randn(3, 1, units, generator=g), with_ties_and_nan(torch.randn(3, 1, units, generator=g))):
        cpu = assert_rank_cuda_matches_cpu(content.to(dtype))
        assert torch.equal(cpu.long(), ref.rank(content.to(dtype)))


@pytest.mark.cuda
@pytest.mark.parametrize("sort", SORTS)
def test_rank_cuda_cifar_value_granularity(sort, monkeypatch):
    monkeypatch.setenv("ROARFAST_RANK_SORT", sort)
    scores = torch.randn(64, 3, 32, 32, generator=torch.Generator().manual_seed(1))
    assert_rank_cuda_matches_cpu(scores, "value")


@pytest.mark.cuda
@pytest.mark.parametrize("sort", SORTS)
def test_rank_cuda_sum_sq_224_fp32(sort, monkeypatch):
    # the case the FMA contraction broke: identical float32 sums now, so identical ranks
    monkeypatch.setenv("ROARFAST_RANK_SORT", sort)
    scores = torch.randn(8, 3, 224, 224, generator=torch.Generator().manual_seed(2))
    assert torch.equal(ops.reduce_channels(scores.cuda(), "sum_sq").cpu(), ops.reduce_channels(scores, "sum_sq"))
    assert_rank_cuda_matches_cpu(scores, "sum_sq")


@pytest.mark.cuda
@pytest.mark.parametrize("sort", SORTS)
def test_rank_cuda_value_3x224x224(sort, monkeypatch):
    monkeypatch.setenv("ROARFAST_RANK_SORT", sort)
    scores = with_ties_and_nan(torch.randn(3, 3, 224, 224, generator=torch.Generator().manual_seed(3)))
    cpu = assert_rank_cuda_matches_cpu(scores, "value")
    assert cpu.dtype == torch.int32


@pytest.mark.cuda
@pytest.mark.parametrize("sort", SORTS)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_rank_cuda_half_precision_large_sort(dtype, sort, monkeypatch):
    monkeypatch.setenv("ROARFAST_RANK_SORT", sort)
    scores = with_ties_and_nan(torch.randn(3, 150, 150, generator=torch.Generator().manual_seed(4))).to(dtype)
    cpu = assert_rank_cuda_matches_cpu(scores)
    assert torch.equal(cpu.long(), ref.rank(scores))


@pytest.mark.cuda
@pytest.mark.parametrize("sort", SORTS)
def test_rank_cuda_uint16_boundary(sort, monkeypatch):
    monkeypatch.setenv("ROARFAST_RANK_SORT", sort)
    g = torch.Generator().manual_seed(5)
    at_limit = assert_rank_cuda_matches_cpu(torch.randn(2, 256, 256, generator=g))
    assert at_limit.dtype == torch.uint16 and int(at_limit.long().max()) == 65535
    past = assert_rank_cuda_matches_cpu(torch.randn(2, 1, 65537, generator=g))
    assert past.dtype == torch.int32 and int(past.max()) == 65536


@pytest.mark.cuda
@pytest.mark.parametrize("sort", SORTS)
@pytest.mark.parametrize("batch", [1, 2, 257, 300])
def test_rank_cuda_batch_sizes(batch, sort, monkeypatch):
    # B=1: no image bit in the device sort's keys; B >= 257: nine or more image bits
    monkeypatch.setenv("ROARFAST_RANK_SORT", sort)
    scores = torch.randn(batch, 65, 65, generator=torch.Generator().manual_seed(batch))
    assert_rank_cuda_matches_cpu(scores)
    assert_rank_cuda_matches_cpu(scores[:, :32, :32].contiguous())  # the block sort too


@pytest.mark.cuda
@pytest.mark.parametrize("sort", SORTS)
@pytest.mark.parametrize("side", [60, 250])
def test_rank_cuda_all_equal_all_nan_and_signed_zero_rows(side, sort, monkeypatch):
    # every row ties throughout: ranks follow the flat index (60x60 block sort, 250x250 large sort)
    monkeypatch.setenv("ROARFAST_RANK_SORT", sort)
    scores = torch.empty(3, side, side)
    scores[0] = 3.5
    scores[1] = float("nan")
    scores[2].view(-1)[0::2] = 0.0
    scores[2].view(-1)[1::2] = -0.0
    cpu = assert_rank_cuda_matches_cpu(scores)
    assert torch.equal(cpu.long().view(3, -1), torch.arange(side * side).expand(3, -1))


@pytest.mark.cuda
@pytest.mark.parametrize("sort", SORTS)
@pytest.mark.parametrize("side", [50, 100])
def test_rank_cuda_subnormal_scores(side, sort, monkeypatch):
    # distinct subnormals must keep their order (no flush to zero on either device)
    monkeypatch.setenv("ROARFAST_RANK_SORT", sort)
    scores = torch.randn(2, side, side, generator=torch.Generator().manual_seed(side)) * 1e-39
    assert (scores.abs() < torch.finfo(torch.float32).tiny).float().mean() > 0.5
    cpu = assert_rank_cuda_matches_cpu(scores)
    assert torch.equal(cpu.long(), ref.rank(scores))


@pytest.mark.cuda
def test_rank_cuda_unknown_sort_names_the_variable(monkeypatch):
    monkeypatch.setenv("ROARFAST_RANK_SORT", "bitonic")
    with pytest.raises(RuntimeError, match="ROARFAST_RANK_SORT should be device or segmented"):
        ops.rank(torch.randn(1, 100, 100, device="cuda"))
