"""On CUDA the estimators give the CPU's maps (fp32), and bf16 autocast keeps the pixel ranking."""

import pytest
import torch

from roarfast.methods import ExplainBatch, MethodParams, black_baseline, compute_maps
from tests.test_methods_ensembles import spearman
from tests.test_methods_gradients import MEAN, STD, assert_relative, tiny_batch, tiny_cnn

pytestmark = pytest.mark.cuda

METHODS = "grad,ig,gb,sg,sg-sq,var,sg-gb,gradcam,sobel,random"


def on(batch: ExplainBatch, device: str) -> ExplainBatch:
    return ExplainBatch(x=batch.x.to(device), target=batch.target.to(device), index=batch.index, seed=batch.seed)


@pytest.fixture
def exact_fp32():
    """cuDNN and cuBLAS in true fp32: TF32's ~1e-3 rounding flips ReLU gates of near-zero activations,
    which moves single gradient values by far more than the rounding (seen on an H100: 6 of 768)."""
    saved = torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32
    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
    yield
    torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = saved


def test_cuda_maps_equal_cpu_maps(exact_fp32):
    model, batch = tiny_cnn(), tiny_batch(batch=4)
    params = MethodParams(ig_baseline=black_baseline(MEAN, STD), samples=8)
    cpu = compute_maps(model, batch, METHODS, params)
    cuda = compute_maps(model.cuda(), on(batch, "cuda"), METHODS, params)
    for name, expected in cpu.items():
        assert cuda[name].device.type == "cuda", name
        # fp32 on both devices: only the order of the sums differs
        try:
            assert_relative(cuda[name].cpu(), expected, rel=1e-4)
        except AssertionError as error:
            raise AssertionError(f"{name}: {error}") from None


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_autocast_keeps_the_pixel_ranking(dtype):
    model, batch = tiny_cnn().cuda(), on(tiny_batch(batch=4), "cuda")
    full = compute_maps(model, batch, "grad,sg-sq", MethodParams())
    low = compute_maps(model, batch, "grad,sg-sq", MethodParams(autocast_dtype=dtype))
    for name in full:
        assert low[name].dtype == torch.float32
        for b in range(4):
            rho = spearman(low[name][b].pow(2).sum(0), full[name][b].pow(2).sum(0))
            assert rho >= 0.9, f"{name} image {b} under {dtype}: Spearman {rho:.3f}"
