"""The scale run (issue 31): a generated JPEG tree of 20,000 images at 224 px, streamed from disk (decoded batch by
batch, never held in memory), its ranks extracted (random, a cheap estimator, and grad, a gradient one) and a few
retraining cells, once by one process (the local executor) and once on a 2-node local Ray cluster
(ray.cluster_utils.Cluster: a head without CPUs that runs the driver alone, two worker nodes of --node-cpus CPUs),
with each phase's wall time and peak memory: the driver's RSS, the largest Ray worker's RSS, and the proportional
set size (PSS: shared pages counted once) of every process of the run together, sampled every second. The two
runs' rank stores are compared byte for byte.

    python benchmarks/scale_run.py --out /tmp/roarfast-scale [--images 20000] [--side 224] [--keep]

Everything is written under --out, never in the repository: the tree (kept between runs: generated once), the run
directories, scale.json and scale.md (the table benchmarks/RESULTS.md holds). The rank stores take 2 bytes per
pixel and method (4 GB a run at 20,000 images): removed at the end unless --keep.

The network is `small_net` below, about 11 MFLOP a 224 px image: the run measures what scale costs the system
(decoding, the store's writes, Ray's transfers, memory), which a large network's compute would hide on a few CPU
cores. The base model is its untrained weights, adopted (`train --weights`): what the ranks explain does not
matter here, and nothing is trained for it.
"""

import argparse
import filecmp
import json
import os
import platform
import shutil
import subprocess
import sys
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CLASSES = 10
TEST_SHARE = 0.1  # of the images, in the held-out split
METHODS = "random,grad"
#: images per extraction pass: the CPU default at 224 px (16) is sized for ResNets; this small network's passes
#: are cheap, and 16 would measure a per-batch cost instead (twice the time on 2 loaded cores)
EXTRACT = ["--method", METHODS, "--batch-size", "64"]
#: the cells: grad and random (always added), ROAR at one fraction, one seed, one epoch, no control
SWEEP = ["--method", "grad", "--mode", "roar", "--fraction", "0.5", "--seeds", "1", "--no-control", "--epochs", "1"]
MODEL = "scale_run:small_net"
#: each node's object store: a task's result is a chunk's ranks of both methods, 512 x 224 x 224 x 2 x 2 bytes
OBJECT_STORE_BYTES = 400 << 20
SAMPLE_S = 1.0


def small_net(num_classes: int, image_size: int, in_channels: int):
    """A 7x7 stride-4 stem (16 channels), a 3x3 stride-2 convolution (32), global pooling, a linear head; nn.ReLU
    modules (guided backprop's hooks)."""
    from torch import nn

    return nn.Sequential(nn.Conv2d(in_channels, 16, 7, stride=4, padding=3), nn.ReLU(),
                         nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.ReLU(),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, num_classes))


def generate_tree(root: Path, images: int, side: int) -> float:
    """An ImageFolder tree of `images` JPEGs of side x side px (quality 85) in CLASSES classes, train/ and test/
    (TEST_SHARE of them): each class its colour and stripe angle, each image its stripes' phase, a bright blob's
    place and its noise, cut from banks drawn once (the JPEG encoding is then most of the cost). Seconds taken (0
    when the tree is there already)."""
    import numpy as np
    from PIL import Image

    done = root / "complete.json"
    if done.exists() and json.loads(done.read_text()) == {"images": images, "side": side}:
        return 0.0
    shutil.rmtree(root, ignore_errors=True)
    started = time.perf_counter()
    rng = np.random.default_rng(0)
    yy, xx = np.mgrid[0:2 * side, 0:2 * side].astype(np.float32) / side
    bases = []  # per class: stripes of its angle in its colour, twice the side (an image is a window of it)
    for label in range(CLASSES):
        angle = np.pi * label / CLASSES
        colour = np.array([np.cos(label), np.sin(label), np.cos(2 * label)], dtype=np.float32)
        stripes = np.sin(40 * (xx * np.cos(angle) + yy * np.sin(angle)))
        bases.append((128 + 50 * stripes[..., None] * colour).clip(0, 255).astype(np.int16))
    blob = (60 * np.exp(-((yy - 1) ** 2 + (xx - 1) ** 2) / 0.02))[..., None].astype(np.int16)
    noise = rng.normal(0, 12, (2 * side, 2 * side, 3)).astype(np.int16)
    n_test = int(images * TEST_SHARE)
    for i in range(images):
        split, label = ("test" if i < n_test else "train"), i % CLASSES
        (by, bx), (cy, cx), (ny, nx) = rng.integers(0, side, (3, 2))
        pixels = (bases[label][by:by + side, bx:bx + side] + blob[cy:cy + side, cx:cx + side]
                  + noise[ny:ny + side, nx:nx + side])
        folder = root / split / f"class{label}"
        folder.mkdir(parents=True, exist_ok=True)
        Image.fromarray(pixels.clip(0, 255).astype(np.uint8)).save(folder / f"{i:06d}.jpg", quality=85)
    done.write_text(json.dumps({"images": images, "side": side}))
    return time.perf_counter() - started


class Sampler:
    """Samples, every SAMPLE_S while in its `with` block, the memory of this process's descendants: the driver's
    RSS (the process `driver_pid` and its children), the largest Ray worker's RSS, and the PSS of all of them
    together; keeps the peaks (`peak`, bytes)."""

    def __init__(self, driver_pid: int):
        import psutil

        self.psutil, self.driver = psutil, psutil.Process(driver_pid)
        self.peak = {"driver_rss": 0, "worker_rss": 0, "total_pss": 0}
        self.stop = threading.Event()

    def run(self):
        psutil = self.psutil
        while not self.stop.wait(SAMPLE_S):
            try:
                driver = [self.driver, *self.driver.children(recursive=True)]
            except psutil.NoSuchProcess:
                return
            driver_rss, worker_rss, total_pss = 0, 0, 0
            for process in psutil.Process().children(recursive=True):
                try:
                    info = process.memory_full_info()
                    name = " ".join(process.cmdline()[:2])
                except (psutil.NoSuchProcess, psutil.AccessDenied):
                    continue
                total_pss += info.pss
                if process in driver:
                    driver_rss += info.rss
                elif "default_worker" in name or name.startswith("ray::"):
                    worker_rss = max(worker_rss, info.rss)
            for key, value in (("driver_rss", driver_rss), ("worker_rss", worker_rss), ("total_pss", total_pss)):
                self.peak[key] = max(self.peak[key], value)


def roarfast(phase: str, args: list, log: Path) -> dict:
    """Runs `roarfast ARGS` as the driver, its output in `log`; {"phase", "seconds", peak memory in MiB}."""
    started = time.perf_counter()
    with open(log, "a") as out:
        out.write(f"\n$ roarfast {' '.join(args)}\n")
        out.flush()
        driver = subprocess.Popen([sys.executable, "-m", "roarfast.cli", *args, "--no-progress"], stdout=out,
                                  stderr=subprocess.STDOUT)
        sampler = Sampler(driver.pid)
        thread = threading.Thread(target=sampler.run, daemon=True)
        thread.start()
        code = driver.wait()
        sampler.stop.set()
        thread.join()
    if code != 0:
        raise SystemExit(f"{phase}: roarfast {' '.join(args)} failed ({code}); see {log}")
    return {"phase": phase, "seconds": round(time.perf_counter() - started, 1),
            **{key: round(value / 2**20) for key, value in sampler.peak.items()}}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True, help="where the tree and the runs go (not the repository)")
    parser.add_argument("--images", type=int, default=20_000)
    parser.add_argument("--side", type=int, default=224)
    parser.add_argument("--node-cpus", type=int, default=1, help="CPUs of each of the two worker nodes")
    parser.add_argument("--keep", action="store_true", help="keep the rank stores")
    args = parser.parse_args()
    out = args.out.resolve()
    if out.is_relative_to(ROOT):
        raise SystemExit(f"--out {out} lies in the repository: give a folder outside it (e.g. /tmp/roarfast-scale)")
    out.mkdir(parents=True, exist_ok=True)
    # the drivers and every Ray worker import this checkout and small_net (this file) by name
    os.environ["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(ROOT / "benchmarks"), os.environ.get("PYTHONPATH", "")])
    sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]
    import torch

    from roarfast.records.checkpoint import weights_bytes

    log = out / "scale.log"
    log.write_text("")
    data = ["--dataset", "imagefolder", "--data-dir", str(out / "tree"), "--data-option", "stream=true",
            "--model", MODEL]
    result = {"images": args.images, "side": args.side, "generate_s": round(generate_tree(out / "tree", args.images,
                                                                                          args.side), 1)}
    torch.manual_seed(0)
    (out / "untrained.safetensors").write_bytes(weights_bytes(small_net(CLASSES, args.side, 3), MODEL))
    for name in ("base", "local", "ray"):
        shutil.rmtree(out / name, ignore_errors=True)
    phases = [roarfast("adopt the base model", ["train", "--run-dir", str(out / "base"), *data, "--weights",
                                                str(out / "untrained.safetensors")], log)]
    for name in ("local", "ray"):
        shutil.copytree(out / "base", out / name)
    phases.append(roarfast("extract, one process", ["extract", "--run-dir", str(out / "local"), *data, *EXTRACT], log))
    phases.append(roarfast("cells, one process", ["sweep", "--run-dir", str(out / "local"), *data, *SWEEP], log))
    phases += on_cluster(out, data, args.node_cpus, log)
    stores = sorted((out / "local" / "ranks").rglob("ranks.npy"))
    result["stores_equal"] = all(filecmp.cmp(p, out / "ray" / p.relative_to(out / "local"), shallow=False)
                                 for p in stores) and len(stores) == 4
    result.update(phases=phases, machine=machine(), date=datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"))
    if not args.keep:
        for name in ("local", "ray"):
            shutil.rmtree(out / name / "ranks", ignore_errors=True)
    (out / "scale.json").write_text(json.dumps(result, indent=2))
    table = markdown(result)
    (out / "scale.md").write_text(table)
    print(table)


def on_cluster(out: Path, data: list, node_cpus: int, log: Path) -> list:
    """The Ray phases on a local cluster of a head without CPUs and two worker nodes of `node_cpus` CPUs."""
    import ray
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "object_store_memory": OBJECT_STORE_BYTES,
                                                            "include_dashboard": False})
    try:
        for _ in range(2):
            cluster.add_node(num_cpus=node_cpus, object_store_memory=OBJECT_STORE_BYTES)
        cluster.wait_for_nodes()
        on_ray = ["--executor", "ray", "--address", cluster.address]
        return [roarfast("extract, 2-node Ray cluster", ["extract", "--run-dir", str(out / "ray"), *data, *EXTRACT,
                                                          *on_ray], log),
                roarfast("cells, 2-node Ray cluster", ["sweep", "--run-dir", str(out / "ray"), *data, *SWEEP, *on_ray],
                         log)]
    finally:
        if ray.is_initialized():
            ray.shutdown()
        cluster.shutdown()


def machine() -> dict:
    """The CPU, its cores, the memory, the load averages now, torch's and Ray's versions."""
    import ray
    import torch

    model = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                  if line.startswith("model name")), platform.processor())
    memory = next(int(line.split()[1]) // 2**20 for line in Path("/proc/meminfo").read_text().splitlines()
                  if line.startswith("MemTotal"))
    return {"cpu": model, "cores": os.cpu_count(), "memory_gib": memory, "load": [round(x, 1) for x in os.getloadavg()],
            "torch": torch.__version__, "ray": ray.__version__, "python": platform.python_version()}


def markdown(result: dict) -> str:
    m = result["machine"]
    lines = [f"{result['images']:,} JPEGs of {result['side']} px (generated in {result['generate_s']} s), streamed; "
             f"{m['cpu']}, {m['cores']} cores, {m['memory_gib']} GiB, load average {m['load']} at the end; torch "
             f"{m['torch']}, Ray {m['ray']}; {result['date']}", "",
             "| phase | wall time | driver peak RSS | largest Ray worker peak RSS | all processes' peak PSS |",
             "| --- | --- | --- | --- | --- |"]
    for p in result["phases"]:
        worker = f"{p['worker_rss']:,} MiB" if p["worker_rss"] else "-"
        lines.append(f"| {p['phase']} | {p['seconds']:,.0f} s | {p['driver_rss']:,} MiB | {worker} | "
                     f"{p['total_pss']:,} MiB |")
    lines += ["", f"rank stores of the two runs equal byte for byte: {result['stores_equal']}"]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
