"""Builds roarfast._C: the custom ops in csrc/, CPU always, CUDA where the kernels can run or where asked.

CUDA kernels are compiled when a GPU is visible (with nvcc and a CUDA build of torch), or when
ROARFAST_CUDA=1 asks for them on a machine without one: scripts/test.sh asks wherever a toolkit is, so CI
(nvcc, no GPU) still compiles every .cu and a compile error fails it. ROARFAST_CUDA=0 builds the CPU kernels
only. Without a GPU the CPU-only build takes a fraction of the time; a CPU-only build on a machine that has a
GPU says so, with the command that adds the kernels. Everything a fresh machine needs is found here, so no
exported variables are required.

`python setup.py --cuda-plan` prints what a build would choose (CUDA 1 or 0, GPU visible 1 or 0, the reason) and
`python setup.py --cuda-toolkit` whether nvcc and a CUDA torch are there (1 or 0), for scripts/bootstrap.sh.
"""

import glob
import json
import os
import shutil
import sys
from pathlib import Path

from setuptools import setup

ROOT = Path(__file__).resolve().parent
DEFAULT_ARCHS = "8.0;9.0+PTX"  # A100, H100 (+PTX for newer cards)
GB_PER_NVCC_JOB = 4  # nvcc on torch headers peaks around 3 GB; bound jobs so 2-core/24 GB CI never swaps


def find_cuda_home():
    """The toolkit root, or None. torch guesses /usr/local from /usr/local/bin/nvcc, which breaks linking."""
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(var) and Path(os.environ[var], "bin", "nvcc").exists():
            return os.environ[var]
    if Path("/usr/local/cuda/bin/nvcc").exists():
        return "/usr/local/cuda"
    nvcc = shutil.which("nvcc")
    if nvcc:
        root = Path(os.path.realpath(nvcc)).parent.parent
        if (root / "include" / "cuda_runtime.h").exists():
            return str(root)
    return None


#: how a CPU-only build on a machine with a GPU, or one without CUDA kernels met by --device cuda, is mended
ADD_CUDA = "ROARFAST_CUDA=1 bash scripts/bootstrap.sh"


def gpu_visible() -> bool:
    """Whether this machine shows a CUDA GPU to torch (False with a CPU-only torch)."""
    import torch

    return torch.version.cuda is not None and torch.cuda.is_available()


def want_cuda(cuda_home, gpu=None):
    """(build CUDA?, reason) following ROARFAST_CUDA, else whether a GPU is visible (`gpu`: None asks
    gpu_visible()) with nvcc and a CUDA torch. A CPU-only build where a GPU is visible says how to add them."""
    import torch

    forced = os.environ.get("ROARFAST_CUDA")
    if forced not in (None, "", "0", "1"):
        sys.exit(f"ROARFAST_CUDA must be 0 or 1, got {forced!r}")
    if forced == "1":
        if cuda_home is None:
            sys.exit("ROARFAST_CUDA=1 but no CUDA toolkit (nvcc) was found; set CUDA_HOME")
        if torch.version.cuda is None:
            sys.exit("ROARFAST_CUDA=1 but this torch is a CPU-only build")
        return True, "ROARFAST_CUDA=1"
    gpu = gpu_visible() if gpu is None else gpu
    if forced == "0":
        reason = "ROARFAST_CUDA=0"
    elif torch.version.cuda is None:
        return False, "torch is a CPU-only build: CPU-only build"
    elif cuda_home is None:
        reason = "no nvcc found"
    elif gpu:
        return True, f"a GPU is visible and nvcc found in {cuda_home}"
    else:
        return False, f"no GPU visible: CPU-only build (`{ADD_CUDA}` adds the CUDA kernels)"
    if gpu:
        return False, (f"{reason}: CPU-only build on a machine with a GPU; `{ADD_CUDA}` adds the CUDA kernels"
                       + ("" if cuda_home else " once nvcc is installed (or CUDA_HOME set)"))
    return False, f"{reason}: CPU-only build"


def cuda_library_includes(cuda_home):
    """Include dirs for cublas/cusparse headers when the toolkit lacks them (torch's nvidia wheels carry them)."""
    if Path(cuda_home, "include", "cublas_v2.h").exists():
        return []
    import torch

    site = Path(torch.__file__).resolve().parent.parent
    found = [d for d in sorted(glob.glob(str(site / "nvidia" / "*" / "include"))) if Path(d, "cublas_v2.h").exists()]
    found += [d for d in sorted(glob.glob(str(site / "nvidia" / "*" / "include"))) if d not in found]
    return found


def max_jobs():
    if os.environ.get("MAX_JOBS"):
        return os.environ["MAX_JOBS"]
    try:
        mem_gb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    except (ValueError, OSError):
        mem_gb = 8
    return str(max(1, min(os.cpu_count() or 1, int(mem_gb // GB_PER_NVCC_JOB))))


def extension():
    cuda_home = find_cuda_home()
    if cuda_home:
        os.environ["CUDA_HOME"] = cuda_home  # before cpp_extension reads it at import
    build_cuda, reason = want_cuda(cuda_home)
    os.environ.setdefault("TORCH_CUDA_ARCH_LIST", DEFAULT_ARCHS)
    os.environ["MAX_JOBS"] = max_jobs()

    import torch
    from torch.utils.cpp_extension import BuildExtension, CppExtension, CUDAExtension

    csrc = ROOT / "csrc"
    cpp_sources = sorted(csrc.rglob("*.cpp"))
    sources = [str(unit.relative_to(ROOT)) for unit in unity_sources(cpp_sources, csrc)]
    cu_files = sorted(csrc.rglob("*.cu"))
    # the kernels as unity units too, named apart from the C++ ones (unity_0.cpp and unity_0.cu would both make
    # unity_0.o, which ninja refuses)
    cu_sources = [str(unit.relative_to(ROOT))
                  for unit in unity_sources(cu_files, csrc, stem="unity_cuda", suffix=".cu")]
    # no errno from sqrtf & co.: they vectorize (roarfast never reads errno). No a*b+c contracted into
    # an FMA, on the host or the device: CPU and CUDA then round every op alike and give the same bits.
    # No debug info (-g0 overrides Python's -g): the unity units compile in 13 s instead of 20 s on 2 cores,
    # and a backtrace still names the functions (the symbol table stays).
    cxx = ["-O3", "-fno-math-errno", "-ffp-contract=off", "-g0"]
    include_dirs = [str(csrc)]
    config = {
        "torch": torch.__version__,
        "cuda": build_cuda,
        "cuda_reason": reason,
        "cuda_home": cuda_home,
        "torch_cuda": torch.version.cuda,
        "arch_list": os.environ["TORCH_CUDA_ARCH_LIST"] if build_cuda else None,
        "max_jobs": int(os.environ["MAX_JOBS"]),
    }
    if build_cuda:
        include_dirs += cuda_library_includes(cuda_home)
        ext = CUDAExtension(
            "roarfast._C",
            sources + cu_sources,
            include_dirs=include_dirs,
            extra_compile_args={
                "cxx": cxx + ["-DROARFAST_WITH_CUDA"],
                "nvcc": ["-O3", "-lineinfo", "--expt-relaxed-constexpr", "-fmad=false", "-DROARFAST_WITH_CUDA"],
            }
        )
    else:
        ext = CppExtension("roarfast._C", sources, include_dirs=include_dirs, extra_compile_args={"cxx": cxx})
    config["cu_sources"] = len(cu_files) if build_cuda else 0
    config["sources"] = len(cpp_sources) + config["cu_sources"]
    config["unity_units"] = len(sources)
    config["cuda_unity_units"] = len(cu_sources) if build_cuda else 0

    return ext, build_command(BuildExtension.with_options(use_ninja=True), config)


#: where the unity translation units are written (each #includes some of csrc's .cpp files)
UNITY_DIR = ROOT / "build" / "unity"
#: how many unity units each kind of source (.cpp, .cu) compiles as, on every machine: a grouping that followed
#: the job count (2, 4, 16 cores) would let two files' clash (a helper's name, an include one leans on) show on
#: some machines only. Two: CI's and the 2-core machines' build, where both units compile at once
UNITY_UNITS = 2


def unity_sources(cpp_sources: list, csrc: Path, directory: Path = None, stem: str = "unity",
                  suffix: str = ".cpp", units: int = UNITY_UNITS) -> list:
    """The unity translation units (Paths in `directory`, by default UNITY_DIR, named `stem`_N`suffix`) that
    compile `cpp_sources` (Paths under `csrc`, the include root): `units` of them (never an empty one), each
    #including a share of the sources balanced by size; the grouping depends on the sources alone, never on the
    machine. Parsing torch's headers is nearly all of a source's compile time, so one parse per unit instead of
    per file cuts the CPU-only build about 3x (13 sources on 2 cores: 68 s -> 20 s), and the CUDA kernels' too
    (six .cu files for sm_90 in one unit: about the time of one of them alone). scripts/ctest.sh groups them
    otherwise (CMake's unity build, ten in path order, as fixed); two files' internal helpers must not share a
    name (the compiler says so if they do). A unit is rewritten only when its list changes, so ninja (which
    tracks the files a unit includes) recompiles only the units whose files changed."""
    directory = UNITY_DIR if directory is None else directory
    units = max(1, min(units, len(cpp_sources)))
    groups = [[] for _ in range(units)]
    sizes = [0] * units
    for path in sorted(cpp_sources, key=lambda p: (-p.stat().st_size, str(p))):
        smallest = sizes.index(min(sizes))
        groups[smallest].append(path)
        sizes[smallest] += path.stat().st_size
    directory.mkdir(parents=True, exist_ok=True)
    made = []
    for number, group in enumerate(groups):
        unit = directory / f"{stem}_{number}{suffix}"
        text = "// generated by setup.py (unity_sources): do not edit\n" + "".join(
            f'#include "{path.relative_to(csrc).as_posix()}"\n' for path in sorted(group))
        if not unit.exists() or unit.read_text() != text:
            unit.write_text(text)
        made.append(unit)
    for stale in set(directory.glob(f"{stem}_*{suffix}")) - set(made):
        stale.unlink()
    return made


def build_command(base, config: dict):
    """build_ext that prints the configuration when it builds (pip runs setup.py more than once) and
    records it only after the build succeeded, so a failed build never leaves a config describing it."""

    class Build(base):
        def run(self):
            print("roarfast build configuration:", file=sys.stderr)
            for key, value in config.items():
                print(f"  {key:12s} {value}", file=sys.stderr)
            super().run()
            # Read back by `roarfast doctor` and by the import-time check for a torch mismatch: beside
            # the sources (editable installs) and in the build tree (wheels).
            text = json.dumps(config, indent=1) + "\n"
            for package in {ROOT / "roarfast", Path(self.build_lib).resolve() / "roarfast"}:
                if package.is_dir():
                    (package / "_build_config.json").write_text(text)

    return Build


def cuda_toolkit() -> bool:
    """Whether CUDA kernels can be compiled here (nvcc and a CUDA build of torch), GPU or not."""
    import torch

    return find_cuda_home() is not None and torch.version.cuda is not None


if __name__ == "__main__":  # setuptools runs this file as __main__; tests import the helpers above
    if sys.argv[1:] == ["--cuda-plan"]:
        visible = gpu_visible()
        build, why = want_cuda(find_cuda_home(), visible)
        print(int(build), int(visible), why)
    elif sys.argv[1:] == ["--cuda-toolkit"]:
        print(int(cuda_toolkit()))
    else:
        ext, build_ext = extension()
        setup(ext_modules=[ext], cmdclass={"build_ext": build_ext})
