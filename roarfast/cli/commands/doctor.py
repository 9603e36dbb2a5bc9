"""`roarfast doctor`: what this installation can do, for bug reports and first-run checks."""

import importlib
import importlib.metadata
import os
import platform

import click

from roarfast import _extension
from roarfast.cli.commands import command
from roarfast.common.device import native_bf16
from roarfast.common.memory import allocator
from roarfast.version import __version__


def _version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def _first_installed(*packages: str) -> str:
    for package in packages:
        version = _version(package)
        if version != "not installed":
            return f"{package} {version}"
    return "not installed"


def report_lines() -> list[str]:
    # late: loads torch, and --help imports this module
    import torch

    lines = [
        f"roarfast     {__version__}",
        f"python       {platform.python_version()} ({platform.machine()})",
        f"torch        {torch.__version__} (CUDA build: {torch.version.cuda or 'no'})",
        f"torchvision  {_version('torchvision')}",
    ]
    config = _extension.build_config()
    try:
        _extension.load()
        loaded = True
    except _extension.ExtensionError as err:
        loaded = False
        lines.append(f"extension    NOT LOADED: {err}")
    if loaded:
        cuda = config.get("cuda")
        lines.append(f"extension    built for torch {config.get('torch', '?')}; CUDA kernels "
                     f"{'compiled for ' + str(config.get('arch_list')) if cuda else 'not compiled'}"
                     f" ({config.get('cuda_reason', '?')})")
        ops = sorted(name for name in dir(torch.ops.roarfast) if not name.startswith("_") and name != "name")
        for op in ops:
            keys = [key for key in ("CPU", "CUDA") if _extension.has_kernel(op, key)]
            lines.append(f"  op {op:16s} kernels: {', '.join(keys) or 'none'}")
    if torch.cuda.is_available():
        for i in range(torch.cuda.device_count()):
            p = torch.cuda.get_device_properties(i)
            lines.append(f"gpu {i}        {p.name}, sm_{p.major}{p.minor}, {p.total_memory / 2**30:.0f} GiB")
    else:
        lines.append("gpu          none visible")
    lines.append(f"dali         {_first_installed('nvidia-dali-cuda130', 'nvidia-dali-cuda120', 'nvidia-dali-cuda110')}")
    lines.append(f"ray          {_version('ray')}")
    lines.append(f"captum       {_version('captum')}")
    lines.append(f"timm         {_version('timm')} (--model timm:<name>)")
    lines.append(f"malloc       {allocator()}")
    native = native_bf16("cpu")
    lines.append(f"cpu bf16     {'native' if native else 'not native'}: --amp auto trains on the CPU in "
                 f"{'bf16' if native else 'fp32'}" + (" (ROARFAST_NATIVE_BF16 set)"
                                                        if os.environ.get("ROARFAST_NATIVE_BF16") else ""))
    return lines


@command()
def doctor():
    """Versions, whether CUDA kernels were compiled and for which archs, GPUs, DALI, Ray."""
    for line in report_lines():
        click.echo(line)
