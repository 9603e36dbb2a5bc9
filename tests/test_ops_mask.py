"""roarfast::mask and mask_normalize: against the plain-PyTorch reference, hand-worked cases,
opcheck on every sample, torch.compile, CUDA vs CPU, and the messages of bad arguments."""

import pytest
import torch

from roarfast import _reference as ref
from roarfast import ops
from roarfast.errors import UserError

DTYPES = [torch.uint8, torch.float32, torch.float16, torch.bfloat16]
RANK_DTYPES = [torch.uint16, torch.int32, torch.int64]


def random_images(shape, dtype, generator):
    if dtype == torch.uint8:
        return torch.randint(0, 256, shape, dtype=dtype, generator=generator)
    return torch.rand(shape, generator=generator).to(dtype)


def random_ranks(batch, units_shape, dtype, generator):
    """Each image a random permutation of its units, in the given rank dtype."""
    units = torch.Size(units_shape).numel()
    perms = torch.stack([torch.randperm(units, generator=generator) for _ in range(batch)])
    return perms.view(batch, *units_shape).to(dtype)


def layout(t, kind):
    if kind == "channels_last":
        return t.contiguous(memory_format=torch.channels_last)
    if kind == "strided":  # every other column of a twice-as-wide tensor
        wide = torch.zeros(*t.shape[:-1], 2 * t.shape[-1], dtype=t.dtype)
        wide[..., ::2] = t
        return wide[..., ::2]
    return t


# (shape, value units?, k kind, layout): edge cases of geometry and k.
CASES = [
    ((2, 3, 5, 7), False, "mid", "contiguous"),
    ((2, 3, 5, 7), True, "mid", "contiguous"),
    ((3, 3, 4, 4), False, "per_image", "channels_last"),
    ((3, 3, 4, 4), True, "per_image", "channels_last"),
    ((2, 1, 6, 5), False, "zero", "strided"),
    ((2, 3, 6, 5), False, "all", "strided"),
    ((1, 3, 1, 1), False, "all", "contiguous"),  # one-pixel image, B=1
    ((1, 2, 1, 1), True, "zero", "channels_last"),
]


def make_k(kind, batch, units, generator):
    if kind == "zero":
        return torch.zeros(batch, dtype=torch.int64)
    if kind == "all":
        return torch.full((batch,), units, dtype=torch.int64)
    if kind == "mid":
        return torch.full((batch,), units // 3, dtype=torch.int64)
    return torch.randint(0, units + 1, (batch,), generator=generator)


def mask_samples(device="cpu"):
    """(images, ranks, k, fill, keep) argument tuples of roarfast::mask covering CASES x dtypes x modes."""
    g = torch.Generator().manual_seed(0)
    samples = []
    for i, (shape, value_units, k_kind, kind) in enumerate(CASES):
        b, c, h, w = shape
        for j, dtype in enumerate(DTYPES):
            rank_dtype = RANK_DTYPES[(i + j) % len(RANK_DTYPES)]
            units_shape = (c, h, w) if value_units else (h, w)
            images = layout(random_images(shape, dtype, g), kind)
            ranks = random_ranks(b, units_shape, rank_dtype, g)
            k = make_k(k_kind, b, torch.Size(units_shape).numel(), g)
            fill = torch.tensor([7.4, 250.6, 128.5][:c] if dtype == torch.uint8 else [-1.0, 2.5, 0.25][:c])
            for keep in (False, True):
                samples.append(tuple(t.to(device) if isinstance(t, torch.Tensor) else t
                                     for t in (images, ranks, k, fill, keep)))
    return samples


def normalize_samples(device="cpu"):
    """Arguments of roarfast::mask_normalize: masked and not, every out dtype, both output layouts."""
    samples = []
    mean, std = torch.tensor([0.49, 0.48, 0.45]), torch.tensor([0.25, 0.24, 0.26])
    for n, (images, ranks, k, _, keep) in enumerate(mask_samples()):
        if images.dtype != torch.uint8 or images.shape[1] != 3:
            continue
        out_dtype = [torch.float32, torch.float16, torch.bfloat16][n % 3]
        fill = torch.tensor([0.0, -1.5, 2.0])
        for channels_last in (False, True):
            for masked in (True, False):
                args = (images, ranks, k, fill) if masked else (images, None, None, None)
                samples.append(tuple(t.to(device) if isinstance(t, torch.Tensor) else t
                                     for t in (*args, keep, mean, std, out_dtype, channels_last)))
    return samples


def sample_id(sample):
    images, ranks = sample[0], sample[1]
    r = "none" if ranks is None else f"{tuple(ranks.shape)}-{ranks.dtype}"
    return f"{tuple(images.shape)}-{images.dtype}-{r}-keep{sample[4]}"


@pytest.mark.parametrize("sample", mask_samples(), ids=sample_id)
def test_mask_matches_reference(sample):
    images, ranks, k, fill, keep = sample
    out = torch.ops.roarfast.mask.default(*sample)
    assert out.dtype == images.dtype and out.shape == images.shape
    assert torch.equal(out, ref.mask(images, ranks, k, fill, keep))
    cl = images.is_contiguous(memory_format=torch.channels_last) and not images.is_contiguous()
    assert out.is_contiguous(memory_format=torch.channels_last if cl else torch.contiguous_format)


@pytest.mark.parametrize("sample", normalize_samples(), ids=sample_id)
def test_mask_normalize_matches_reference(sample):
    images, ranks, k, fill, keep, mean, std, out_dtype, channels_last = sample
    out = torch.ops.roarfast.mask_normalize.default(*sample)
    want = ref.mask_normalize(images, ranks, k, fill, keep, mean=mean, std=std, out_dtype=out_dtype,
                              channels_last=channels_last)
    assert out.dtype == out_dtype
    torch.testing.assert_close(out, want, rtol=0, atol=0)
    assert out.is_contiguous(memory_format=torch.channels_last if channels_last else torch.contiguous_format)


def test_mask_hand_worked_roar_and_kar():
    images = torch.arange(8, dtype=torch.float32).view(1, 2, 2, 2)
    ranks = torch.tensor([[[2, 0], [3, 1]]], dtype=torch.uint16)
    roar = ops.mask(images, ranks, 2, [-1.0, -2.0])
    assert roar.tolist() == [[[[0.0, -1.0], [2.0, -1.0]], [[4.0, -2.0], [6.0, -2.0]]]]
    kar = ops.mask(images, ranks, 2, [-1.0, -2.0], keep=True)
    assert kar.tolist() == [[[[-1.0, 1.0], [-1.0, 3.0]], [[-2.0, 5.0], [-2.0, 7.0]]]]


@pytest.mark.parametrize("keep", [False, True])
@pytest.mark.parametrize("fraction", [0.0, 0.1, 0.29, 0.5, 1.0])
def test_mask_fraction_replaces_exactly_floor_fraction_units(fraction, keep):
    g = torch.Generator().manual_seed(1)
    images = torch.rand(3, 3, 10, 10, generator=g)
    ranks = random_ranks(3, (10, 10), torch.int32, g)
    out = ops.mask(images, ranks, fraction, [-1.0] * 3, keep=keep)
    replaced_pixels = (out == -1.0).all(1).flatten(1).sum(1)
    k = int(round(fraction * 100))  # the decimal fraction of 100 pixels, free of float artefacts
    assert replaced_pixels.tolist() == [100 - k if keep else k] * 3


def test_mask_fill_rounds_and_saturates_for_uint8():
    images = torch.full((1, 3, 1, 2), 9, dtype=torch.uint8)
    ranks = torch.tensor([[[0, 1]]], dtype=torch.int64)
    out = ops.mask(images, ranks, 1, [-3.0, 255.7, 127.5])
    assert out[0, :, 0, 0].tolist() == [0, 255, 128]  # 127.5 rounds half to even
    assert out[0, :, 0, 1].tolist() == [9, 9, 9]


def test_mask_scores_ties_and_nan():
    # All-equal scores: ties go to the lower flat index, so the first k pixels go; NaN ranks last.
    images = torch.ones(2, 1, 2, 3)
    scores = torch.zeros(2, 2, 3)
    scores[1, 0, 0] = float("nan")
    out = ops.mask_scores(images, scores, 2, [0.0])
    assert out[0, 0].flatten().tolist() == [0, 0, 1, 1, 1, 1]
    assert out[1, 0].flatten().tolist() == [1, 0, 0, 1, 1, 1]
    torch.testing.assert_close(out, ref.mask_scores(images, scores, 2, [0.0]), rtol=0, atol=0)


@pytest.mark.parametrize("reduction", ["sum_sq", "value"])
def test_mask_scores_matches_reference(reduction):
    g = torch.Generator().manual_seed(2)
    images = torch.randint(0, 256, (3, 3, 6, 6), dtype=torch.uint8, generator=g)
    scores = torch.randn(3, 3, 6, 6, generator=g)
    got = ops.mask_scores(images, scores, 0.4, [1, 2, 3], keep=True, reduction=reduction)
    assert torch.equal(got, ref.mask_scores(images, scores, 0.4, [1, 2, 3], keep=True, reduction=reduction))


def test_mask_normalize_without_ranks_is_torchvision_normalize():
    images = torch.tensor([0, 51, 255], dtype=torch.uint8).view(1, 1, 1, 3)
    out = ops.mask_normalize(images, None, mean=[0.5], std=[0.25])
    torch.testing.assert_close(out.flatten(), torch.tensor([-2.0, -1.2, 2.0]))


@pytest.mark.parametrize("sample", mask_samples()[::5], ids=sample_id)
def test_mask_opcheck(sample):
    torch.library.opcheck(torch.ops.roarfast.mask.default, sample)


@pytest.mark.parametrize("sample", normalize_samples()[::3], ids=sample_id)
def test_mask_normalize_opcheck(sample):
    torch.library.opcheck(torch.ops.roarfast.mask_normalize.default, sample)


def test_mask_compiles_fullgraph():
    images = torch.randint(0, 256, (2, 3, 4, 4), dtype=torch.uint8)
    ranks = random_ranks(2, (4, 4), torch.uint16, torch.Generator().manual_seed(3))

    def masked_inputs(images, ranks):
        plain = ops.mask(images, ranks, 0.5, [1.0, 2.0, 3.0])
        normed = ops.mask_normalize(images, ranks, 5, [0.0] * 3, True, mean=[0.5] * 3, std=[0.2] * 3,
                                    out_dtype=torch.bfloat16, channels_last=True)
        return plain, normed

    compiled = torch.compile(masked_inputs, fullgraph=True, backend="aot_eager")
    for got, want in zip(compiled(images, ranks), masked_inputs(images, ranks)):
        assert torch.equal(got, want)


@pytest.mark.cuda
@pytest.mark.parametrize("sample", mask_samples(), ids=sample_id)
def test_mask_cuda_matches_cpu(sample):
    cpu = torch.ops.roarfast.mask.default(*sample)
    cuda = torch.ops.roarfast.mask.default(*(t.cuda() if isinstance(t, torch.Tensor) else t for t in sample))
    assert torch.equal(cuda.cpu(), cpu)
    assert cuda.stride() == cpu.stride()


@pytest.mark.cuda
@pytest.mark.parametrize("sample", normalize_samples(), ids=sample_id)
def test_mask_normalize_cuda_matches_cpu(sample):
    cpu = torch.ops.roarfast.mask_normalize.default(*sample)
    cuda = torch.ops.roarfast.mask_normalize.default(
        *(t.cuda() if isinstance(t, torch.Tensor) else t for t in sample))
    torch.testing.assert_close(cuda.cpu(), cpu, rtol=0, atol=0)
    assert cuda.stride() == cpu.stride()


@pytest.mark.cuda
def test_mask_cuda_opcheck():
    for sample in mask_samples("cuda")[::7]:
        torch.library.opcheck(torch.ops.roarfast.mask.default, sample)
    for sample in normalize_samples("cuda")[::7]:
        torch.library.opcheck(torch.ops.roarfast.mask_normalize.default, sample)


def good_mask_args():
    images = torch.zeros(2, 3, 4, 5)
    return dict(images=images, ranks=torch.zeros(2, 4, 5, dtype=torch.int32), k=torch.tensor([1, 2]),
                fill=torch.zeros(3), keep=False)


# (argument overrides for roarfast::mask, words the message must contain)
BAD_MASK_ARGS = [
    (dict(images=torch.zeros(3, 4, 5)), "images should be [B,C,H,W]"),
    (dict(images=torch.zeros(2, 3, 4, 5, dtype=torch.float64)), "images should be uint8, float32"),
    (dict(ranks=torch.zeros(2, 4, 5)), "ranks should be uint16, int32 or int64"),
    (dict(ranks=torch.zeros(2, 5, 4, dtype=torch.int32)), "ranks should be [B,H,W]"),
    (dict(ranks=torch.zeros(1, 4, 5, dtype=torch.int32)), "ranks should be [B,H,W]"),
    (dict(k=torch.tensor([1, 21])), "k should be in [0, 20]"),
    (dict(k=torch.tensor([-1, 0])), "k should be in [0, 20]"),
    (dict(k=torch.tensor([1, 2, 3])), "k should be [B]"),
    (dict(k=torch.tensor([1.0, 2.0])), "k should be int64"),
    (dict(fill=torch.zeros(2)), "fill should have one value per channel"),
    (dict(fill=torch.zeros(3, dtype=torch.int64)), "fill should be a floating tensor"),
]


@pytest.mark.parametrize("override,message", BAD_MASK_ARGS, ids=[m for _, m in BAD_MASK_ARGS])
def test_mask_bad_arguments_name_the_argument(override, message):
    args = {**good_mask_args(), **override}
    with pytest.raises(RuntimeError, match=message.replace("[", r"\[").replace("]", r"\]")):
        torch.ops.roarfast.mask.default(**args)


BAD_NORMALIZE_ARGS = [
    (dict(images=torch.zeros(2, 3, 4, 5)), "images should be uint8 for mask_normalize"),
    (dict(out_dtype=torch.int32), "out_dtype should be float32"),
    (dict(mean=torch.zeros(2)), "mean should have one value per channel"),
    (dict(std=torch.ones(3, 1)), "std should have one value per channel"),
    (dict(fill=None), "fill should be given"),
    (dict(k=None), "ranks and k should be given together"),
]


@pytest.mark.parametrize("override,message", BAD_NORMALIZE_ARGS, ids=[m for _, m in BAD_NORMALIZE_ARGS])
def test_mask_normalize_bad_arguments_name_the_argument(override, message):
    args = {**good_mask_args(), "images": torch.zeros(2, 3, 4, 5, dtype=torch.uint8), "mean": torch.zeros(3),
            "std": torch.ones(3), "out_dtype": torch.float32, "channels_last": False, **override}
    with pytest.raises(RuntimeError, match=message):
        torch.ops.roarfast.mask_normalize.default(**args)


@pytest.mark.parametrize("k,error,message", [
    (1.5, ValueError, "fraction should be a number in"),
    (-0.1, ValueError, "fraction should be a number in"),
    (21, ValueError, r"k should be in \[0, 20\]"),
    ("half", TypeError, "k should be an int"),
])
def test_mask_wrapper_checks_k(k, error, message):
    args = good_mask_args()
    with pytest.raises(error, match=message):
        ops.mask(args["images"], args["ranks"], k, [0.0] * 3)


@pytest.mark.cuda
def test_mask_wrong_device_names_argument():
    args = good_mask_args()
    with pytest.raises(RuntimeError, match="ranks should be on the same device as images"):
        torch.ops.roarfast.mask.default(args["images"].cuda(), args["ranks"], args["k"].cuda(),
                                        args["fill"].cuda(), False)


def wrapper_inputs():
    g = torch.Generator().manual_seed(5)
    images = torch.randint(0, 256, (2, 3, 6, 5), dtype=torch.uint8, generator=g)
    return images, random_ranks(2, (6, 5), torch.uint16, g)


def test_per_channel_tensors_and_lists_give_the_same_output():
    images, ranks = wrapper_inputs()
    fill, mean, std = [9.0, 200.0, 77.0], [0.5, 0.4, 0.3], [0.2, 0.25, 0.3]
    as_tensor = dict(dtype=torch.float32, device=images.device)
    assert torch.equal(ops.mask(images, ranks, 0.4, fill), ops.mask(images, ranks, 0.4, torch.tensor(fill, **as_tensor)))
    from_lists = ops.mask_normalize(images, ranks, 11, [0.0, 1.0, -1.0], mean=mean, std=std)
    from_tensors = ops.mask_normalize(images, ranks, 11, torch.tensor([0.0, 1.0, -1.0], **as_tensor),
                                      mean=torch.tensor(mean, **as_tensor), std=torch.tensor(std, **as_tensor))
    assert torch.equal(from_lists, from_tensors)
    # a float64 tensor is taken at float32, as a list is
    assert torch.equal(ops.mask(images, ranks, 0.4, torch.tensor(fill, dtype=torch.float64)),
                       ops.mask(images, ranks, 0.4, fill))


def test_per_channel_list_is_converted_once_per_device():
    images, _ = wrapper_inputs()
    first = ops.per_channel([0.1, 0.2, 0.3], images, "mean")
    assert ops.per_channel([0.1, 0.2, 0.3], images, "mean") is first
    assert ops.per_channel((0.1, 0.2, 0.3), images, "std") is first  # the same numbers: the same tensor
    assert ops.per_channel([0.1, 0.2, 0.4], images, "mean") is not first
    assert first.dtype == torch.float32 and first.tolist() == torch.tensor([0.1, 0.2, 0.3]).tolist()
    # -0.0 == 0.0, but a fill of -0.0 must stay -0.0 (its bits reach float images)
    positive = ops.per_channel([0.0, 1.0, 2.0], images, "fill")
    negative = ops.per_channel([-0.0, 1.0, 2.0], images, "fill")
    assert not positive[0].signbit() and negative[0].signbit()


@pytest.mark.parametrize("fill,message", [
    (torch.zeros(3, device="meta"), r"fill should be on the images' device \(cpu\), got meta"),
    (torch.zeros(4), r"fill should be a Tensor\[3\] \(one value per channel\), got shape \(4,\)"),
    (torch.zeros(1, 3), r"fill should be a Tensor\[3\]"),
    ([1.0, 2.0], "fill should have 3 values"),
], ids=["device", "length", "2d", "list-length"])
def test_per_channel_wrong_device_or_shape_names_the_argument(fill, message):
    images, ranks = wrapper_inputs()
    with pytest.raises(UserError, match=message):
        ops.mask(images, ranks, 0.5, fill)


def test_per_channel_wrong_mean_names_it():
    images, ranks = wrapper_inputs()
    with pytest.raises(UserError, match="mean should be on the images' device"):
        ops.mask_normalize(images, None, mean=torch.zeros(3, device="meta"), std=[1.0] * 3)


def assert_mask_cuda_matches_cpu(images, ranks, k, fill, keep):
    cpu = torch.ops.roarfast.mask.default(images, ranks, k, fill, keep)
    cuda = torch.ops.roarfast.mask.default(images.cuda(), ranks.cuda(), k.cuda(), fill.cuda(), keep)
    assert torch.equal(cuda.cpu(), cpu) and cuda.stride() == cpu.stride()
    return cpu


def assert_normalize_cuda_matches_cpu(images, ranks, k, fill, keep, out_dtype, channels_last):
    mean, std = torch.tensor([0.485, 0.456, 0.406, 0.5][:images.shape[1]]), torch.tensor([0.229, 0.224, 0.225, 0.3][:images.shape[1]])
    if images.shape[1] > 4:
        mean, std = torch.linspace(0.3, 0.6, images.shape[1]), torch.linspace(0.2, 0.3, images.shape[1])
    args = (images, ranks, k, fill, keep, mean, std, out_dtype, channels_last)
    cpu = torch.ops.roarfast.mask_normalize.default(*args)
    cuda = torch.ops.roarfast.mask_normalize.default(*(t.cuda() if isinstance(t, torch.Tensor) else t for t in args))
    # the table's entries are normalize_u8 itself: the same bits
    assert torch.equal(cuda.cpu().view(torch.int16 if out_dtype != torch.float32 else torch.int32),
                       cpu.view(torch.int16 if out_dtype != torch.float32 else torch.int32))
    assert cuda.stride() == cpu.stride()


@pytest.mark.cuda
@pytest.mark.parametrize("value_units", [False, True])
def test_mask_cuda_multi_block_224(value_units):
    g = torch.Generator().manual_seed(6)
    b, c = 6, 3
    images = torch.randint(0, 256, (b, c, 224, 224), dtype=torch.uint8, generator=g)
    units_shape = (c, 224, 224) if value_units else (224, 224)
    ranks = random_ranks(b, units_shape, ops.rank_dtype(torch.Size(units_shape).numel()), g)
    k = torch.randint(0, torch.Size(units_shape).numel() + 1, (b,), generator=g)
    for keep in (False, True):
        assert_mask_cuda_matches_cpu(images, ranks, k, torch.tensor([1.4, 128.5, 254.6]), keep)
        assert_mask_cuda_matches_cpu(images.float(), ranks, k, torch.tensor([-1.0, 0.5, 2.0]), keep)
        for out_dtype in (torch.float32, torch.float16, torch.bfloat16):
            for channels_last in (False, True):
                assert_normalize_cuda_matches_cpu(images, ranks, k, torch.tensor([0.0, -1.5, 2.0]), keep, out_dtype,
                                                  channels_last)
                assert_normalize_cuda_matches_cpu(images.contiguous(memory_format=torch.channels_last), ranks, k,
                                                  torch.tensor([0.0, -1.5, 2.0]), keep, out_dtype, channels_last)


@pytest.mark.cuda
def test_mask_cuda_cifar_batch_several_images_per_block():
    g = torch.Generator().manual_seed(7)
    images = torch.randint(0, 256, (512, 3, 32, 32), dtype=torch.uint8, generator=g)
    ranks = random_ranks(512, (32, 32), torch.uint16, g)
    k = torch.randint(0, 1025, (512,), generator=g)
    assert_mask_cuda_matches_cpu(images, ranks, k, torch.tensor([3.0, 4.0, 5.0]), False)
    assert_normalize_cuda_matches_cpu(images, ranks, k, torch.tensor([0.0, 0.0, 0.0]), False, torch.bfloat16, True)


@pytest.mark.cuda
@pytest.mark.parametrize("value_units", [False, True])
def test_mask_cuda_uint16_ranks_65536_units_and_k_65536(value_units):
    g = torch.Generator().manual_seed(8)
    shape = (2, 4, 128, 128) if value_units else (2, 3, 256, 256)
    units_shape = shape[1:] if value_units else shape[2:]
    images = torch.randint(0, 256, shape, dtype=torch.uint8, generator=g)
    ranks = random_ranks(2, units_shape, torch.uint16, g)
    assert int(ranks.long().max()) == 65535
    fill = torch.tensor([10.0, 20.0, 30.0, 40.0][:shape[1]])
    for k_value in (65536, 65535, 0):
        k = torch.full((2,), k_value)
        roar = assert_mask_cuda_matches_cpu(images, ranks, k, fill, False)
        kar = assert_mask_cuda_matches_cpu(images, ranks, k, fill, True)
        if k_value == 65536:  # ROAR replaces every unit, KAR none
            assert torch.equal(roar, fill.to(torch.uint8).view(1, -1, 1, 1).expand(shape))
            assert torch.equal(kar, images)
        assert_normalize_cuda_matches_cpu(images, ranks, k, fill[:shape[1]] / 100, True, torch.float32, False)


@pytest.mark.cuda
def test_mask_cuda_non_contiguous_ranks_and_k():
    g = torch.Generator().manual_seed(9)
    images = torch.randint(0, 256, (4, 3, 20, 24), dtype=torch.uint8, generator=g)
    ranks = layout(random_ranks(4, (20, 24), torch.int32, g), "strided")
    k = torch.tensor([0, 100, 7, 300, 480, 5, 1, 2])[::2]  # [0, 7, 480, 1]
    assert not ranks.is_contiguous() and not k.is_contiguous()
    for keep in (False, True):
        cpu = assert_mask_cuda_matches_cpu(images, ranks, k, torch.tensor([1.0, 2.0, 3.0]), keep)
        assert torch.equal(cpu, ref.mask(images, ranks.contiguous(), k.contiguous(), torch.tensor([1.0, 2.0, 3.0]),
                                         keep))


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_mask_cuda_unaligned_rows_and_odd_planes(dtype):
    # images[1:] of 15x15 images starts 675 elements into its storage and every channel row is 225
    # long: no row is 16-byte aligned throughout, so the vector path must fall back at row ends.
    g = torch.Generator().manual_seed(10)
    images = random_images((5, 3, 15, 15), dtype, g)[1:]
    ranks = random_ranks(5, (3, 15, 15), torch.uint16, g)[1:]  # value units, also unaligned
    k = torch.tensor([0, 50, 333, 675])
    fill = torch.tensor([7.0, 8.0, 9.0])
    for keep in (False, True):
        assert_mask_cuda_matches_cpu(images, ranks, k, fill, keep)
        if dtype == torch.uint8:
            assert_normalize_cuda_matches_cpu(images, ranks, k, fill / 10, keep, torch.float16, False)


@pytest.mark.cuda
def test_mask_normalize_cuda_many_channels_without_table():
    # more channels than the shared-memory tables hold: the direct normalize_u8 path, same bits
    g = torch.Generator().manual_seed(11)
    images = torch.randint(0, 256, (3, 40, 9, 9), dtype=torch.uint8, generator=g)
    ranks = random_ranks(3, (9, 9), torch.int64, g)
    assert_normalize_cuda_matches_cpu(images, ranks, torch.tensor([0, 40, 81]), torch.linspace(-1, 1, 40), False,
                                      torch.float32, True)
