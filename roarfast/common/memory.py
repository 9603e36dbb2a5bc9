"""The process's memory allocator: a well-kept one (tcmalloc, jemalloc or mimalloc), chosen before the process starts.

A CPU extraction or evaluation allocates and frees activation tensors of tens to hundreds of MB every batch, and
DALI's decoder scratch of 1-2 MiB every image. glibc's malloc serves such blocks with a fresh `mmap` and unmaps them
on free, so the next batch faults in and zero-fills every page again (half of a CPU extraction's time went to the
kernel); keeping them on its heap instead leaves holes that later batches do not fit, and a long run creeps. The
allocators built for this keep freed blocks in size classes for the next and hand memory back over time; tcmalloc
spent the least time in the kernel on every CPU benchmark (benchmarks/RESULTS.md, "allocators side by side"), so it
comes first.

An allocator replaces `malloc` only when it is loaded before anything allocates: `LD_PRELOAD`, read by the dynamic
loader as the process starts. So the `roarfast` command re-executes itself once, at its start, with the best one
found (`preload_allocator`); nothing changes the allocator of a running process, whose live tensors (a oneDNN
tensor, a profiler's records, a notebook's state) belong to the one it started with. With none found, glibc is
tuned the same way, by environment (GLIBC_TUNABLES) before the process starts. A program that calls the stages in
its own process (a notebook, a script) keeps the allocator it started with; `python -m roarfast.common.memory
COMMAND ...` starts any command with the one the CLI would pick (`launch`).

ROARFAST_ALLOCATOR picks: unset or `auto` (the first found of ALLOCATORS, else glibc tuned), a name of ALLOCATORS,
`glibc` (tuned), a path to an allocator's shared library, or 0 / off (the process as started). A user's own
LD_PRELOAD is kept as it is: the command then starts nothing again.

Imports nothing heavy: the CLI calls it before torch loads.
"""

import ctypes
import functools
import os
import site
import sys
import sysconfig
from pathlib import Path

from roarfast.errors import UserError

#: environment variable that picks the allocator (module docstring)
ENV_VAR = "ROARFAST_ALLOCATOR"
#: set in the re-executed command's environment (to what it loaded): a command that finds it starts nothing again,
#: even where the dynamic loader could not load what was asked (it says so on stderr, once)
APPLIED_VAR = "ROARFAST_ALLOCATOR_APPLIED"
#: the allocators, best first (benchmarks/allocators.py), and their shared libraries' names
ALLOCATORS = {
    "tcmalloc": ("libtcmalloc_minimal.so.4", "libtcmalloc.so.4", "libtcmalloc_minimal.so", "libtcmalloc.so"),
    "jemalloc": ("libjemalloc.so.2", "libjemalloc.so"),
    "mimalloc": ("libmimalloc.so.3", "libmimalloc.so.2", "libmimalloc.so"),
}
#: glibc without a preloaded allocator: no block mapped on its own (each would be faulted in afresh) and up to
#: 2 GiB of free heap top kept rather than trimmed; `release_freed_memory` hands free pages back between units of work
GLIBC_TUNABLES = "glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=2147483647"
OFF = ("0", "false", "off", "no")


def library_dirs() -> list[Path]:
    """Where an allocator's shared library is looked for, first found first: this Python environment's (a pip
    package such as cmeel-mimalloc: site-packages/cmeel.prefix/lib; a conda environment's lib), conda's active
    environment, then the system's library folders."""
    prefixes = [Path(sys.prefix) / "lib", *(Path(p) / "cmeel.prefix" / "lib" for p in site.getsitepackages())]
    if os.environ.get("CONDA_PREFIX"):
        prefixes.append(Path(os.environ["CONDA_PREFIX"]) / "lib")
    multiarch = sysconfig.get_config_var("MULTIARCH") or ""  # Debian's x86_64-linux-gnu; "" elsewhere
    system = [Path("/usr/local/lib"), Path("/usr/lib") / multiarch, Path("/usr/lib64"), Path("/usr/lib")]
    return list(dict.fromkeys(prefixes + system))


def find_allocator(name: str) -> Path | None:
    """The shared library of allocator `name` (a key of ALLOCATORS) in library_dirs(), or None."""
    for folder in library_dirs():
        for file in ALLOCATORS[name]:
            if (folder / file).is_file():
                return folder / file
    return None


def chosen_environment(environ) -> dict:
    """The variables a command started with `environ` should have set for its allocator (none where it is set
    already: a user's LD_PRELOAD, ROARFAST_ALLOCATOR=0, a command re-executed once, not Linux with glibc)."""
    choice = environ.get(ENV_VAR, "auto").strip()
    if (choice.lower() in OFF or environ.get(APPLIED_VAR) or environ.get("LD_PRELOAD", "").strip()
            or glibc() is None):
        return {}
    if choice.lower() == "glibc":
        return _tunables(environ)
    if choice.lower() == "auto":
        found = next(filter(None, map(find_allocator, ALLOCATORS)), None)
        return {"LD_PRELOAD": str(found), APPLIED_VAR: str(found)} if found else _tunables(environ)
    library = find_allocator(choice.lower()) if choice.lower() in ALLOCATORS else Path(choice)
    if library is None or not library.is_file():
        where = ", ".join(map(str, library_dirs())) if library is None else "that path"
        raise UserError(f"{ENV_VAR}={choice}: no such allocator library in {where}; install it (docs/performance.md"
                        f"#memory), name another ({', '.join(ALLOCATORS)}, glibc), or set {ENV_VAR}=0")
    return {"LD_PRELOAD": str(library.resolve()), APPLIED_VAR: str(library.resolve())}


def _tunables(environ) -> dict:
    """glibc tuned by GLIBC_TUNABLES, after a user's own tunables (a malloc tunable of theirs is kept: theirs wins)."""
    own = environ.get("GLIBC_TUNABLES", "")
    if "glibc.malloc." in own:
        return {APPLIED_VAR: "glibc (your GLIBC_TUNABLES)"}
    return {"GLIBC_TUNABLES": ":".join(filter(None, (own, GLIBC_TUNABLES))), APPLIED_VAR: "glibc"}


def own_process() -> bool:
    """Whether this process is the `roarfast` command's own: its console script, or `python -m roarfast.cli` (whose
    argv[0] reads "-m" while the package loads, and its __main__.py's path after)."""
    first = Path(sys.argv[0])
    started = sys.orig_argv[sys.orig_argv.index("-m") + 1:][:1] if "-m" in sys.orig_argv else []
    return first.name == "roarfast" or first.parts[-2:] == ("cli", "__main__.py") or (
        sys.argv[0] == "-m" and started == ["roarfast.cli"])


def preload_allocator() -> None:
    """Re-executes this command once with its allocator (chosen_environment), where it is the `roarfast` command's
    own process; a program that calls the CLI in its own process (a test, a notebook) keeps what it has."""
    try:
        changes = chosen_environment(os.environ) if own_process() else {}
    except UserError as err:  # the command's own process, before its group's one-line errors take over
        raise SystemExit(f"Error: {err}") from None
    if changes:
        sys.stdout.flush()
        sys.stderr.flush()
        # sys.orig_argv: the interpreter's own options and `-m roarfast.cli` or the script, as this process began
        os.execve(sys.executable, [sys.executable, *sys.orig_argv[1:]], {**os.environ, **changes})


def launch(argv: list) -> None:
    """Runs the command `argv` (a program and its arguments) in place of this process, with the allocator the CLI
    would pick (chosen_environment) in its environment."""
    if not argv:
        raise UserError("python -m roarfast.common.memory COMMAND [ARGS...]: name the command to start, e.g. "
                        "`python -m roarfast.common.memory jupyter lab`")
    os.execvpe(argv[0], argv, {**os.environ, **chosen_environment(os.environ)})


def allocator() -> str:
    """Which allocator serves this process's malloc, for `roarfast doctor`: a preloaded library's path, or glibc
    with the tunables it started with."""
    mapped = [line.split()[-1] for line in _maps() if any(name.split(".so")[0] in line
                                                          for names in ALLOCATORS.values() for name in names)]
    if mapped and not serves_malloc_itself():
        return f"{mapped[0]} (preloaded)"
    if glibc() is None:
        return "the C library's (not glibc: unchanged)"
    tunables = [t for t in os.environ.get("GLIBC_TUNABLES", "").split(":") if t.startswith("glibc.malloc.")]
    return f"glibc, tuned: {':'.join(tunables)}" if tunables else "glibc, untuned"


def _maps() -> list[str]:
    try:
        return Path("/proc/self/maps").read_text().splitlines()
    except OSError:
        return []


class _Mallinfo2(ctypes.Structure):
    """glibc's struct mallinfo2 (2.33 and later): its heap's statistics, in bytes."""
    _fields_ = [(name, ctypes.c_size_t) for name in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                                                      "fsmblks", "uordblks", "fordblks", "keepcost")]


#: what serves_malloc_itself allocates: below glibc's mmap threshold (128 KiB), so its heap counts it
_PROBE_BYTES = 32 * 1024


@functools.cache
def serves_malloc_itself() -> bool:
    """Whether glibc's own malloc serves this process (no allocator preloaded in front of it): a block allocated
    through the process's malloc shows in glibc's own heap statistics. (Comparing the symbols' addresses does not
    tell: a non-PIE python, Debian's /usr/bin/python3, resolves malloc to its own PLT stub.)"""
    libc = glibc()
    if libc is None:
        return False
    own = ctypes.CDLL("libc.so.6")
    if not hasattr(own, "mallinfo2"):  # glibc before 2.33: the symbols' addresses, right for a PIE python
        return ctypes.cast(libc.malloc, ctypes.c_void_p).value == ctypes.cast(own.malloc, ctypes.c_void_p).value
    own.mallinfo2.restype = _Mallinfo2
    libc.malloc.restype = ctypes.c_void_p
    libc.malloc.argtypes = (ctypes.c_size_t,)
    libc.free.argtypes = (ctypes.c_void_p,)
    before = own.mallinfo2().uordblks
    block = libc.malloc(_PROBE_BYTES)
    grown = own.mallinfo2().uordblks - before
    libc.free(block)
    return grown >= _PROBE_BYTES // 2  # another thread's frees meanwhile could only shrink it by chance


def release_freed_memory() -> None:
    """Hands the heap's free pages back to the system (glibc's `malloc_trim`) where glibc serves malloc, tuned to
    keep them (GLIBC_TUNABLES) or not; a preloaded allocator hands its own back over time. Call it between units of
    work (an extraction's chunks, before and after an evaluation), when their tensors are freed."""
    if serves_malloc_itself():
        glibc().malloc_trim(0)


#: a batch whose inputs take fewer bytes keeps its blocks for the next batch: handing them back would re-fault them
#: every batch (the embedded dataset's 32-px batches of 512: 6 MiB of inputs, evaluated in a fraction of a second),
#: and two such batches' blocks are little memory; a 224-px batch of 512 images takes 294 MiB
HAND_BACK_BATCH_BYTES = 64 * 2**20


def release_after_batch(input_bytes: int) -> None:
    """release_freed_memory after a batch whose inputs took `input_bytes`, where they were large enough
    (HAND_BACK_BATCH_BYTES) that keeping its freed blocks for the next would hold the memory of two such batches."""
    if input_bytes >= HAND_BACK_BATCH_BYTES:
        release_freed_memory()


@functools.cache
def glibc():
    """The process's C library when it is glibc (Linux with GNU libc), else None."""
    if not sys.platform.startswith("linux"):
        return None
    libc = ctypes.CDLL(None)
    if not hasattr(libc, "gnu_get_libc_version") or not hasattr(libc, "malloc_trim"):
        return None
    libc.malloc_trim.argtypes = (ctypes.c_size_t,)
    return libc


if __name__ == "__main__":
    try:
        launch(sys.argv[1:])
    except UserError as err:
        raise SystemExit(f"Error: {err}") from None
