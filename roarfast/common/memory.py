"""Keeps freed memory inside the process, so the CPU stages stop paying the kernel to zero-fill it again.

Every batch of an IG or SmoothGrad pass allocates activation tensors of tens to hundreds of MB. glibc
serves blocks that large with a fresh `mmap` and unmaps them on free, so the next batch faults in and
zero-fills every page again: half of a CPU extraction's time went to the kernel (issue 13). Two glibc
settings, made once per process through `mallopt`, keep those blocks on the heap for reuse instead:
no `mmap` for large blocks, and a heap top of up to 2 GiB that is not trimmed. The heap grows during
the first batch and then stays: its peak is that of one batch plus fragmentation (torch's 64-byte
aligned blocks do not refit exactly into the holes they leave), 1.5-1.85x the untuned peak for IG and
SmoothGrad at extract's CPU batch of 256 on 32px images. Other C libraries are left as they are.
Setting ROARFAST_MALLOC_TUNING=0 leaves glibc's defaults (for comparison, or to share memory back).

A heap that is never trimmed creeps over a long run, though: a block is reused only where it fits, so an
allocation that finds no hole of its size extends the heap, and the pages of every hole stay resident (an
extraction at 224 px: 0.14 GiB in use in a heap spanning 1.7 GiB after 108 chunks). `release_freed_memory`
hands the free pages back (glibc's `malloc_trim`, which also frees whole pages inside the heap, not just its
top) where little is in use: before each extraction chunk, before an evaluation and after each large
evaluation batch (HAND_BACK_BATCH_BYTES). Those pages come back zero-filled on their next touch, once per chunk
or evaluation batch rather than once per allocation. An extraction's heap still creeps, more slowly
(benchmarks/RESULTS.md, "a heap handed back between units of work").

Imports nothing heavy: the CLI calls it before torch loads.
"""

import ctypes
import functools
import os
import sys

#: environment variable that turns the tuning off when set to 0 / false / off / no
ENV_VAR = "ROARFAST_MALLOC_TUNING"
#: glibc's mallopt parameter numbers (malloc.h)
M_TRIM_THRESHOLD = -1
M_MMAP_MAX = -4
#: keep up to 2 GiB of free heap top rather than trim it (glibc's default trims above 128 KiB, later above
#: the largest freed mmap); mallopt takes an int, so this is its largest value
TRIM_THRESHOLD = 2**31 - 1

_state: str | None = None


def keep_freed_memory() -> str:
    """Makes glibc keep freed memory for reuse (once per process; later calls return the first result).

    Returns what happened, for `roarfast doctor`: "on", "off (ROARFAST_MALLOC_TUNING=0)" or
    "not glibc (unchanged)".
    """
    global _state
    if _state is None:
        _state = _apply()
    return _state


def _apply() -> str:
    if os.environ.get(ENV_VAR, "1").strip().lower() in ("0", "false", "off", "no"):
        return f"off ({ENV_VAR}={os.environ[ENV_VAR]})"
    libc = glibc()
    if libc is None:
        return "not glibc (unchanged)"
    libc.mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    libc.mallopt.restype = ctypes.c_int
    libc.malloc_trim.argtypes = (ctypes.c_size_t,)
    if not (libc.mallopt(M_MMAP_MAX, 0) and libc.mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD)):
        raise RuntimeError("glibc's mallopt refused M_MMAP_MAX=0 / M_TRIM_THRESHOLD; set "
                           f"{ENV_VAR}=0 to run without the tuning")
    return "on"


def release_freed_memory() -> None:
    """Hands the heap's free pages back to the system where this process tuned glibc (a no-op otherwise, and
    never a tuning of its own): call it between units of work (a chunk, an evaluation batch), when their
    tensors are freed."""
    if _state == "on":
        glibc().malloc_trim(0)


#: a batch whose inputs take fewer bytes keeps its blocks for the next batch: handing them back would re-fault them
#: every batch (the embedded dataset's 32-px batches of 512: 6 MiB of inputs, evaluated in a fraction of a second),
#: and two such batches' blocks are little memory; a 224-px batch of 512 images takes 294 MiB
HAND_BACK_BATCH_BYTES = 64 * 2**20


def release_after_batch(input_bytes: int) -> None:
    """release_freed_memory after a batch whose inputs took `input_bytes`, where they were large enough
    (HAND_BACK_BATCH_BYTES) that the next batch's blocks would not fit the holes they leave."""
    if input_bytes >= HAND_BACK_BATCH_BYTES:
        release_freed_memory()


@functools.cache
def glibc():
    """The process's C library when it is glibc (Linux with GNU libc), else None."""
    if not sys.platform.startswith("linux"):
        return None
    libc = ctypes.CDLL(None)
    if not hasattr(libc, "gnu_get_libc_version") or not hasattr(libc, "mallopt"):
        return None
    return libc
