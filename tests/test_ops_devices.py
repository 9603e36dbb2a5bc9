"""Every custom op on CUDA beyond the current device's default stream: a tensor on cuda:1 while the
current device is 0, a non-default stream, and empty batches or images (B=0, H*W=0), each against
the CPU result."""

import pytest
import torch

from roarfast import ops


def run_ops(x, images, ranks):
    """One call of every op on x (float [B,C,H,W]), images (uint8 [B,C,H,W]) and ranks (uint16 [B,H,W])."""
    c = x.shape[1]
    state = ops.ensemble_update(ops.ensemble_init(x), torch.stack([x, 2 * x, -x]))
    return {
        "rank": ops.rank(x, "sum_sq"),
        "reduce_channels": ops.reduce_channels(x, "max"),
        "mask": ops.mask(images, ranks, 0.5, [3.0] * c),
        "mask_normalize": ops.mask_normalize(images, ranks, 0.25, [0.0] * c, mean=[0.5] * c, std=[0.25] * c,
                                             out_dtype=torch.bfloat16, channels_last=True),
        "noise": ops.noise(x, 2, 0.15, seed=4),
        "ensemble": ops.ensemble_finalize(state, "sum_sq"),
    }


def inputs(shape, seed=0):
    g = torch.Generator().manual_seed(seed)
    b, c, h, w = shape
    x = torch.randn(shape, generator=g)
    images = torch.randint(0, 256, shape, dtype=torch.uint8, generator=g)
    ranks = torch.stack([torch.randperm(h * w, generator=g) for _ in range(b)]).view(b, h, w).to(torch.uint16) \
        if b * h * w else torch.zeros(b, h, w, dtype=torch.uint16)
    return x, images, ranks


def assert_same(got: dict, want: dict, device: torch.device):
    assert got.keys() == want.keys()
    for name in want:
        for g, w in zip(got[name] if isinstance(got[name], tuple) else (got[name],),
                        want[name] if isinstance(want[name], tuple) else (want[name],), strict=True):
            assert g.device == device, name
            assert g.dtype == w.dtype and g.shape == w.shape, name
            assert torch.equal(g.cpu(), w), name


@pytest.mark.cuda
@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs")
def test_every_op_on_the_second_gpu_while_the_first_is_current():
    x, images, ranks = inputs((3, 3, 70, 70))  # 4900 pixels: rank's large sort
    want = run_ops(x, images, ranks)
    torch.cuda.set_device(0)
    device = torch.device("cuda:1")
    got = run_ops(x.to(device), images.to(device), ranks.to(device))
    torch.cuda.synchronize(device)
    assert torch.cuda.current_device() == 0
    assert_same(got, want, device)


@pytest.mark.cuda
@pytest.mark.parametrize("side", [20, 70])
def test_every_op_runs_on_the_current_stream(side):
    # The inputs are written on a side stream behind a long sleep, and the ops called on that stream
    # at once: an op that launched on the default stream would read them before they are written.
    x, images, ranks = inputs((3, 3, side, side), seed=side)
    want = run_ops(x, images, ranks)
    device = torch.device("cuda")
    dx, dimages, dranks = (torch.zeros_like(t, device=device) for t in (x, images, ranks))
    host = [t.pin_memory() for t in (x, images, ranks)]
    torch.cuda.synchronize()
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        torch.cuda._sleep(200_000_000)  # ~0.1 s of GPU cycles
        for dst, src in zip((dx, dimages, dranks), host):
            dst.copy_(src, non_blocking=True)
        got = run_ops(dx, dimages, dranks)
    stream.synchronize()
    assert_same(got, want, dx.device)


@pytest.mark.cuda
@pytest.mark.parametrize("shape", [(0, 3, 8, 8), (2, 3, 0, 8), (2, 3, 8, 0)], ids=["B=0", "H=0", "W=0"])
def test_every_op_on_empty_batches_and_images(shape):
    x, images, ranks = inputs(shape)
    want = run_ops(x, images, ranks)
    got = run_ops(x.cuda(), images.cuda(), ranks.cuda())
    assert_same(got, want, torch.device("cuda", torch.cuda.current_device()))
