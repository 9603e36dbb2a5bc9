"""Keeps freed memory inside the process, so the CPU stages stop paying the kernel to zero-fill it again.

Every batch of an IG or SmoothGrad pass allocates activation tensors of tens to hundreds of MB. glibc
serves blocks that large with a fresh `mmap` and unmaps them on free, so the next batch faults in and
zero-fills every page again: half of a CPU extraction's time went to the kernel (issue 13). Two glibc
settings, made once per process through `mallopt`, kept those blocks on the heap for reuse instead:
no `mmap` for large blocks (now only where the block cache below is off), and a heap top of up to 2 GiB that
is not trimmed. The heap grows during the first batch and then stays: its peak is that of one batch plus
fragmentation (torch's 64-byte aligned blocks do not refit exactly into the holes they leave), 1.5-1.85x the
untuned peak for IG and SmoothGrad at extract's CPU batch of 256 on 32px images. Other C libraries are left as
they are.
Setting ROARFAST_MALLOC_TUNING=0 leaves glibc's defaults (for comparison, or to share memory back).

A heap that is never trimmed creeps over a long run, though: a block is reused only where it fits, so an
allocation that finds no hole of its size extends the heap, and the pages of every hole stay resident (an
extraction at 224 px: 0.14 GiB in use in a heap spanning 1.7 GiB after 108 chunks). `release_freed_memory`
hands the free pages back (glibc's `malloc_trim`, which also frees whole pages inside the heap, not just its
top) where little is in use: before each extraction chunk, before and after an evaluation and after each large
evaluation batch (HAND_BACK_BATCH_BYTES). That alone still let an extraction creep, by about 4.6 KiB an image at
224 px: within a chunk, a batch's large blocks land across the heap's growing span.

So torch's large CPU blocks (BLOCK_CACHE_MIN_BYTES and up) leave the heap altogether: where the tuning is on and
roarfast._C is loaded, torch's CPU allocator becomes roarfast's (csrc/memory/), which maps each large block on
its own and, when it is freed, keeps it mapped for the next block of its size class. A batch like the last one
takes the last one's blocks, pages already faulted in; freeing leaves no hole; and what is mapped stays within
1.5 times the peak of the bytes in use since the cache was last emptied (past it, a cached block is resized to the
size asked for). Other libraries' large blocks are then mapped on their own by glibc (MMAP_THRESHOLD), so none
leaves a hole in the heap either. `release_freed_memory` empties the cache (before and after an evaluation:
training and evaluation use other shapes; and after a large evaluation batch); `trim_heap` leaves it (between
extraction chunks, whose batches repeat the same shapes). ROARFAST_BLOCK_CACHE=0 keeps torch's own allocator (for
comparison).

Imports nothing heavy: the CLI calls it before torch loads.
"""

import ctypes
import functools
import os
import sys

from roarfast import _extension  # imports nothing heavy: torch loads with roarfast._C

#: environment variable that turns the tuning off when set to 0 / false / off / no
ENV_VAR = "ROARFAST_MALLOC_TUNING"
#: environment variable that keeps torch's own CPU allocator (no block cache) when set to 0 / false / off / no
BLOCK_CACHE_ENV_VAR = "ROARFAST_BLOCK_CACHE"
#: torch's CPU blocks of this size and above come from the block cache (a batch's canvases, activations and
#: gradients: MiBs at 224 px, hundreds of KiB at 32 px); smaller ones stay on the heap, whose holes they fit
BLOCK_CACHE_MIN_BYTES = 256 * 2**10
#: with the block cache, glibc maps blocks of this size and up on their own (a torch block just under the cache's
#: minimum, with its 64-byte header, stays below it). DALI's per-image scratch at 224 px (1 and 2.3 MiB) is then
#: mapped afresh for each image, 7% of that extraction's time; a 4-MiB threshold kept it on the heap, 8% faster but
#: with a 105-170 MiB higher peak (benchmarks/RESULTS.md), so the threshold stays here
MMAP_THRESHOLD = BLOCK_CACHE_MIN_BYTES + 4096
#: what torch.ops.roarfast_memory.cpu_block_cache_stats() returns, in its order (csrc/memory/cpu_allocator.cpp)
BLOCK_CACHE_STATS = ("installed", "min_bytes", "in_use_bytes", "peak_in_use_bytes", "cached_bytes",
                     "cached_blocks", "hits", "maps", "resizes", "unmaps")
#: glibc's mallopt parameter numbers (malloc.h)
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
M_MMAP_MAX = -4
#: keep up to 2 GiB of free heap top rather than trim it (glibc's default trims above 128 KiB, later above
#: the largest freed mmap); mallopt takes an int, so this is its largest value
TRIM_THRESHOLD = 2**31 - 1

_state: str | None = None
_block_cache: str | None = None


def keep_freed_memory() -> str:
    """Makes glibc keep freed memory for reuse (once per process; later calls return the first result).

    Returns what happened, for `roarfast doctor`: "on", "off (ROARFAST_MALLOC_TUNING=0)" or
    "not glibc (unchanged)".
    """
    global _state
    if _state is None:
        _state = _apply()
        if _state == "on":
            _extension.on_load(cache_large_blocks)
    return _state


def _apply() -> str:
    if _turned_off(ENV_VAR):
        return f"off ({ENV_VAR}={os.environ[ENV_VAR]})"
    libc = glibc()
    if libc is None:
        return "not glibc (unchanged)"
    libc.mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    libc.mallopt.restype = ctypes.c_int
    libc.malloc_trim.argtypes = (ctypes.c_size_t,)
    # with the block cache, torch's large blocks never reach glibc: the other large ones (a decoded photo, a
    # library's buffer) are mapped on their own as glibc does by default, at a fixed threshold just above the
    # cache's, so that no large block leaves a hole in the heap; without it, every block stays on the heap
    mmap = ((M_MMAP_THRESHOLD, MMAP_THRESHOLD) if _block_cache_wanted() else (M_MMAP_MAX, 0))
    if not (libc.mallopt(*mmap) and libc.mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD)):
        raise RuntimeError("glibc's mallopt refused M_MMAP_MAX / M_MMAP_THRESHOLD / M_TRIM_THRESHOLD; set "
                           f"{ENV_VAR}=0 to run without the tuning")
    return "on"


def _turned_off(name: str) -> bool:
    """Whether the environment variable `name` says 0 / false / off / no (unset: on)."""
    return os.environ.get(name, "1").strip().lower() in ("0", "false", "off", "no")


def _block_cache_wanted() -> bool:
    return not _turned_off(BLOCK_CACHE_ENV_VAR)


def cache_large_blocks() -> str:
    """Makes torch's CPU allocator roarfast's block cache for large blocks, where this process tuned glibc
    (`keep_freed_memory`) and roarfast._C is loaded: the tuning asks for it once the extension loads. Returns
    what holds, for `roarfast doctor`: "on (blocks of N KiB and up)", "off (...)" or "not yet (...)"."""
    global _block_cache
    if _block_cache is not None and _block_cache.startswith(("on", "off")):
        return _block_cache
    if not _block_cache_wanted():
        _block_cache = f"off ({BLOCK_CACHE_ENV_VAR}={os.environ[BLOCK_CACHE_ENV_VAR]})"
    elif _state is not None and _state != "on":
        _block_cache = f"off (freed memory not kept: {_state})"
    elif _state is None or "roarfast._C" not in sys.modules:
        return "not yet (installed once the malloc tuning is on and roarfast._C is loaded)"
    else:
        import torch  # loaded already: roarfast._C is

        if torch.ops.roarfast_memory.install_cpu_block_cache(BLOCK_CACHE_MIN_BYTES):
            _block_cache = f"on (blocks of {BLOCK_CACHE_MIN_BYTES // 2**10} KiB and up)"
        else:  # said, not raised: the work runs as well on the other allocator, only its memory differs
            _block_cache = "off (another CPU allocator is registered with torch at a higher priority)"
    return _block_cache


def block_cache_stats() -> dict:
    """The block cache's counters (BLOCK_CACHE_STATS: bytes in use, their peak, bytes cached, hits, ...), or {}
    where roarfast._C is not loaded."""
    if "roarfast._C" not in sys.modules:
        return {}
    import torch  # loaded already: roarfast._C is

    return dict(zip(BLOCK_CACHE_STATS, torch.ops.roarfast_memory.cpu_block_cache_stats()))


def trim_heap() -> None:
    """Hands the heap's free pages back to the system where this process tuned glibc (a no-op otherwise, and
    never a tuning of its own), keeping the block cache: call it between units of work of the same shapes (an
    extraction's chunks), when their tensors are freed."""
    if _state == "on":
        glibc().malloc_trim(0)


def release_freed_memory() -> None:
    """trim_heap, and the block cache's blocks unmapped too: call it where the work changes shapes (training to
    evaluation and back), so that one kind's cached blocks do not sit under the other's."""
    trim_heap()
    if _block_cache is not None and _block_cache.startswith("on"):
        import torch  # loaded already: the block cache is roarfast._C's

        torch.ops.roarfast_memory.release_cpu_block_cache()


#: a batch whose inputs take fewer bytes keeps its blocks for the next batch: handing them back would re-fault them
#: every batch (the embedded dataset's 32-px batches of 512: 6 MiB of inputs, evaluated in a fraction of a second),
#: and two such batches' blocks are little memory; a 224-px batch of 512 images takes 294 MiB
HAND_BACK_BATCH_BYTES = 64 * 2**20


def release_after_batch(input_bytes: int) -> None:
    """release_freed_memory after a batch whose inputs took `input_bytes`, where they were large enough
    (HAND_BACK_BATCH_BYTES) that keeping its blocks for the next would hold the memory of two such batches (a
    cached block's pages count as long as it is cached); the next batch maps and faults them in again, a small cost
    beside a batch that large."""
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
