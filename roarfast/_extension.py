"""Loads roarfast._C (the custom ops) and explains, with the fixing command, when it cannot."""

import importlib
import json
from pathlib import Path

REBUILD = "bash scripts/bootstrap.sh  (or: pip install --no-build-isolation -e .)"
_CONFIG = Path(__file__).with_name("_build_config.json")


class ExtensionError(ImportError):
    """roarfast._C is missing or does not match the installed torch."""


def build_config():
    """What setup.py recorded at build time (torch version, CUDA on/off, archs), or {}."""
    try:
        return json.loads(_CONFIG.read_text())
    except (OSError, ValueError):
        return {}


def load():
    # late: loads torch, and --help imports this module
    import torch

    config = build_config()
    built_for = config.get("torch")
    if built_for and built_for != torch.__version__:
        raise ExtensionError(
            f"roarfast._C was built for torch {built_for} but torch {torch.__version__} is installed; "
            f"rebuild it: {REBUILD}")
    try:
        importlib.import_module("roarfast._C")
    except ImportError as err:
        what = "is not built" if "No module named" in str(err) else f"failed to load ({err})"
        raise ExtensionError(f"roarfast's C++/CUDA extension roarfast._C {what}; build it: {REBUILD}") from err
    if not hasattr(torch.ops.roarfast, "rank"):
        raise ExtensionError(f"roarfast._C loaded but registered no ops; rebuild it: {REBUILD}")


def has_kernel(op: str, dispatch_key: str) -> bool:
    """Whether roarfast::<op> has a kernel for 'CPU' or 'CUDA' in this build."""
    # late: loads torch, and --help imports this module
    import torch

    return torch._C._dispatch_has_kernel_for_dispatch_key(f"roarfast::{op}", dispatch_key)
