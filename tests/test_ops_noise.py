"""roarfast::noise: Philox known answers, against the plain-PyTorch reference, determinism,
chunking invariance, the distribution of z, per-image sigma, opcheck, compile, CUDA vs CPU."""

import math
import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from roarfast import _reference as ref
from roarfast import ops

# Random123's published known-answer vectors for philox4x32-10: counter, key -> output.
PHILOX_KAT = [
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((0xFFFFFFFF,) * 4, (0xFFFFFFFF,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
     (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
]


@pytest.mark.parametrize("counter,key,expected", PHILOX_KAT)
def test_reference_philox_known_answers(counter, key, expected):
    out = ref.philox4x32_10([torch.tensor([c]) for c in counter], key)
    assert tuple(int(w) for w in out) == expected


def layout(x, kind):
    if kind == "channels_last":
        return x.contiguous(memory_format=torch.channels_last)
    if kind == "strided":
        return torch.cat([x, x], dim=-1)[..., ::2]
    return x


# (shape, dtype, n, noise_level, seed, offset, layout)
CASES = [
    ((2, 3, 5, 7), torch.float32, 3, 0.15, 0, 0, "contiguous"),  # 105 elements: last Philox block partial
    ((3, 3, 4, 4), torch.float16, 2, 0.3, 2**40 + 7, 5, "channels_last"),
    ((2, 1, 6, 6), torch.bfloat16, 4, 0.15, -12345, 2**33, "strided"),
    ((1, 3, 1, 1), torch.float32, 5, 1.0, 2**64 - 1, 0, "contiguous"),  # one-pixel image, B=1
    ((2, 3, 8, 8), torch.float32, 0, 0.15, 1, 0, "contiguous"),  # no samples
    ((2, 2, 3, 3), torch.float32, 2, 0.0, 9, 0, "contiguous"),  # zero noise: exact copies
]


def noise_samples(device="cpu"):
    g = torch.Generator().manual_seed(0)
    samples = []
    for shape, dtype, n, level, seed, offset, kind in CASES:
        x = layout((torch.randn(shape, generator=g) * 2 + 1).to(dtype), kind).to(device)
        samples.append((x, n, level, seed, offset))
    return samples


def op_args(sample):
    """The wrapper's arguments as the schema takes them: the seed as a signed 64-bit int."""
    x, n, level, seed, offset = sample
    return x, n, level, seed - 2**64 if seed >= 2**63 else seed, offset


def sample_id(sample):
    x, n, level, seed, offset = sample
    return f"{tuple(x.shape)}-{x.dtype}-n{n}-seed{seed}-off{offset}"


@pytest.mark.parametrize("sample", noise_samples(), ids=sample_id)
def test_noise_matches_reference(sample):
    x, n, level, seed, offset = sample
    out = ops.noise(*sample)
    assert out.shape == (n * x.shape[0], *x.shape[1:]) and out.dtype == x.dtype and out.is_contiguous()
    torch.testing.assert_close(out, ref.noise(*sample), rtol=1e-5, atol=1e-5)
    if level == 0.0:
        assert torch.equal(out, x.repeat(n, 1, 1, 1))


def test_noise_is_deterministic_and_seeded():
    x = torch.randn(2, 3, 8, 8)
    a, b = ops.noise(x, 3, 0.15, seed=7), ops.noise(x, 3, 0.15, seed=7)
    assert torch.equal(a, b)
    assert not torch.allclose(a, ops.noise(x, 3, 0.15, seed=8))


def test_noise_chunks_equal_one_call():
    x = torch.randn(3, 3, 5, 5)
    whole = ops.noise(x, 15, 0.15, seed=11)
    chunked = torch.cat([ops.noise(x, 5, 0.15, seed=11, offset=0), ops.noise(x, 10, 0.15, seed=11, offset=5)])
    assert torch.equal(whole, chunked)


def test_noise_images_and_samples_differ():
    x = torch.zeros(2, 1, 4, 4)
    x[:, 0, 0, 0] = 1.0
    out = ops.noise(x, 2, 1.0, seed=3).view(2, 2, 16)
    assert not torch.allclose(out[0, 0], out[0, 1])  # images of one sample
    assert not torch.allclose(out[0, 0], out[1, 0])  # samples of one image


def test_noise_normals_are_standard():
    # Every image spans [0, 1] so sigma = noise_level = 1 and out - x = z.
    x = torch.zeros(4, 1, 64, 64)
    x[:, 0, 0, 0] = 1.0
    z = (ops.noise(x, 64, 1.0, seed=2024) - x.repeat(64, 1, 1, 1)).flatten().double()
    count = z.numel()
    assert abs(z.mean().item()) < 5 / math.sqrt(count)
    assert abs(z.std().item() - 1.0) < 5 / math.sqrt(2 * count)
    within_one = (z.abs() < 1).double().mean().item()
    assert abs(within_one - 0.682689) < 5 * math.sqrt(0.2167 / count)
    neighbours = torch.corrcoef(torch.stack([z[:-1], z[1:]]))[0, 1].item()
    assert abs(neighbours) < 5 / math.sqrt(count)


def test_noise_sigma_is_per_image_range():
    x = torch.zeros(2, 1, 2, 2)
    x[0, 0, 0, 0], x[0, 0, 1, 1] = -1.0, 3.0  # range 4
    x[1, 0, 0, 1] = 0.5  # range 0.5
    n, level = 3, 0.15
    z = ref.noise_normals(2, 4, n, seed=5).view(n, 2, 1, 2, 2)
    delta = ops.noise(x, n, level, seed=5).view(n, 2, 1, 2, 2) - x
    torch.testing.assert_close(delta[:, 0], 0.6 * z[:, 0], rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(delta[:, 1], 0.075 * z[:, 1], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("sample", noise_samples(), ids=sample_id)
def test_noise_opcheck(sample):
    torch.library.opcheck(torch.ops.roarfast.noise.default, op_args(sample))


def test_noise_compiles_fullgraph():
    x = torch.randn(2, 3, 4, 4)
    compiled = torch.compile(lambda x: ops.noise(x, 3, 0.15, seed=1, offset=2) * 2, fullgraph=True,
                             backend="aot_eager")
    assert torch.equal(compiled(x), ops.noise(x, 3, 0.15, seed=1, offset=2) * 2)


def has_avx2() -> bool:
    if platform.machine() not in ("x86_64", "AMD64"):
        return False
    try:
        return " avx2" in Path("/proc/cpuinfo").read_text()
    except OSError:
        return False


# Shapes for the two CPU paths: 8-block AVX2 batches (32 elements) plus a block-by-block tail,
# the last Philox block partial (elements per image not divisible by 4).
PATH_SCRIPT = """
import sys, torch
from roarfast import ops
g = torch.Generator().manual_seed(1)
out = []
for shape, dtype in [((3, 3, 17, 19), torch.float32), ((2, 3, 32, 32), torch.float16), ((2, 1, 9, 11), torch.bfloat16)]:
    x = (torch.randn(shape, generator=g) * 3).to(dtype)
    out.append(ops.noise(x, 3, 0.15, seed=2**40 + 3, offset=7))
z = torch.zeros(2, 1, 13, 13)
z[:, 0, 0, 0] = 1.0  # range 1, noise level 1: out - x is z itself, every bit of it exposed
out.append(ops.noise(z, 2, 1.0, seed=5))
torch.save(out, sys.argv[1])
"""


def noise_in_subprocess(tmp_path, scalar: bool):
    path = tmp_path / f"noise-scalar{int(scalar)}.pt"
    env = {**os.environ, "ROARFAST_NOISE_SCALAR": "1" if scalar else "0",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(Path(__file__).resolve().parent.parent),
                                                       os.environ.get("PYTHONPATH")]))}
    subprocess.run([sys.executable, "-c", PATH_SCRIPT, str(path)], env=env, check=True, timeout=300)
    return torch.load(path)


@pytest.mark.skipif(not has_avx2(), reason="the 8-block path needs an x86-64 CPU with AVX2")
def test_noise_avx2_and_scalar_paths_give_the_same_bits(tmp_path):
    # ROARFAST_NOISE_SCALAR=1 forces the block-by-block path (read once per process, so each path
    # runs in a process of its own). With no FMA contraction anywhere both round every op alike.
    vector, scalar = noise_in_subprocess(tmp_path, False), noise_in_subprocess(tmp_path, True)
    for a, b in zip(vector, scalar, strict=True):
        assert_same_bits(a, b)


def ulps_apart(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Units in the last place of the dtype between a and b, elementwise (same sign assumed for
    nonzero gaps, which holds for values this close)."""
    int_dtype = {torch.float32: torch.int32, torch.float16: torch.int16, torch.bfloat16: torch.int16}[a.dtype]
    return (a.view(int_dtype).long() - b.view(int_dtype).long()).abs()


def assert_same_bits(a: torch.Tensor, b: torch.Tensor):
    assert a.dtype == b.dtype and a.shape == b.shape
    if a.numel() == 0:  # n = 0 samples: nothing to compare beyond the shape
        return
    gap = ulps_apart(a, b)
    assert gap.max().item() == 0, f"{int((gap > 0).sum())} elements differ, by up to {int(gap.max())} ulps"


@pytest.mark.cuda
@pytest.mark.parametrize("sample", noise_samples(), ids=sample_id)
def test_noise_cuda_matches_cpu(sample):
    # the same uncontracted float32 arithmetic on both devices: the same bits, in every dtype
    cpu = ops.noise(*sample)
    cuda = ops.noise(sample[0].cuda(), *sample[1:])
    assert_same_bits(cuda.cpu(), cpu)
    torch.library.opcheck(torch.ops.roarfast.noise.default, op_args((sample[0].cuda(), *sample[1:])))


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
def test_noise_cuda_repeated_grid_stride_and_odd_counts_match_cpu(dtype):
    # 3*61*67 = 12261 elements per image (not divisible by 4): 3066 Philox groups, the last partial;
    # x 96 images x 8 samples = 2.35 M groups, twice the threads of the capped grid on an H100
    # (132 SMs x 2048 x 4 = 1.08 M): the grid-stride loop goes round three times.
    x = (torch.randn(96, 3, 61, 67, generator=torch.Generator().manual_seed(3)) * 2).to(dtype)
    cpu = ops.noise(x, 8, 0.15, seed=99, offset=11)
    assert_same_bits(ops.noise(x.cuda(), 8, 0.15, seed=99, offset=11).cpu(), cpu)


@pytest.mark.parametrize("args,message", [
    ((torch.zeros(3, 4, 4), 1, 0.1, 0, 0), r"x should be \[B,C,H,W\]"),
    ((torch.zeros(1, 3, 4, 4, dtype=torch.float64), 1, 0.1, 0, 0), "x should be float32"),
    ((torch.zeros(1, 3, 4, 4), -1, 0.1, 0, 0), "n should be >= 0"),
    ((torch.zeros(1, 3, 4, 4), 1, -0.1, 0, 0), "noise_level should be >= 0"),
    ((torch.zeros(1, 3, 4, 4), 1, 0.1, 0, -2), "offset should be >= 0"),
], ids=["dim", "dtype", "n", "noise_level", "offset"])
def test_noise_bad_arguments_name_the_argument(args, message):
    with pytest.raises(RuntimeError, match=message):
        torch.ops.roarfast.noise.default(*args)


def test_noise_seed_out_of_range():
    with pytest.raises(ValueError, match="seed should be in"):
        ops.noise(torch.zeros(1, 1, 2, 2), 1, 0.1, seed=2**64)


# ------------------------------------------------------------------------------------ a key per image, one call

def per_image_by_hand(x, n, level, seeds, offset):
    """noise_per_image as its definition says: each image alone under its own key, laid out sample-major."""
    alone = [ops.noise(x[b:b + 1], n, level, seed, offset=offset) for b, seed in enumerate(seeds)]
    return torch.stack(alone, 1).reshape(n * x.shape[0], *x.shape[1:])


KEYS = [0, 2**40 + 7, 2**64 - 1, -12345, 2**63]  # zero, large, the top of the range, negative, the sign bit


@pytest.mark.parametrize("sample", noise_samples(), ids=sample_id)
def test_noise_per_image_is_each_image_alone(sample):
    x, n, level, _, offset = sample
    seeds = KEYS[:x.shape[0]]
    assert_same_bits(ops.noise_per_image(x, n, level, seeds, offset), per_image_by_hand(x, n, level, seeds, offset))
    torch.library.opcheck(torch.ops.roarfast.noise.default,
                          (x, n, level, 0, offset, torch.tensor([s - 2**64 if s >= 2**63 else s for s in seeds])))


def test_noise_per_image_does_not_depend_on_the_batch():
    """An image's noise under its key is the same bits in any batch, at any position, beside any images."""
    x = torch.randn(5, 3, 9, 7, generator=torch.Generator().manual_seed(4))
    whole = ops.noise_per_image(x, 3, 0.2, KEYS, offset=2).view(3, 5, -1)
    order = [3, 0, 4]
    part = ops.noise_per_image(x[order], 3, 0.2, [KEYS[i] for i in order], offset=2).view(3, 3, -1)
    assert_same_bits(part, whole[:, order])
    same_key = ops.noise_per_image(x[:2], 1, 1.0, [7, 7]).view(2, -1)
    z = [(same_key[b] - x[b].flatten()) / (x[b].max() - x[b].min()) for b in range(2)]
    torch.testing.assert_close(z[0], z[1], rtol=1e-4, atol=1e-4)  # one key, one draw, scaled by each range
    other_key = ops.noise_per_image(x[:2], 1, 1.0, [7, 8]).view(2, -1)
    assert not torch.allclose(other_key[1], same_key[1])


@pytest.mark.parametrize("seeds,error,message", [
    ([1, 2, 3], RuntimeError, "one key per image"),
    ([2**64], ValueError, "seeds should be in"),
    (torch.tensor([1.0, 2.0]), RuntimeError, "seeds should be int64"),
    (torch.tensor([[1, 2]]), RuntimeError, r"seeds should be \[B\]"),
], ids=["count", "range", "dtype", "dim"])
def test_noise_per_image_bad_keys(seeds, error, message):
    with pytest.raises(error, match=message):
        ops.noise_per_image(torch.zeros(2, 1, 2, 2), 1, 0.1, seeds)


@pytest.mark.cuda
@pytest.mark.parametrize("sample", noise_samples(), ids=sample_id)
def test_noise_per_image_cuda_matches_cpu(sample):
    x, n, level, _, offset = sample
    seeds = KEYS[:x.shape[0]]
    cpu = ops.noise_per_image(x, n, level, seeds, offset)
    assert_same_bits(ops.noise_per_image(x.cuda(), n, level, seeds, offset).cpu(), cpu)
