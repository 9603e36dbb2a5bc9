"""The CPU decoder (roarfast.data.decode, used when DALI is not installed) against DALI's CPU pipeline on a
JPEG tree: how far apart their canvases are (per uint8 level) and how fast each decodes.

    python benchmarks/decoders.py --tree ../shared/data/hymenoptera --resize 256 --crop 224
    python benchmarks/decoders.py --tree ../shared/data/cifar10-jpeg --resize 32 --crop 32
"""

import argparse
import time
from pathlib import Path

import numpy as np
import torch

from roarfast.data.decode import CPU_DECODER, DALI, canvas_batches
from roarfast.data.imagefolder import default_batch_size, list_tree, split_dirs


def canvases(decoder: str, split_dir: Path, files: list, resize: int, crop: int) -> tuple[torch.Tensor, float]:
    """(uint8 Tensor[N, 3, crop, crop] in file order, seconds) of one decoder on the CPU."""
    out = torch.empty(len(files), 3, crop, crop, dtype=torch.uint8)
    size = default_batch_size(crop)
    plan = [np.arange(start, min(start + size, len(files))) for start in range(0, len(files), size)]
    started = time.perf_counter()
    for batch in canvas_batches(decoder, split_dir, files, plan, resize, crop, None):
        out[batch["index"]] = batch["images"]
    return out, time.perf_counter() - started


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", type=Path, required=True, help="an ImageFolder tree (train/ and val/ or test/)")
    parser.add_argument("--resize", type=int, default=256)
    parser.add_argument("--crop", type=int, default=224)
    args = parser.parse_args()
    total = {"n": 0, "values": 0, "abs": 0, "over2": 0, "max": 0, DALI: 0.0, CPU_DECODER: 0.0}
    for split_dir in split_dirs(args.tree):
        _, files, _ = list_tree(split_dir)
        dali, seconds = canvases(DALI, split_dir, files, args.resize, args.crop)
        total[DALI] += seconds
        cpu, seconds = canvases(CPU_DECODER, split_dir, files, args.resize, args.crop)
        total[CPU_DECODER] += seconds
        diff = (cpu.int() - dali.int()).abs()
        total["n"] += len(files)
        total["values"] += diff.numel()
        total["abs"] += int(diff.sum())
        total["over2"] += int((diff > 2).sum())
        total["max"] = max(total["max"], int(diff.max()))
    print(f"{args.tree} (resize {args.resize}, crop {args.crop}), {total['n']} images, {torch.get_num_threads()} "
          f"threads: mean |CPU decoder - DALI| {total['abs'] / total['values']:.3f} levels, "
          f"{total['over2'] / total['values']:.2%} of values > 2 levels apart, max {total['max']}; "
          f"DALI's CPU pipeline {total['n'] / total[DALI]:.0f} img/s, "
          f"the CPU decoder {total['n'] / total[CPU_DECODER]:.0f} img/s")


if __name__ == "__main__":
    main()
