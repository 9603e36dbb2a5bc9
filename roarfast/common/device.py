"""Choice of the torch device from the CLI's --device (auto | cpu | cuda | cuda:N), refusing (or, for auto,
passing over) a GPU that the built extension has no kernels for; whether a device computes bf16 natively
(what --amp auto trains in); the images a pass of extraction or evaluation takes by default."""

import os
import sys

from roarfast._extension import build_config
from roarfast.errors import UserError

#: the command that rebuilds the extension with its CUDA kernels (setup.py compiles them only where a GPU is
#: visible, or where asked)
ADD_CUDA = "ROARFAST_CUDA=1 bash scripts/bootstrap.sh"


def resolve_device(name: str = "auto"):
    # late: loads torch, and --help imports this module
    import torch

    if name in (None, "", "auto"):
        if torch.cuda.is_available() and not _cpu_only_build():
            return torch.device("cuda")
        if torch.cuda.is_available():
            print(f"note: a GPU is visible, but roarfast's extension was built without CUDA kernels: running on the "
                  f"CPU; `{ADD_CUDA}` adds them", file=sys.stderr)
        return torch.device("cpu")
    try:
        device = torch.device(name)
    except RuntimeError:
        raise UserError(f"--device should be auto, cpu, cuda or cuda:N, got {name!r}") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise UserError(f"--device {name} asked for a GPU but torch sees none (roarfast doctor shows what it sees)")
    if device.type == "cuda" and _cpu_only_build():
        raise UserError(f"--device {name}: roarfast's extension was built without CUDA kernels; `{ADD_CUDA}` adds "
                        f"them (or --device cpu)")
    return device


def default_batch_size(device, image_size: int) -> int:
    """Images per forward/backward of extraction and no-retrain evaluation (--batch-size's default): the
    ensembles multiply it by their samples, chunked inside."""
    if device.type == "cuda":
        return 512 if image_size <= 64 else 64
    return 256 if image_size <= 64 else 16


def _cpu_only_build() -> bool:
    """Whether the build recorded (setup.py's _build_config.json) that it compiled no CUDA kernels; a build
    that recorded nothing is taken at its word when its ops run."""
    return build_config().get("cuda") is False


def native_bf16(device) -> bool:
    """Whether `device` computes bf16 natively: a CUDA GPU, or a CPU with AVX512-BF16 or AMX (oneDNN's bf16
    kernels make a fastnet step about 1.4x faster than fp32: benchmarks/cpu_formats.py). Elsewhere oneDNN
    emulates bf16, slower than fp32. ROARFAST_NATIVE_BF16=0 or 1 overrides what the CPU reports (the test
    suite sets 0, so that its expected values hold on any CPU)."""
    # late: loads torch, and --help imports this module
    import torch

    device = torch.device(device)
    forced = os.environ.get("ROARFAST_NATIVE_BF16", "")
    if forced not in ("", "0", "1"):
        raise UserError(f"ROARFAST_NATIVE_BF16 should be 0 or 1, got {forced!r}")
    if forced and device.type == "cpu":
        return forced == "1"
    if device.type == "cuda":
        return True
    if device.type != "cpu" or not torch.backends.mkldnn.is_available():
        return False
    checks = (getattr(torch.cpu, "_is_avx512_bf16_supported", None), getattr(torch.cpu, "_is_amx_tile_supported", None))
    return any(check is not None and check() for check in checks)
