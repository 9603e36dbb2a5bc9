"""roarfast.common.memory: on glibc, a freed large block stays in the process and is reused (no fresh mmap, no
page faults on reuse); ROARFAST_MALLOC_TUNING=0 leaves glibc's defaults; the CLI and run_extract apply it. These
are the heap's own keeping, checked with the block cache off (ROARFAST_BLOCK_CACHE=0); with it, the large blocks
are torch's and the cache's: tests/test_block_cache.py.

Each check runs in a fresh interpreter, since the tuning is process-wide and applies once.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from roarfast.common import memory
ROOT = Path(__file__).resolve().parents[1]
BLOCK = 64 * 2**20  # far above glibc's default mmap threshold (128 KiB, at most 32 MiB when it adapts)
PASSES = 10
PAGES = BLOCK // 4096

pytestmark = pytest.mark.skipif(memory.glibc() is None or not hasattr(memory.glibc(), "mallinfo2"),
                                reason="the tuning is for glibc (mallinfo2: glibc >= 2.33)")

# Applies the tuning the way `how` says, then mallocs one BLOCK, fills it, frees it, PASSES times and
# reports glibc's own accounting (mallinfo2) and the process's minor page faults.
PROBE = r"""
import ctypes, json, resource, sys
how, block, passes = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
state = None
if how == "direct":
    from roarfast.common.memory import keep_freed_memory
    state = keep_freed_memory()
elif how == "cli":
    from roarfast.cli import main
    main(["doctor"], standalone_mode=False)
elif how == "run_extract":
    from roarfast.errors import UserError
    from roarfast.stages.extract import ExtractOptions, run_extract
    try:
        run_extract(sys.argv[4], ExtractOptions(methods="no-such-method"), device="cpu")
    except UserError:
        pass


class MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks",
                 "keepcost")]


libc = ctypes.CDLL(None)
libc.mallinfo2.restype = MallInfo2
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = (ctypes.c_size_t,)
libc.free.argtypes = (ctypes.c_void_p,)
before = libc.mallinfo2()
p = libc.malloc(block)
held = libc.mallinfo2()
ctypes.memset(p, 1, block)
libc.free(p)
freed = libc.mallinfo2()
faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(passes):
    p = libc.malloc(block)
    ctypes.memset(p, 1, block)
    libc.free(p)
faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults
print(json.dumps({"state": state, "mmapped_while_held": held.hblkhd - before.hblkhd,
                  "free_in_heap_after": freed.fordblks, "faults": faults}))
"""


def probe(how, *args, tuning=None):
    # the heap's own keeping, without the block cache (with it, glibc maps large blocks on their own again, and
    # torch's come from the cache: tests/test_block_cache.py)
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
           memory.BLOCK_CACHE_ENV_VAR: "0"}
    env.pop(memory.ENV_VAR, None)
    if tuning is not None:
        env[memory.ENV_VAR] = tuning
    out = subprocess.run([sys.executable, "-c", PROBE, how, str(BLOCK), str(PASSES), *map(str, args)], env=env, capture_output=True,
                         text=True, timeout=300, check=False)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def assert_kept(result):
    assert result["mmapped_while_held"] == 0  # served from the heap, not a fresh mmap
    assert result["free_in_heap_after"] >= BLOCK  # and kept there after free
    assert result["faults"] < 2 * PAGES  # so the passes reuse pages already mapped: at most one pass faults


def test_tuning_keeps_freed_block_in_the_process():
    result = probe("direct")
    assert result["state"] == "on"
    assert_kept(result)


def test_untuned_glibc_maps_and_unmaps_every_block():
    # the reference behaviour the tuning removes: every pass pays a fresh mapping's faults
    result = probe("none")
    assert result["mmapped_while_held"] >= BLOCK
    assert result["faults"] >= (PASSES - 1) * PAGES


@pytest.mark.parametrize("value", ["0", "off"])
def test_env_var_turns_it_off(value):
    result = probe("direct", tuning=value)
    assert result["state"] == f"off ({memory.ENV_VAR}={value})"
    assert result["mmapped_while_held"] >= BLOCK
    assert result["faults"] >= (PASSES - 1) * PAGES


def test_cli_command_applies_it():
    assert_kept(probe("cli"))


def test_cli_command_respects_env_var():
    assert probe("cli", tuning="0")["mmapped_while_held"] >= BLOCK


def test_run_extract_applies_it(tmp_path):
    assert_kept(probe("run_extract", tmp_path))


# Frees a BLOCK in the middle of the heap (a small block after it keeps it from being the heap's top), then asks
# release_freed_memory to hand it back, and reports the process's resident pages before and after.
RELEASE = r"""
import ctypes, json, os, sys
from roarfast.common import memory
state = memory.keep_freed_memory()
block = int(sys.argv[1])
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = (ctypes.c_size_t,)
libc.free.argtypes = (ctypes.c_void_p,)
page = os.sysconf("SC_PAGE_SIZE")
resident = lambda: int(open("/proc/self/statm").read().split()[1]) * page
p = libc.malloc(block)
guard = libc.malloc(4096)
ctypes.memset(p, 1, block)
libc.free(p)
before = resident()
memory.release_freed_memory()
print(json.dumps({"state": state, "released": before - resident()}))
"""


def test_release_hands_a_freed_block_back_to_the_system():
    # kept for reuse between batches, given back between chunks: the resident memory falls by the block
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
           memory.BLOCK_CACHE_ENV_VAR: "0"}
    env.pop(memory.ENV_VAR, None)
    out = subprocess.run([sys.executable, "-c", RELEASE, str(BLOCK)], env=env, capture_output=True, text=True,
                         timeout=300, check=True)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["state"] == "on"
    assert result["released"] >= 0.9 * BLOCK


def test_release_does_nothing_where_the_process_did_not_tune(monkeypatch):
    # glibc's own defaults stay untouched: no trim unless this process made the tuning
    calls = []

    class FakeLibc:
        def malloc_trim(self, pad):
            calls.append(pad)

    monkeypatch.setattr(memory, "glibc", lambda: FakeLibc())
    for state in (None, f"off ({memory.ENV_VAR}=0)", "not glibc (unchanged)"):
        monkeypatch.setattr(memory, "_state", state)
        memory.release_freed_memory()
    assert calls == []
    monkeypatch.setattr(memory, "_state", "on")
    memory.release_freed_memory()
    assert calls == [0]



class _Batches:
    """A loader of `n` random 3x8x8 images in batches, as member_accuracies reads one."""

    device = __import__("torch").device("cpu")

    def __init__(self, n):
        import torch
        self.x, self.y = torch.randn(n, 3, 8, 8), torch.zeros(n, dtype=torch.int64)

    def batches(self, index, batch_size, shard=(0, 1)):
        for start in range(0, index.shape[0], batch_size):
            rows = index[start:start + batch_size]
            yield self.x[rows], self.y[rows]


@pytest.mark.parametrize("threshold, after_batches", [(1, 3), (2**40, 0)])
def test_an_evaluation_hands_back_before_and_after_and_after_its_large_batches_only(monkeypatch, threshold,
                                                                                      after_batches):
    # everything (heap and cached blocks) before the first batch, for the training steps' blocks, and after the
    # last, for the evaluation's; after a batch only when its inputs are large: small batches keep their blocks for
    # the next, which re-faulting would slow
    import torch
    from roarfast.recipe import Recipe
    from roarfast.train import evaluation

    calls = []
    monkeypatch.setattr(evaluation, "release_freed_memory", lambda: calls.append("release"))
    monkeypatch.setattr(memory, "release_freed_memory", lambda: calls.append("after a batch"))
    monkeypatch.setattr(memory, "HAND_BACK_BATCH_BYTES", threshold)
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * 8 * 8, 2))
    loader = _Batches(12)
    accuracy = evaluation.member_accuracies(model, [loader], torch.arange(12), Recipe(eval_batch_size=5))
    assert calls == ["release"] + ["after a batch"] * after_batches + ["release"]  # 12 images, batches of 5: three
    with torch.no_grad():  # and the batches freed early are still all counted
        assert accuracy == [int((model(loader.x).argmax(1) == 0).sum()) / 12]
