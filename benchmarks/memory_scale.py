"""Memory of one streamed ROAR cell, and of an extraction, as the dataset grows (issue 39 item 3): a generated JPEG
tree at each size in --images (streamed: `--data-option stream=true`), generated once under --out, its random ranks,
then one cell (random, ROAR 0.7, one epoch, seed 0) trained in a fresh process that samples its own memory every
20 ms, tagged by phase (loading the data, the training steps, each evaluation, what follows one), split into
anonymous memory (what the process allocated) and file-backed pages (libraries, and before issue 39 the rank store's
memory map), and its exact peak (VmHWM) at the end. Peak RSS per size, its growth per training image from the
size before, and which phase and kind of memory holds it. Then, at each size in --extract-images, `roarfast
extract --method grad` (chunks of 512, 64 images a pass) in a fresh process: its peak RSS (the chunk's, plus the
process and the writer). With --extract-rounds N, the largest of those trees' train split is extracted N times in
one process (as many chunks as a dataset N times larger) and its resident memory, peak and glibc heap are read
after every chunk: whether a long extraction's memory settles or keeps growing.

    python benchmarks/memory_scale.py --out /tmp/roarfast-memory [--images 1000,4000,20000] [--side 224]
        [--extract-images 1000,4000] [--extract-rounds 3] [--model scale_run:small_net]
        [--checkout /path/to/another/roarfast]

--checkout runs the cells with another checkout's roarfast (the trees, base model and ranks are made by this
one), to measure before and after a change. Everything is written under --out, never in the repository; each
size's result is printed (a JSON line) as it comes, and memory.json holds them all.

The default network is benchmarks/scale_run.py's small_net (about 11 MFLOP a 224-px image): the run measures what
the data costs, which a large network's compute would make slow on a few CPU cores; `--model fastnet-small` (or any
built-in) trains a built-in instead. `--model resnet18` (the default model at 224 px) shows the evaluation batch:
the recipe's eval_batch_size images (512 on a CPU) go through the network at once, about 10.5 MiB each for
ResNet-18 at 224 px in float32 on a CPU, so up to 512 validation or test images the peak grows with the dataset,
and beyond it does not.
"""

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SAMPLE_S = 0.02

#: the cell's process: RSS, anonymous and file-backed peaks per phase, as JSON on its last line
TRACER = r'''
import json, os, re, sys, threading, time
run_dir, model = sys.argv[1], sys.argv[2] or None
from roarfast.common import memory
# a checkout from before issue 49 tuned glibc in the process, as each of its stages did; later ones are started with
# their allocator (benchmarks/allocators.py)
getattr(memory, "keep_freed_memory", lambda: None)()
import torch
from roarfast.rundir.directory import RunDir
from roarfast.recipe import effective_recipe
from roarfast.stages.cells import Cell, CellOptions, CellTrainer, cell_model
from roarfast.train import evaluation

phase, peaks = ["start"], {}

def rollup():
    text = open("/proc/self/smaps_rollup").read()
    field = lambda name: int(re.search(name + r":\s+(\d+)", text).group(1)) * 1024
    return field("Rss"), field("Anonymous")

def sample():
    while True:
        rss, anon = rollup()
        best = peaks.get(phase[0])
        if best is None or rss > best["rss"]:
            peaks[phase[0]] = {"rss": rss, "anon": anon, "file": rss - anon}
        time.sleep(SAMPLE_S)

def tagged(function, name):
    def run(*args, **kwargs):
        phase[0] = name if isinstance(name, str) else name(args)
        try:
            return function(*args, **kwargs)
        finally:  # the heap keeps what an evaluation freed: later samples are not the training steps'
            phase[0] = "after an evaluation"
    return run

threading.Thread(target=sample, daemon=True).start()
run = RunDir(run_dir)
phase[0] = "load data"
ds = run.open_dataset(None, None, None)
spec = cell_model(run, ds, "cpu", model)
recipe = effective_recipe(spec, "cpu", ds, CellOptions(model=model, epochs=1))
trainer = CellTrainer(run, ds, spec, recipe, "dataset-mean", "cpu")
trainer.check_ranks(["random"])
evaluation.member_accuracies = tagged(evaluation.member_accuracies, lambda args: f"evaluate {len(args[2])} images")
phase[0] = "train"
started = time.perf_counter()
trainer.train(Cell("random", "roar", 0.7, 0))
seconds = time.perf_counter() - started
time.sleep(3 * SAMPLE_S)
status = open("/proc/self/status").read()
hwm = int(re.search(r"VmHWM:\s+(\d+)", status).group(1)) * 1024
print(json.dumps({"phases": peaks, "hwm": hwm, "train": len(ds.train), "val": len(ds.val_index), "test": len(ds.test),
                  "eval_batch": recipe.eval_batch_size, "batch": recipe.batch_size, "cell_s": round(seconds, 1)}))
'''.replace("SAMPLE_S", repr(SAMPLE_S))


#: one process extracting a split `rounds` times over (`extract --force`, as many chunks as a larger dataset's):
#: after each chunk written, its RSS, exact peak (VmHWM), glibc's main heap (its span and the bytes in use) and the
#: block cache's counters, as JSON on its last line
ROUNDS_TRACER = r"""
import ctypes, json, re, sys
run_dir, tree, model, rounds = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
from roarfast.cli import main
from roarfast.common import memory
from roarfast.store import writer

class MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                                                     "fsmblks", "uordblks", "fordblks", "keepcost")]

libc = ctypes.CDLL(None)
libc.mallinfo2.restype = MallInfo2
samples = []
write_chunk = writer.RankWriter.write_chunk

def traced(self, *args, **kwargs):
    write_chunk(self, *args, **kwargs)
    status, heap = open("/proc/self/status").read(), libc.mallinfo2()
    kib = lambda name: int(re.search(name + r":\s+(\d+)", status).group(1)) * 1024
    sample = {"rss": kib("VmRSS"), "hwm": kib("VmHWM"), "heap": heap.arena, "in_use": heap.uordblks}
    # the block cache's large blocks (a checkout that has one): in use, kept cached, and how many were mapped
    stats = getattr(memory, "block_cache_stats", dict)()
    if stats.get("installed"):
        sample.update(blocks=stats["in_use_bytes"], cached=stats["cached_bytes"], maps=stats["maps"])
    samples.append(sample)

writer.RankWriter.write_chunk = traced
for _ in range(rounds):
    main(["extract", "--run-dir", run_dir, "--dataset", "imagefolder", "--data-dir", tree, "--data-option",
          "stream=true", "--model", model, "--method", "grad", "--force", "--split", "train", "--batch-size", "64",
          "--chunk-images", "512", "--no-progress"], standalone_mode=False)
print(json.dumps(samples))
"""

def prepare(out: Path, images: int, side: int, model: str) -> Path:
    """The tree of `images` JPEGs, a run directory with small_net's untrained weights adopted (or `model` trained for
    no epoch: adopted the same way) and random's ranks; returns the run directory (made once)."""
    import torch

    import scale_run
    from roarfast.records.checkpoint import weights_bytes

    tree, run = out / f"tree-{images}-{side}", out / f"run-{images}-{side}-{model.replace(':', '_')}"
    scale_run.generate_tree(tree, images, side)
    if (run / "ready").exists():
        return run
    torch.manual_seed(0)
    weights = out / f"untrained-{side}-{model.replace(':', '_')}.safetensors"
    if model == scale_run.MODEL:
        net = scale_run.small_net(scale_run.CLASSES, side, 3)
    else:
        from roarfast.models import resolve_model

        net = resolve_model(model).build(scale_run.CLASSES, side, 3)
    weights.write_bytes(weights_bytes(net, model))
    data = ["--dataset", "imagefolder", "--data-dir", str(tree), "--data-option", "stream=true", "--model", model]
    for args in (["train", "--weights", str(weights)], ["extract", "--method", "random", "--batch-size", "64"]):
        subprocess.run([sys.executable, "-m", "roarfast.cli", args[0], "--run-dir", str(run), *data, *args[1:],
                        "--no-progress"], check=True, stdout=subprocess.DEVNULL)
    (run / "ready").write_text("")
    return run


def measure(run: Path, model: str, checkout: Path) -> dict:
    """One cell in a fresh process importing `checkout`'s roarfast: its phases' peaks (bytes) and sizes."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(checkout), str(ROOT / "benchmarks")])}
    model_arg = model if model.count(":") else ""  # a plug-in is named again; a built-in is the run's own
    done = subprocess.run([sys.executable, "-c", TRACER, str(run), model_arg], env=env, check=True,
                          capture_output=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def extraction(run: Path, size: int, side: int, model: str, checkout: Path) -> dict:
    """`roarfast extract --method grad --force` on the run of `size` images in a fresh process (`checkout`'s
    roarfast), under /usr/bin/time: its peak RSS (bytes) and seconds."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(checkout), str(ROOT / "benchmarks")])}
    tree = run.parent / f"tree-{size}-{side}"
    command = ["/usr/bin/time", "-f", "%M %e", sys.executable, "-m", "roarfast.cli", "extract", "--run-dir", str(run),
               "--dataset", "imagefolder", "--data-dir", str(tree), "--data-option", "stream=true", "--model", model,
               "--method", "grad", "--force", "--batch-size", "64", "--chunk-images", "512", "--no-progress"]
    done = subprocess.run(command, env=env, check=True, capture_output=True, text=True)
    kib, seconds = done.stderr.strip().splitlines()[-1].split()
    return {"extract": size, "peak": int(kib) * 1024, "seconds": float(seconds)}


def extraction_rounds(run: Path, size: int, side: int, model: str, rounds: int, checkout: Path) -> dict:
    """The train split of the run of `size` images extracted `rounds` times in one process (`checkout`'s roarfast):
    its samples after each chunk (ROUNDS_TRACER) and its seconds, the process's start included."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(checkout), str(ROOT / "benchmarks")])}
    tree = run.parent / f"tree-{size}-{side}"
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", ROUNDS_TRACER, str(run), str(tree), model, str(rounds)], env=env,
                          check=True, capture_output=True, text=True)
    return {"rounds": rounds, "size": size, "seconds": round(time.perf_counter() - started, 1),
            "samples": json.loads(done.stdout.strip().splitlines()[-1])}

def mib(value: float) -> str:
    return f"{value / 2**20:,.0f}"


def table(results: list) -> str:
    """Markdown: per checkout and size the exact peak RSS (VmHWM), the sampled peaks of its phases (the data
    loaded, the training steps, the largest evaluation), anonymous and file-backed memory at the peak, and the
    growth of the peak per training image from the size before."""
    lines = ["| roarfast | images (train / val / test) | eval batch | peak RSS MiB | load data | training steps "
             "| largest evaluation | anonymous / file-backed at the peak | growth per training image | cell s |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    before = {}
    for result in results:
        phases = result["phases"]
        at = max(phases, key=lambda name: phases[name]["rss"])
        evals = [p["rss"] for name, p in phases.items() if name.startswith("evaluate")]
        steps = [p["rss"] for name, p in phases.items() if name == "train"]
        last = before.get(result["checkout"])
        growth = "-" if last is None else \
            f"{(result['hwm'] - last['hwm']) / (result['train'] - last['train']) / 1024:,.1f} KiB"
        before[result["checkout"]] = result
        evaluated = min(result["eval_batch"], max(result["val"], result["test"]))
        lines.append(f"| {result['checkout']} | {result['train']:,} / {result['val']:,} / {result['test']:,} | "
                     f"{evaluated} | {mib(result['hwm'])} | {mib(phases.get('load data', {'rss': 0})['rss'])} | "
                     f"{mib(max(steps)) if steps else '-'} | {mib(max(evals)) if evals else '-'} | "
                     f"{mib(phases[at]['anon'])} / {mib(phases[at]['file'])} | {growth} | {result['cell_s']} |")
    return "\n".join(lines)


def extraction_table(results: list) -> str:
    """Markdown: per checkout and size an extraction's peak RSS and its growth per image from the size before."""
    lines = ["| roarfast | images | peak RSS MiB | growth per image | seconds |", "| --- | --- | --- | --- | --- |"]
    before = {}
    for result in results:
        last = before.get(result["checkout"])
        growth = "-" if last is None else \
            f"{(result['peak'] - last['peak']) / (result['extract'] - last['extract']) / 1024:,.1f} KiB"
        before[result["checkout"]] = result
        lines.append(f"| {result['checkout']} | {result['extract']:,} | {mib(result['peak'])} | {growth} | "
                     f"{result['seconds']:.0f} |")
    return "\n".join(lines)


def rounds_table(results: list) -> str:
    """Markdown: per checkout, at the end of each round (and at a third of the first), the chunks written, the RSS,
    the peak RSS so far, the heap's span and the bytes in use in it."""
    lines = ["| roarfast | chunks written | RSS MiB | peak RSS so far MiB | heap's span MiB | in use MiB | "
             "block cache: in use / cached MiB, mappings |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for result in results:
        samples = result["samples"]
        per_round = len(samples) // result["rounds"]
        for end in sorted({max(1, per_round // 3), *range(per_round, len(samples) + 1, per_round)}):
            sample = samples[end - 1]
            blocks = (f"{mib(sample['blocks'])} / {mib(sample['cached'])}, {sample['maps']}" if "blocks" in sample
                      else "-")
            lines.append(f"| {result['checkout']} | {end} | {mib(sample['rss'])} | {mib(sample['hwm'])} | "
                         f"{mib(sample['heap'])} | {mib(sample['in_use'])} | {blocks} |")
    return "\n".join(lines)

def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True, help="where the trees and runs go (not the repository)")
    parser.add_argument("--images", default="1000,4000,20000", help="comma-separated tree sizes (train + test images) whose cell is measured (empty: none)")
    parser.add_argument("--extract-images", default="1000,4000",
                        help="comma-separated tree sizes whose extraction is measured (empty: none)")
    parser.add_argument("--extract-rounds", type=int, default=0,
                        help="the largest --extract-images tree's train split extracted this many times in one "
                             "process, its memory after each chunk (0: not run)")
    parser.add_argument("--side", type=int, default=224)
    parser.add_argument("--model", default="scale_run:small_net")
    parser.add_argument("--checkout", type=Path, action="append", default=[],
                        help="another checkout whose roarfast trains the cells too (repeatable)")
    args = parser.parse_args()
    out = args.out.resolve()
    if out.is_relative_to(ROOT):
        raise SystemExit(f"--out {out} lies in the repository: give a folder outside it (e.g. /tmp/roarfast-memory)")
    out.mkdir(parents=True, exist_ok=True)
    os.environ["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(ROOT / "benchmarks"), os.environ.get("PYTHONPATH", "")])
    sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]
    sizes = [int(size) for size in args.images.split(",") if size]
    extract_sizes = [int(size) for size in args.extract_images.split(",") if size]
    runs = {size: prepare(out, size, args.side, args.model) for size in dict.fromkeys(sizes + extract_sizes)}
    results, extractions = [], []
    checkouts = [*(path.resolve() for path in args.checkout), ROOT]
    for checkout in checkouts:
        for size in sizes:
            result = measure(runs[size], args.model, checkout)
            result["checkout"] = "this" if checkout == ROOT else str(checkout)
            results.append(result)
            print(json.dumps(result), flush=True)
    for checkout in checkouts:
        for size in extract_sizes:
            result = extraction(runs[size], size, args.side, args.model, checkout)
            result["checkout"] = "this" if checkout == ROOT else str(checkout)
            extractions.append(result)
            print(json.dumps(result), flush=True)
    rounds = []
    if args.extract_rounds and extract_sizes:
        for checkout in checkouts:
            size = max(extract_sizes)
            result = extraction_rounds(runs[size], size, args.side, args.model, args.extract_rounds, checkout)
            result["checkout"] = "this" if checkout == ROOT else str(checkout)
            rounds.append(result)
            print(json.dumps({key: value for key, value in result.items() if key != "samples"}), flush=True)
    header = (f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, load average "
              f"{os.getloadavg()[0]:.1f}; {args.model} at {args.side} px; "
              f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    (out / "memory.json").write_text(json.dumps({"header": header, "results": results, "extractions": extractions,
                                                "rounds": rounds},
                                                indent=2))
    print(header)
    if results:
        print(table(results))
    if extractions:
        print()
        print(extraction_table(extractions))
    if rounds:
        print()
        print(rounds_table(rounds))


if __name__ == "__main__":
    main()
