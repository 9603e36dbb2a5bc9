"""roarfast.common.memory: the `roarfast` command starts again, once, with a well-kept allocator preloaded (or glibc
tuned by GLIBC_TUNABLES where none is found); a user's LD_PRELOAD and ROARFAST_ALLOCATOR=0 are kept; nothing changes
the allocator of a running process, so a notebook's oneDNN tensors and a memory profiler survive a stage; glibc's
free heap pages are handed back between units of work.

The re-execution is checked in fresh interpreters: it replaces the process.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from roarfast.common import memory
from roarfast.errors import UserError

ROOT = Path(__file__).resolve().parents[1]
BLOCK = 64 * 2**20  # far above glibc's default mmap threshold (128 KiB, at most 32 MiB when it adapts)
FOUND = {name: memory.find_allocator(name) for name in memory.ALLOCATORS}
FIRST = next(filter(None, FOUND.values()), None)

pytestmark = pytest.mark.skipif(memory.glibc() is None, reason="the allocator is chosen for Linux with glibc")
needs_allocator = pytest.mark.skipif(FIRST is None, reason="no jemalloc, tcmalloc or mimalloc installed here")

# As the `roarfast` command's process (its argv[0]): says it started, asks for the allocator, and reports what this
# process has. Started again, the interpreter runs this same program, so each start prints one "started" line.
PROBE = r"""
import ctypes, json, os, sys
sys.argv[0] = "roarfast"
print("started", flush=True)
from roarfast.common import memory
memory.preload_allocator()
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = (ctypes.c_size_t,)
maps = open("/proc/self/maps").read()
print(json.dumps({"allocator": memory.allocator(), "glibc_serves": memory.serves_malloc_itself(),
                  "env": {k: os.environ.get(k) for k in ("LD_PRELOAD", "GLIBC_TUNABLES", memory.APPLIED_VAR)},
                  "mapped": {name: any(f in maps for f in files) for name, files in memory.ALLOCATORS.items()}}))
"""


def start(env_changes: dict, program: str = PROBE, timeout: int = 120):
    """Runs `program` in a fresh interpreter with the environment changed (None: removed); its "started" lines, its
    last line as JSON, its stderr."""
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    for name in ("LD_PRELOAD", "GLIBC_TUNABLES", memory.ENV_VAR, memory.APPLIED_VAR):
        env.pop(name, None)
    env.update({k: v for k, v in env_changes.items() if v is not None})
    done = subprocess.run([sys.executable, "-c", program], env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    return lines.count("started"), json.loads(lines[-1]), done.stderr


@needs_allocator
def test_the_command_starts_again_once_with_the_first_allocator_found():
    starts, probe, _ = start({})
    assert starts == 2  # itself, then once more with the allocator
    assert probe["env"]["LD_PRELOAD"] == str(FIRST)
    assert probe["mapped"][next(name for name, path in FOUND.items() if path == FIRST)]
    assert not probe["glibc_serves"]  # malloc is the preloaded one's
    assert probe["allocator"] == f"{FIRST.resolve()} (preloaded)" or probe["allocator"].startswith(str(FIRST))


def test_a_command_started_again_never_starts_again_even_where_the_loader_refused_the_library(tmp_path):
    # a "library" the dynamic loader cannot load (it says so and goes on without it): without the mark the command
    # would find no allocator in itself and start again, for ever
    fake = tmp_path / "libjemalloc.so.2"
    fake.write_text("not a shared library")
    starts, probe, stderr = start({memory.ENV_VAR: str(fake)})
    assert starts == 2
    assert probe["env"][memory.APPLIED_VAR] == str(fake)
    assert stderr.count("cannot be preloaded") == 1  # the loader's own line, from the one start that asked
    assert probe["glibc_serves"]


@needs_allocator
def test_a_user_set_ld_preload_is_kept():
    other = next((path for path in FOUND.values() if path and path != FIRST), FIRST)
    starts, probe, _ = start({"LD_PRELOAD": str(other)})
    assert starts == 1
    assert probe["env"]["LD_PRELOAD"] == str(other) and probe["env"][memory.APPLIED_VAR] is None
    assert [name for name, on in probe["mapped"].items() if on] == [n for n, p in FOUND.items() if p == other]


@pytest.mark.parametrize("value", ["0", "off"])
def test_roarfast_allocator_0_keeps_the_process_as_started(value):
    starts, probe, _ = start({memory.ENV_VAR: value})
    assert starts == 1
    assert probe["env"] == {"LD_PRELOAD": None, "GLIBC_TUNABLES": None, memory.APPLIED_VAR: None}
    assert probe["glibc_serves"] and probe["allocator"] == "glibc, untuned"


# glibc's own accounting while one BLOCK is held, and the resident memory that release_freed_memory hands back once
# it is freed (a small block after it keeps it from being the heap's top)
HEAP = PROBE + r"""
class MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks",
                 "keepcost")]
libc.mallinfo2.restype = MallInfo2
libc.free.argtypes = (ctypes.c_void_p,)
resident = lambda: int(open("/proc/self/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
before = libc.mallinfo2().hblkhd
p = libc.malloc(BLOCK)
mapped = libc.mallinfo2().hblkhd - before
guard = libc.malloc(4096)
ctypes.memset(p, 1, BLOCK)
libc.free(p)
held = resident()
memory.release_freed_memory()
print(json.dumps({"mapped_on_its_own": mapped, "released": held - resident(), "tunables": os.environ.get("GLIBC_TUNABLES")}))
""".replace("BLOCK", str(BLOCK))


@pytest.mark.skipif(not hasattr(memory.glibc(), "mallinfo2"), reason="mallinfo2: glibc >= 2.33")
def test_glibc_is_tuned_by_environment_before_the_process_starts_and_hands_freed_pages_back():
    starts, heap, _ = start({memory.ENV_VAR: "glibc"}, HEAP)
    assert starts == 2 and heap["tunables"] == memory.GLIBC_TUNABLES
    assert heap["mapped_on_its_own"] == 0  # the block came from the heap, so freeing it keeps it for the next
    assert heap["released"] >= 0.9 * BLOCK  # until release_freed_memory hands it back
    _, untuned, _ = start({memory.ENV_VAR: "0"}, HEAP)
    assert untuned["mapped_on_its_own"] >= BLOCK  # glibc's default, which the tunables change


def test_without_an_allocator_glibc_is_tuned_and_a_users_own_tunables_win(monkeypatch):
    monkeypatch.setattr(memory, "find_allocator", lambda name: None)
    assert memory.chosen_environment({}) == {"GLIBC_TUNABLES": memory.GLIBC_TUNABLES, memory.APPLIED_VAR: "glibc"}
    assert memory.chosen_environment({"GLIBC_TUNABLES": "glibc.pthread.rseq=0"})["GLIBC_TUNABLES"] == \
        "glibc.pthread.rseq=0:" + memory.GLIBC_TUNABLES
    assert "GLIBC_TUNABLES" not in memory.chosen_environment({"GLIBC_TUNABLES": "glibc.malloc.arena_max=2"})


def test_a_named_allocator_that_is_missing_is_refused_in_one_line(monkeypatch, tmp_path):
    monkeypatch.setattr(memory, "find_allocator", lambda name: None)
    for value in ("tcmalloc", str(tmp_path / "libnothing.so")):
        with pytest.raises(UserError, match=f"^{memory.ENV_VAR}={value}: no such allocator library") as err:
            memory.chosen_environment({memory.ENV_VAR: value})
        assert "\n" not in str(err.value)


@needs_allocator
def test_the_launcher_starts_a_command_with_the_allocator():
    done = subprocess.run([sys.executable, "-m", "roarfast.common.memory", sys.executable, "-c",
                           "print(open('/proc/self/maps').read())"], capture_output=True, text=True, timeout=120,
                          env={k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", memory.ENV_VAR,
                                                                                memory.APPLIED_VAR)}
                          | {"PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    assert str(FIRST.resolve()) in done.stdout


@needs_allocator
def test_the_cli_reports_the_allocator_it_started_with():
    env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", memory.ENV_VAR, memory.APPLIED_VAR)}
    done = subprocess.run([sys.executable, "-m", "roarfast.cli", "doctor"], capture_output=True, text=True,
                          timeout=300, env=env | {"PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    assert [line for line in done.stdout.splitlines() if line.startswith("malloc")] == \
        [f"malloc       {FIRST.resolve()} (preloaded)"]
    assert done.stdout.count("roarfast     ") == 1  # one report: the first start printed nothing


# A notebook's state, made before a stage: a oneDNN tensor (as a frozen or prepacked CPU model holds) and a tensor
# under a memory profiler; a stage runs (train, extract); both are freed after it. The profiler must see the free.
NOTEBOOK = r"""
import json, sys, torch
from torch.profiler import ProfilerActivity, profile
from roarfast.data import load_dataset
from roarfast.stages.basemodel import TrainOptions, run_train
from roarfast.stages.extract import ExtractOptions, run_extract

prepacked = torch.randn(512, 1024).to_mkldnn()
with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
    held = torch.ones(2**20)  # 4 MiB, made before the stage
    ds = load_dataset("embedded", num_train=40, num_test=20)
    run_train(sys.argv[1], TrainOptions(model="fastnet", epochs=1, batch_size=8), dataset_obj=ds, device="cpu",
              progress=False)
    run_extract(sys.argv[1], ExtractOptions(methods="grad", batch_size=8), dataset_obj=ds, device="cpu",
                progress=False)
    del held
    del prepacked
# an allocation is counted on the op that made it, a free outside any op as a "[memory]" event of its own
events = prof.events()
print(json.dumps({"allocated": sum(e.self_cpu_memory_usage == 4 * 2**20 for e in events),
                  "freed": sum(e.name == "[memory]" and e.cpu_memory_usage == -4 * 2**20 for e in events)}))
"""


@pytest.mark.parametrize("started_with", ["as started", "the CLI's allocator"])
def test_a_notebooks_onednn_tensors_and_memory_profiler_survive_a_stage(tmp_path, started_with):
    changes = memory.chosen_environment({}) if started_with != "as started" else {}
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""), **changes}
    done = subprocess.run([sys.executable, "-c", NOTEBOOK, str(tmp_path / "run")], env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]  # no abort when the oneDNN tensor is freed
    counts = json.loads(done.stdout.strip().splitlines()[-1])
    assert counts["allocated"] >= 1 and counts["freed"] >= 1  # the block made before the stage, and its free


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
    # before the first batch, for the training steps' blocks, and after the last, for the evaluation's; after a
    # batch only when its inputs are large: small batches keep their blocks for the next, which re-faulting would slow
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
