"""The quick preset's cells on a CPU: what one retraining cell of `roarfast run` costs under other network
widths, dataset sizes and epochs, and whether two single-thread processes side by side beat one process of two
threads. Every measurement is a fresh process (its thread count set before torch starts any) training random
ROAR at 0.5 on the embedded dataset, as the run's cells do; variants are interleaved over the repetitions, so
that the machine's load falls on each alike.

    python benchmarks/quick_cells.py [--variants w16-32-64/n5000/e3,w8-16-32/n3000/e3] [--repeats 3]
                                     [--amp off|bf16] [--pairs] [--md out.md]

A variant is `w<widths>/n<train images>/e<epochs>[/b<batch>][/l<lr>][/d<EMA decay>]` (test images: a fifth of
train; other fields: fastnet's recipe). Per variant: the CPU time (user + sys) of one cell in a single-thread
process (steadier than wall time on a shared machine), its wall time at 1 and 2 threads and its test accuracy
(two cells a repetition); with --pairs, the wall time of two cells in two single-thread processes at once against
the same two cells one after the other in one process of two threads. `roarfast run`'s cells (fastnet-small,
demo.RUN_DATA, 3 epochs) are `w8-16-32/n1500/e3/b24/d0.9`.
"""

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

FRACTION = 0.5


def parse_variant(text: str) -> dict:
    """{"widths", "train", "test", "epochs", "batch", "recipe"} of `w16-32-64/n5000/e3`; optional: `/b<batch>`,
    `/l<lr>`, `/d<EMA decay>` (d0: no EMA), each the recipe's where not given."""
    parts = dict((p[0], p[1:]) for p in text.split("/"))
    train = int(parts["n"])
    return {"widths": tuple(int(w) for w in parts["w"].split("-")), "train": train, "test": max(10, train // 5),
            "epochs": int(parts["e"]), "batch": int(parts["b"]) if "b" in parts else None,
            "recipe": {**({"lr": float(parts["l"])} if "l" in parts else {}),
                       **({"ema_decay": float(parts["d"]) or None} if "d" in parts else {})}}


def train_cell(variant: dict, amp: str | None, seed: int, cells: int) -> dict:
    """Trains `cells` cells (seeds seed..) of `variant` in this process; the CPU and wall seconds of each,
    the data set-up and one untimed 1-epoch warm-up excluded (a sweep's process trains cell after cell)."""
    import torch

    from roarfast import ops
    from roarfast.data import load_dataset
    from roarfast.models.fastnet import FastNet
    from roarfast.models.spec import ModelSpec
    from roarfast.recipe import DataSize, effective_recipe
    from roarfast.stages.basemodel import TrainOptions
    from roarfast.train import Masking, train_classifier

    ds = load_dataset("embedded", num_train=variant["train"], num_test=variant["test"])
    spec = ModelSpec(name="bench", factory=lambda n, size, c: FastNet(n, c, variant["widths"]))
    recipe = effective_recipe("fastnet", "cpu", DataSize(len(ds.train_index), 32),
                              TrainOptions(epochs=variant["epochs"], batch_size=variant["batch"],
                                           recipe=variant["recipe"])).replace(amp=amp)
    ranks = [ops.rank(torch.rand(len(split), 32, 32, generator=torch.Generator().manual_seed(s)))
             for split, s in ((ds.train, 1), (ds.test, 2))]
    masking = Masking(train_ranks=ranks[0], test_ranks=ranks[1], fraction=FRACTION)
    train_classifier(ds, spec, recipe.replace(epochs=1), "cpu", seed=99, masking=masking, progress=False)
    out = []
    for k in range(cells):
        cpu, wall = time.process_time(), time.perf_counter()
        result = train_classifier(ds, spec, recipe, "cpu", seed=seed + k, masking=masking, progress=False)
        out.append({"cpu": time.process_time() - cpu, "wall": time.perf_counter() - wall,
                    "test_acc": result.test_acc})
    return {"cells": out, "end": time.perf_counter()}


def worker(variant: str, threads: int, amp: str | None, seed: int = 0, cells: int = 1,
           barrier: Path | None = None) -> subprocess.Popen:
    """A fresh process training `cells` cells at `threads` threads; its result is the JSON on its stdout."""
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    return subprocess.Popen([sys.executable, __file__, "--worker", variant, "--amp", amp or "off", "--seed", str(seed),
                             "--cells", str(cells)], env=env, stdout=subprocess.PIPE, text=True)


def result(proc: subprocess.Popen) -> dict:
    out, _ = proc.communicate()
    if proc.returncode:
        raise SystemExit(f"a worker failed (exit {proc.returncode})")
    return json.loads(out.strip().splitlines()[-1])


def measure(variants: list[str], repeats: int, amp: str | None, pairs: bool) -> dict:
    """{variant: {"cpu1", "wall1", "wall2", "acc", ("pair", "serial")}: lists over the repetitions}."""
    rows = {v: {"cpu1": [], "wall1": [], "wall2": [], "acc": [], "pair": [], "serial": []} for v in variants}
    for rep in range(repeats):
        for v in variants:
            one = result(worker(v, 1, amp, seed=rep))["cells"][0]
            two = result(worker(v, 2, amp, seed=rep))["cells"][0]
            rows[v]["cpu1"].append(one["cpu"])
            rows[v]["wall1"].append(one["wall"])
            rows[v]["wall2"].append(two["wall"])
            rows[v]["acc"] += [one["test_acc"], two["test_acc"]]
            if pairs:
                # two single-thread processes at once (their warm-ups overlap; each times its own cell)
                side = [worker(v, 1, amp, seed=rep + k) for k in range(2)]
                rows[v]["pair"].append(max(c["wall"] for p in side for c in result(p)["cells"]))
                rows[v]["serial"].append(sum(c["wall"] for c in result(worker(v, 2, amp, seed=rep, cells=2))["cells"]))
    return rows


def render(rows: dict, args) -> str:
    load = os.getloadavg()
    lines = [f"`python benchmarks/quick_cells.py` on {platform.machine()} ({os.cpu_count()} cores), amp "
             f"{args.amp}, {args.repeats} repetitions interleaved; load average at the end "
             f"{load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f}.", "",
             "| variant | CPU s per cell, 1 thread | wall s, 1 thread | wall s, 2 threads | test acc (random ROAR "
             "0.5) |" + (" 2 cells: 2 x 1 thread at once | 2 cells: 1 x 2 threads in turn | ratio |"
                         if args.pairs else ""),
             "| --- | ---: | ---: | ---: | ---: |" + (" ---: | ---: | ---: |" if args.pairs else "")]
    med = statistics.median
    for v, r in rows.items():
        line = (f"| {v} | {med(r['cpu1']):.2f} ({min(r['cpu1']):.2f}-{max(r['cpu1']):.2f}) | {med(r['wall1']):.2f} | "
                f"{med(r['wall2']):.2f} | {statistics.mean(r['acc']):.1%} |")
        if args.pairs:
            line += f" {med(r['pair']):.2f} | {med(r['serial']):.2f} | {med(r['serial']) / med(r['pair']):.2f}x |"
        lines.append(line)
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variants", default="w16-32-64/n5000/e3")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--amp", default="off", choices=("off", "bf16"))
    parser.add_argument("--pairs", action="store_true")
    parser.add_argument("--md", type=Path, default=None)
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--cells", type=int, default=1, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    amp = None if args.amp == "off" else args.amp
    if args.worker:
        print(json.dumps(train_cell(parse_variant(args.worker), amp, args.seed, args.cells)))
        return
    text = render(measure(args.variants.split(","), args.repeats, amp, args.pairs), args)
    print(text)
    if args.md:
        args.md.write_text(text + "\n")


if __name__ == "__main__":
    main()
