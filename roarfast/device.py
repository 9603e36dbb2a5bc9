"""Choice of the torch device from the CLI's --device (auto | cpu | cuda | cuda:N), refusing (or, for auto,
passing over) a GPU that the built extension has no kernels for."""

import sys

from roarfast.errors import UserError

#: the command that rebuilds the extension with its CUDA kernels (setup.py compiles them only where a GPU is
#: visible, or where asked)
ADD_CUDA = "ROARFAST_CUDA=1 bash scripts/bootstrap.sh"


def resolve_device(name: str = "auto"):
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


def _cpu_only_build() -> bool:
    """Whether the build recorded (setup.py's _build_config.json) that it compiled no CUDA kernels; a build
    that recorded nothing is taken at its word when its ops run."""
    from roarfast._extension import build_config

    return build_config().get("cuda") is False
