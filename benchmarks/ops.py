"""Benchmarks each custom op against its plain-PyTorch composition at CIFAR and ImageNet sizes.

    python benchmarks/ops.py [--device cuda|cpu] [--sizes cifar,imagenet] [--ops rank,mask,...]
                             [--rank-sort device,segmented] [--json PATH]

Reports per op: median time of ours and of the baseline, the speedup, our effective bandwidth
(bytes an ideal kernel must move / time) and, on CUDA, that bandwidth as a fraction of a measured
device-to-device copy. Timing: torch.utils.benchmark (synchronizes CUDA), median of blocked runs.
--rank-sort measures the rank rows once per CUDA sort of large images (ROARFAST_RANK_SORT: the
device-wide sort on 64-bit keys, today's default, or the segmented sort on 32-bit keys).
"""

import argparse
import datetime
import json
import os
import platform
import sys
from pathlib import Path

import torch
import torch.utils.benchmark as benchmark

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from roarfast import _reference as ref  # noqa: E402
from roarfast import ops  # noqa: E402

SIZES = {"cifar": (512, 3, 32, 32), "imagenet": (256, 3, 224, 224)}
N_SAMPLES = 15  # SmoothGrad's default sample count (README, "Semantics")
FRACTION = 0.5
NOISE_LEVEL = 0.15
MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


def median_seconds(fn, min_run_time):
    fn()  # warm-up: allocator, lazy init, first-call dispatch
    return benchmark.Timer(stmt="fn()", globals={"fn": fn}).blocked_autorange(min_run_time=min_run_time).median


def copy_bandwidth(device, min_run_time):
    """GB/s of a device-to-device clone of 1 GiB (read + write counted)."""
    src = torch.empty(2**28, dtype=torch.float32, device=device)
    return 2 * src.numel() * 4 / median_seconds(lambda: src.clone(), min_run_time) / 1e9


def cases(shape, device):
    """(name, ours, baseline, bytes an ideal kernel moves) for one image size."""
    b, c, h, w = shape
    g = torch.Generator(device=device).manual_seed(0)
    images = torch.randint(0, 256, shape, dtype=torch.uint8, device=device, generator=g)
    scores = torch.randn(shape, device=device, generator=g)
    x = torch.randn(shape, device=device, generator=g)
    grads = torch.randn((N_SAMPLES, *shape), device=device, generator=g)
    grad_list = list(grads.unbind(0))
    ranks = ops.rank(scores)
    fill = torch.zeros(c, device=device)
    mean = torch.tensor(MEAN, device=device)
    std = torch.tensor(STD, device=device)
    elems, pixels = b * c * h * w, b * h * w

    def ensemble_ours():
        state = ops.ensemble_update(ops.ensemble_init(x), grads)
        return ops.ensemble_finalize(state, "sum_sq")

    def ensemble_baseline():
        stacked = torch.stack(grad_list)
        maps = stacked.mean(0), (stacked * stacked).mean(0), stacked.var(0, unbiased=False)
        return tuple(ref.reduce_channels(m, "sum_sq") for m in maps)

    return [
        ("rank+mask", lambda: ops.mask_scores(images, scores, FRACTION, fill),
         lambda: ref.mask_scores(images, scores, FRACTION, fill), elems * 4 + 2 * elems),
        ("rank", lambda: ops.rank(scores), lambda: ref.rank(scores), elems * 4 + pixels * 2),
        ("mask", lambda: ops.mask(images, ranks, FRACTION, fill),
         lambda: ref.mask(images, ranks, FRACTION, fill), 2 * elems + pixels * 2),
        ("mask_normalize", lambda: ops.mask_normalize(images, ranks, FRACTION, fill, mean=mean, std=std),
         lambda: ref.mask_normalize(images, ranks, FRACTION, fill, mean=mean, std=std), elems * 5 + pixels * 2),
        ("noise n=15", lambda: ops.noise(x, N_SAMPLES, NOISE_LEVEL, seed=0),
         lambda: ref.noise_naive(x, N_SAMPLES, NOISE_LEVEL, generator=g), elems * 4 * (1 + N_SAMPLES)),
        ("ensemble n=15", ensemble_ours, ensemble_baseline, N_SAMPLES * elems * 4 + 3 * pixels * 4),
    ]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--sizes", default="cifar,imagenet", help="comma-separated: " + ",".join(SIZES))
    parser.add_argument("--min-run-time", type=float, default=None, help="seconds per measurement")
    parser.add_argument("--ops", default=None, help="comma-separated op names to run (default: all)")
    parser.add_argument("--rank-sort", default="device", help="comma-separated: device, segmented (CUDA, rank rows)")
    parser.add_argument("--json", type=Path, default=None, help="also write the rows here")
    args = parser.parse_args(argv)
    wanted = set(args.ops.split(",")) if args.ops else None
    sorts = args.rank_sort.split(",")
    device = torch.device(args.device)
    min_run_time = args.min_run_time or (1.0 if device.type == "cuda" else 0.5)
    copy_gbps = copy_bandwidth(device, min_run_time) if device.type == "cuda" else None
    rows = []
    for size in args.sizes.split(","):
        shape = SIZES[size]
        for name, ours, baseline, nbytes in cases(shape, device):
            if wanted is not None and name not in wanted:
                continue
            t_base = median_seconds(baseline, min_run_time)
            for sort in sorts if name.startswith("rank") and device.type == "cuda" else [None]:
                if sort is not None:
                    os.environ["ROARFAST_RANK_SORT"] = sort  # read by the CUDA rank on every call
                t_ours = median_seconds(ours, min_run_time)
                gbps = nbytes / t_ours / 1e9
                label = name if sort is None or len(sorts) == 1 else f"{name} [{sort} sort]"
                rows.append(dict(op=label, size=size, shape=list(shape), ours_ms=t_ours * 1e3,
                                 baseline_ms=t_base * 1e3, speedup=t_base / t_ours, ours_gbps=gbps,
                                 copy_fraction=gbps / copy_gbps if copy_gbps else None, rank_sort=sort))
            os.environ.pop("ROARFAST_RANK_SORT", None)
            if device.type == "cuda":
                torch.cuda.empty_cache()
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor() or "cpu"
    meta = dict(device=str(device), device_name=name, torch=torch.__version__, threads=torch.get_num_threads(),
                date=datetime.datetime.now().isoformat(timespec="seconds"), copy_gbps=copy_gbps)
    print(f"device {name} ({device}), torch {torch.__version__}, {meta['threads']} threads, {meta['date']}")
    if copy_gbps:
        print(f"device-to-device copy: {copy_gbps:.0f} GB/s")
    print("| op | size | ours ms | baseline ms | speedup | ours GB/s | of copy |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        frac = f"{r['copy_fraction']:.0%}" if r["copy_fraction"] is not None else "-"
        print(f"| {r['op']} | {r['size']} | {r['ours_ms']:.3f} | {r['baseline_ms']:.3f} | {r['speedup']:.1f}x "
              f"| {r['ours_gbps']:.1f} | {frac} |")
    if args.json:
        args.json.write_text(json.dumps(dict(meta=meta, rows=rows), indent=1) + "\n")


if __name__ == "__main__":
    main()
