"""The block cache (csrc/memory/, installed by roarfast.common.memory): where the malloc tuning is on and
roarfast._C loads, torch's large CPU blocks come from their own mappings and are reused, freed blocks leave no
hole in the heap (nor do other libraries' large blocks), release_freed_memory hands them back, and tensors made
through it compute what torch's own allocator gives. Its size classes and bounds are tested in
tests/csrc/test_block_cache.cpp.

The allocator is process-wide and installed once, so each configuration is one fresh interpreter that runs every
probe its tests read (a module fixture each: an interpreter loading torch costs seconds).
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from roarfast.common import memory

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(memory.glibc() is None or not hasattr(memory.glibc(), "mallinfo2"),
                                reason="the block cache comes with glibc's tuning (mallinfo2: glibc >= 2.33)")

# The tuning the way argv[1] says ("direct": keep_freed_memory, "cli": `roarfast doctor`, whose lines are kept,
# "none"), roarfast._C loaded, then every probe; the results as JSON on the last line.
PROBES = r"""
import contextlib, ctypes, hashlib, io, json, os, resource, sys
how, said = sys.argv[1], io.StringIO()
if how == "direct":
    from roarfast.common import memory
    memory.keep_freed_memory()
elif how == "cli":
    from roarfast.cli import main
    with contextlib.redirect_stdout(said):
        main(["doctor"], standalone_mode=False)
import torch
from roarfast import ops  # loads roarfast._C
from roarfast.common import memory
resident = lambda: int(open("/proc/self/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
faults = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_minflt
out = {"state": memory.cache_large_blocks(), "doctor": said.getvalue()}

# one 64-MiB tensor made and freed ten times: the same block back each time, pages already faulted in
block = 64 * 2**20
first = torch.empty(block, dtype=torch.uint8).fill_(1)
address = first.data_ptr()
del first
before, addresses = faults(), []
for _ in range(10):
    t = torch.empty(block, dtype=torch.uint8).fill_(1)
    addresses.append(t.data_ptr())
    del t
out["reuse"] = {"same": all(a == address for a in addresses), "faults": faults() - before,
                "stats": memory.block_cache_stats()}

# one batch's large tensors over and over, small tensors kept between batches (as an extraction keeps its ranks)
memory.release_freed_memory()
small, peaks, start = [], [], memory.block_cache_stats()
for batch in range(40):
    canvases = [torch.empty(37 * 2**20 // 4).fill_(batch) for _ in range(3)]
    acts = torch.empty(9 * 2**20 // 4).fill_(1.0) + canvases[0][: 9 * 2**20 // 4]
    small.append(torch.empty(40 * 1024 // 4).fill_(2.0))  # lives on, between the batches' blocks in a heap
    peaks.append(resident())
    del canvases, acts
out["batches"] = {"peaks": peaks, "start": start, "stats": memory.block_cache_stats()}

# release_freed_memory unmaps what is cached
t = torch.empty(96 * 2**20, dtype=torch.uint8).fill_(1)
del t
cached, before = memory.block_cache_stats()["cached_bytes"], resident()
memory.release_freed_memory()
out["release"] = {"cached": cached, "released": before - resident(), "stats": memory.block_cache_stats()}

# a library's (not torch's) 1-MiB block, three times: glibc's own default would raise its threshold after the first
# free and keep the next ones in the heap
class MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                                                     "fsmblks", "uordblks", "fordblks", "keepcost")]
libc = ctypes.CDLL(None)
libc.mallinfo2.restype = MallInfo2
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = (ctypes.c_size_t,)
libc.free.argtypes = (ctypes.c_void_p,)
base, mapped = libc.mallinfo2().hblkhd, []
for _ in range(3):
    p = libc.malloc(2**20)
    mapped.append(libc.mallinfo2().hblkhd - base)
    libc.free(p)
out["libc"] = {"mapped": mapped, "after": libc.mallinfo2().hblkhd - base}

# computations whose blocks come from the cache: a convolution and its backward (oneDNN's scratch memory goes
# through the allocator's raw interface), matmul, resize, and a DataLoader whose workers are forked while the
# cache holds blocks; their bytes, to compare with torch's own allocator's
torch.manual_seed(0)
x = torch.randn(64, 16, 56, 56, requires_grad=True)
conv = torch.nn.Conv2d(16, 32, 3, padding=1)
y = conv(x)
y.square().sum().backward()
m = torch.randn(512, 1024, generator=torch.Generator().manual_seed(1)) @ torch.ones(1024, 700)
r = torch.zeros(10)
r.resize_(2**20).fill_(3)
data = torch.utils.data.TensorDataset(torch.arange(4096.0).reshape(-1, 1).repeat(1, 512))
loader = torch.utils.data.DataLoader(data, batch_size=512, num_workers=2, multiprocessing_context="fork")
loaded = torch.cat([b[0] for b in loader])
digest = hashlib.sha256()
for t in (y.detach(), x.grad, m, r, loaded):
    digest.update(t.contiguous().numpy().tobytes())
out["compute"] = {"digest": digest.hexdigest(), "stats": memory.block_cache_stats()}
print(json.dumps(out))
"""


def probe(how: str, **env_extra) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    for name in (memory.ENV_VAR, memory.BLOCK_CACHE_ENV_VAR):
        env.pop(name, None)
    env.update(env_extra)
    out = subprocess.run([sys.executable, "-c", PROBES, how], env=env, capture_output=True, text=True, timeout=300,
                         check=False)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def on():
    return probe("direct")


@pytest.fixture(scope="module")
def on_cli():
    return probe("cli")


@pytest.fixture(scope="module")
def off():
    return probe("cli", ROARFAST_BLOCK_CACHE="0")


def test_a_freed_large_block_is_taken_again_with_its_pages(on, on_cli):
    for result in (on, on_cli):  # the tuning made directly, and by a command
        assert result["state"].startswith("on")
        reuse = result["reuse"]
        assert reuse["stats"]["installed"] == 1 and reuse["stats"]["min_bytes"] == memory.BLOCK_CACHE_MIN_BYTES
        # every pass got the first block back, pages faulted in: not a fresh mapping each time
        assert reuse["same"]
        assert reuse["stats"]["hits"] >= 10
        assert reuse["faults"] < (64 * 2**20 // 4096) // 2


def test_repeated_batches_map_their_blocks_once_and_keep_no_more(on):
    batches = on["batches"]
    start, stats, peaks = batches["start"], batches["stats"], batches["peaks"]
    assert stats["maps"] + stats["resizes"] - start["maps"] - start["resizes"] <= 5  # the first batch's blocks
    assert stats["hits"] - start["hits"] >= 39 * 4
    assert stats["in_use_bytes"] + stats["cached_bytes"] <= 1.5 * stats["peak_in_use_bytes"]
    # the resident memory after batch 40 is that after batch 5, give or take the small tensors kept
    assert peaks[-1] - peaks[4] < 16 * 2**20


def test_release_freed_memory_unmaps_the_cached_blocks(on):
    release = on["release"]
    assert release["cached"] >= 96 * 2**20
    assert release["released"] >= 0.9 * 96 * 2**20
    assert release["stats"]["cached_bytes"] == 0


def test_other_large_blocks_are_mapped_on_their_own_and_leave_no_hole(on, off):
    # with the cache, a library's 1-MiB block is mapped each time and unmapped when freed, never a hole in the heap
    assert all(m >= 2**20 for m in on["libc"]["mapped"])
    assert on["libc"]["after"] < 2**20
    # without it, the heap keeps every block (the tuning's no-mmap), as before the cache
    assert off["libc"]["mapped"] == [0, 0, 0]


def test_tensors_from_the_cache_compute_what_torch_s_own_allocator_gives(on, off):
    assert on["compute"]["stats"]["installed"] == 1 and on["compute"]["stats"]["hits"] > 0
    assert off["compute"]["stats"]["installed"] == 0
    assert on["compute"]["digest"] == off["compute"]["digest"]


def test_the_block_cache_can_be_turned_off(off):
    assert off["state"] == "off (ROARFAST_BLOCK_CACHE=0)"
    assert off["reuse"]["stats"]["installed"] == 0 and off["reuse"]["stats"]["hits"] == 0


def test_without_the_malloc_tuning_there_is_no_block_cache():
    # turning the tuning off turns the cache off with it; a library user who never asked for either gets torch as
    # it is
    untuned = probe("direct", ROARFAST_MALLOC_TUNING="off")
    assert untuned["state"].startswith("off") and "freed memory not kept" in untuned["state"]
    assert untuned["reuse"]["stats"]["installed"] == 0
    plain = probe("none")
    assert plain["state"].startswith("not yet") and plain["reuse"]["stats"]["installed"] == 0


def test_doctor_says_whether_the_block_cache_is_on(on_cli, off):
    line = lambda said: next(l for l in said.splitlines() if l.startswith("block cache"))
    assert "on (blocks of 256 KiB and up)" in line(on_cli["doctor"])
    assert "off (ROARFAST_BLOCK_CACHE=0)" in line(off["doctor"])
