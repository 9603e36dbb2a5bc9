"""Retraining cells on one GPU: one ROAR cell of fastnet-gpu on CIFAR-10-size synthetic data with the
GPU's utilization sampled while it trains, then the throughput of 1, 2, 4 and 8 cells trained at once
(one process each, each warmed up by one untimed epoch), which says whether several cells per GPU pay.

    python benchmarks/retrain_cells.py --out DIR [--cells 1,2,4,8] [--epochs 10] [--parallel-epochs 2]

(--device cpu with a small --n-train runs the same code on a machine without a GPU, as a dry run.)

The data: 50,000 train and 10,000 test uint8 images of 32x32x3 (CIFAR-10's size), uniform noise
tinted by a per-class colour so that the classes are learnable; random per-image ranks, 50% removed
(ROAR), so masking runs on the device inside every step as in a real cell. Writes DIR/cells.json and
DIR/cells.md; DIR/nvidia-smi.csv holds the utilization samples of the single cell.
"""

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

N_TRAIN, N_TEST, CLASSES = 50_000, 10_000, 10  # CIFAR-10's split sizes
SMI_PERIOD_MS = 100  # nvidia-smi sampling period of the utilization trace
FRACTION = 0.5


def synthetic_split(n: int, seed: int, device):
    """(images uint8 [n,3,32,32] on the CPU, labels int64 [n]): noise plus a class colour (learnable)."""
    from roarfast.data.base import ImageSet

    g = torch.Generator(device=device).manual_seed(seed)
    labels = torch.randint(0, CLASSES, (n,), generator=g, device=device)
    tint = torch.rand(CLASSES, 3, 1, 1, generator=torch.Generator(device=device).manual_seed(99), device=device)
    noise = torch.rand(n, 3, 32, 32, generator=g, device=device)
    images = ((0.6 * noise + 0.4 * tint[labels]) * 255).to(torch.uint8).cpu()
    return ImageSet(images=images, labels=labels.cpu(), masks=None, classes=[str(c) for c in range(CLASSES)])


def sync(device: str):
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def train_one_cell(seed: int, epochs: int, device: str, n_train: int, n_test: int, barrier: Path | None = None,
                   cells: int = 1) -> dict:
    """One ROAR cell (random ranks, fraction 0.5) of fastnet-gpu with its default recipe on `device`."""
    from roarfast import ops
    from roarfast.data.base import make_dataset
    from roarfast.recipe import DataSize, effective_recipe
    from roarfast.stages.basemodel import TrainOptions
    from roarfast.train import Masking, train_classifier

    dataset = make_dataset("synthetic-cifar10", synthetic_split(n_train, 1, device),
                           synthetic_split(n_test, 2, device), {"seed": 0})
    ranks = [ops.rank(torch.rand(n, 32, 32, generator=torch.Generator(device=device).manual_seed(s), device=device))
             for n, s in ((n_train, 3), (n_test, 4))]
    masking = Masking(train_ranks=ranks[0], test_ranks=ranks[1], fraction=FRACTION)
    recipe = effective_recipe("fastnet-gpu", device, DataSize(None, 32), TrainOptions(epochs=epochs))
    # a sweep's process trains cell after cell: CUDA's lazy set-up and cuDNN's autotuning happen once per
    # process, so one untimed epoch first (without it, 1 cell of 10 epochs measured 9.4 s against 3.3 s warm)
    train_classifier(dataset, "fastnet-gpu", recipe.replace(epochs=1), device, seed=seed, masking=masking,
                     progress=False)
    if barrier is not None:  # every cell starts training at once: the data set-up is not timed
        barrier.mkdir(exist_ok=True)
        (barrier / f"{os.getpid()}").touch()
        while len(list(barrier.iterdir())) < cells:
            time.sleep(0.05)
    sync(device)
    start = time.time()
    result = train_classifier(dataset, "fastnet-gpu", recipe, device, seed=seed, masking=masking, progress=False)
    sync(device)
    end = time.time()
    batch = min(recipe.batch_size, len(dataset.train_index))  # as train_classifier takes it
    images = epochs * (len(dataset.train_index) // batch) * batch
    return dict(seed=seed, epochs=epochs, start=start, end=end, seconds=end - start, images=images,
                test_acc=result.test_acc, val_acc=result.val_acc, batch_size=recipe.batch_size, amp=recipe.amp)


def run_workers(cells: int, epochs: int, out: Path, common: list[str]) -> list[dict]:
    """Trains `cells` cells at once, one process each, started together behind a file barrier."""
    barrier = out / f"barrier-{cells}"
    procs, paths = [], []
    for i in range(cells):
        path = out / f"cell-{cells}-{i}.json"
        paths.append(path)
        procs.append(subprocess.Popen([sys.executable, __file__, "--worker", "--seed", str(i), "--epochs", str(epochs),
                                       "--barrier", str(barrier), "--cells", str(cells), "--result", str(path),
                                       *common]))
    codes = [p.wait() for p in procs]
    if any(codes):
        raise SystemExit(f"{cells} concurrent cells: worker exit codes {codes}")
    return [json.loads(p.read_text()) for p in paths]


def sample_utilization(out: Path):
    """Starts nvidia-smi writing GPU utilization and memory every SMI_PERIOD_MS to out/nvidia-smi.csv."""
    log = (out / "nvidia-smi.csv").open("w")
    return subprocess.Popen(["nvidia-smi", "--query-gpu=timestamp,utilization.gpu,memory.used",
                             "--format=csv,noheader,nounits", f"-lms={SMI_PERIOD_MS}"], stdout=log), log


def mean_utilization(out: Path, start: float, end: float) -> float | None:
    """Mean GPU utilization (%) of the samples taken between start and end (epoch seconds)."""
    import datetime

    values = []
    for line in (out / "nvidia-smi.csv").read_text().splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != 3 or not parts[1].isdigit():
            continue
        stamp = datetime.datetime.strptime(parts[0], "%Y/%m/%d %H:%M:%S.%f").timestamp()
        if start <= stamp <= end:
            values.append(int(parts[1]))
    return sum(values) / len(values) if values else None


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("gpu-results"))
    parser.add_argument("--epochs", type=int, default=None, help="epochs of the single cell (default: the recipe's)")
    parser.add_argument("--parallel-epochs", type=int, default=4, help="epochs of each concurrent cell")
    parser.add_argument("--cells", default="1,2,4,8")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--n-train", type=int, default=N_TRAIN)
    parser.add_argument("--n-test", type=int, default=N_TEST)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--barrier", type=Path, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--result", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        args.result.write_text(json.dumps(train_one_cell(args.seed, args.epochs, args.device, args.n_train,
                                                         args.n_test, args.barrier, int(args.cells))))
        return
    from roarfast.recipe import DataSize, effective_recipe

    args.out.mkdir(parents=True, exist_ok=True)
    epochs = args.epochs or effective_recipe("fastnet-gpu", args.device, DataSize(None, 32)).epochs
    common = ["--device", args.device, "--n-train", str(args.n_train), "--n-test", str(args.n_test)]
    on_gpu = torch.device(args.device).type == "cuda"
    smi, log = sample_utilization(args.out) if on_gpu else (None, None)
    try:
        single = run_workers(1, epochs, args.out, common)[0]
    finally:
        if smi is not None:
            smi.terminate()
            smi.wait()
            log.close()
    single["gpu_util_mean"] = mean_utilization(args.out, single["start"], single["end"]) if on_gpu else None
    rows = []
    for cells in (int(c) for c in args.cells.split(",")):
        results = run_workers(cells, args.parallel_epochs, args.out, common)
        wall = max(r["end"] for r in results) - min(r["start"] for r in results)
        images = sum(r["images"] for r in results)
        rows.append(dict(cells=cells, wall_s=wall, images_per_s=images / wall,
                         cell_seconds=[round(r["seconds"], 2) for r in results],
                         test_acc=[round(r["test_acc"], 4) for r in results]))
    meta = dict(device=torch.cuda.get_device_name(0) if on_gpu else args.device, torch=torch.__version__,
                date=time.strftime("%Y-%m-%d", time.gmtime()))
    (args.out / "cells.json").write_text(json.dumps(dict(meta=meta, single=single, concurrent=rows), indent=1) + "\n")
    lines = [f"{meta['device']}, torch {meta['torch']}, {meta['date']}",
             f"one cell, fastnet-gpu, {epochs} epochs, {args.n_train} 32x32 synthetic, ROAR 50%: "
             f"{single['seconds']:.1f} s, "
             f"test acc {single['test_acc']:.1%}, mean GPU utilization "
             + (f"{single['gpu_util_mean']:.0f}%" if single["gpu_util_mean"] is not None else "not sampled"),
             "", f"| cells at once ({args.parallel_epochs} epochs each) | wall s | images/s | vs 1 cell |",
             "| ---: | ---: | ---: | ---: |"]
    for r in rows:
        lines.append(f"| {r['cells']} | {r['wall_s']:.1f} | {r['images_per_s']:.0f} | "
                     f"{r['images_per_s'] / rows[0]['images_per_s']:.2f}x |")
    (args.out / "cells.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
