"""Every stage of roarfast against its baseline, measured in the same run, in one table.

Stages (the targets: README, "Performance"):
  extract-sg3      SG + SG-SQ + VAR of grad, n samples, one pass (ours) vs Captum NoiseTunnel(Saliency)
                   run three times (smoothgrad, smoothgrad_sq, vargrad)
  extract-<m>      each method's passes/s vs the model's own forward + input-backward passes/s at that batch
  rank+mask        ops.rank + ops.mask vs argsort + scatter + where in plain PyTorch
  noise+ensemble   ops.noise + ops.ensemble_* vs randn/mul/add/repeat + stack/mean/var
  jpeg-load        DALI decode to the canvas vs torchvision ImageFolder + DataLoader (with --jpeg-dir)
  retrain          seconds to train one model on the embedded dataset with the default recipe
  impute           ops.impute (ROAD fill, batched CG) vs a per-image scipy spsolve loop, 50% removed
  extract-cli      `roarfast extract --method M` as a whole command (a subprocess on a freshly trained base
                   model) with the allocator the CLI picks (roarfast.common.memory) vs the same command started
                   as it is (ROARFAST_ALLOCATOR=0): wall, user, system, page faults, max RSS, identical ranks

A second table gives each stage's CPU cost: user and system seconds and minor page faults of this
process over the stage (resource.getrusage), so time spent in the kernel is visible.

Usage: python benchmarks/throughput.py [--device cpu|cuda] [--quick] [--json out.json]
Ratios are only meaningful within one run; absolute figures only with the machine named beside them.
"""

import argparse
import importlib.util
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from types import SimpleNamespace
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))



def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def seconds(fn, device, repeats=3, warmup=1):
    """Median wall time of fn() over `repeats` runs after `warmup` runs, device work included."""
    for _ in range(warmup):
        fn()
    sync(device)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        sync(device)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


class StageUsage:
    """Wall, user and system seconds and minor page faults of this process (all its threads) over a block."""

    def __init__(self, stage):
        self.stage = stage

    def __enter__(self):
        self.start = (time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF))
        return self

    def __exit__(self, *exc):
        wall, before = self.start
        self.row = usage_row(self.stage, time.perf_counter() - wall, before, resource.getrusage(resource.RUSAGE_SELF))


def usage_row(stage, wall, before, after, max_rss_kib=None):
    return {"stage": stage, "wall_s": wall, "user_s": after.ru_utime - before.ru_utime,
            "sys_s": after.ru_stime - before.ru_stime, "minflt": int(after.ru_minflt - before.ru_minflt),
            "max_rss_mib": None if max_rss_kib is None else max_rss_kib / 1024}


def trained_free_model(name, device, num_classes=10, image_size=32):
    """An untrained model is enough for timing: the passes cost the same."""
    from roarfast.models import build_model

    torch.manual_seed(0)
    return build_model(name, num_classes, image_size).to(device).eval()


def bench_extract_sg3(model, x, labels, args, device):
    from captum.attr import NoiseTunnel, Saliency

    from roarfast.methods import ExplainBatch, MethodParams, compute_maps

    params = MethodParams(samples=args.samples, seed=0)
    batch = ExplainBatch(x=x, target=labels, index=torch.arange(x.shape[0]))
    ours = seconds(lambda: compute_maps(model, batch, ["sg", "sg-sq", "var"], params), device, args.repeats)
    # Captum takes one stdev per input tensor: the batch's mean per-image sigma (same cost as per-image).
    sigma = float((args.noise_level * (x.flatten(1).amax(1) - x.flatten(1).amin(1))).mean())
    tunnel = NoiseTunnel(Saliency(model))
    target = model(x).argmax(1)

    def captum_three():
        for nt_type in ("smoothgrad", "smoothgrad_sq", "vargrad"):
            tunnel.attribute(x, nt_type=nt_type, nt_samples=args.samples, nt_samples_batch_size=x.shape[0] * 5,
                             stdevs=sigma, target=target, abs=False)

    baseline = seconds(captum_three, device, args.repeats)
    n = x.shape[0]
    return {"stage": f"extract-sg3 (n={args.samples})", "ours": n / ours, "baseline": n / baseline,
            "unit": "img/s", "ratio": baseline / ours, "baseline_name": "Captum NoiseTunnel(Saliency) x3",
            "target": "GPU >= 5x, CPU >= 2.5x"}


def passes_per_image(method, args):
    if method in ("sg", "sg-sq", "var"):
        return args.samples
    if method == "ig":
        return args.ig_steps
    return 1


def bench_extract_methods(model, x, labels, args, device):
    """Each method's model passes per second against plain forward + input-backward passes per second
    at the same rows per pass (an ensemble runs its samples x images as one batch)."""
    from roarfast.methods import ExplainBatch, MethodParams, compute_maps
    from roarfast.methods.params import black_baseline

    baselines = {}

    def baseline_rate(rows):
        if rows not in baselines:
            xs = x.repeat((rows + x.shape[0] - 1) // x.shape[0], 1, 1, 1)[:rows]
            ys = labels.repeat((rows + x.shape[0] - 1) // x.shape[0])[:rows]

            def forward_input_backward():
                xi = xs.detach().requires_grad_(True)
                torch.autograd.grad(model(xi).gather(1, ys[:, None]).sum(), xi)

            for p in model.parameters():
                p.requires_grad_(False)
            baselines[rows] = rows / seconds(forward_input_backward, device, args.repeats)
            for p in model.parameters():
                p.requires_grad_(True)
        return baselines[rows]

    n = x.shape[0]
    params = MethodParams(samples=args.samples, ig_steps=args.ig_steps,
                          ig_baseline=black_baseline((0.5,) * x.shape[1], (0.25,) * x.shape[1]), seed=0)
    batch = ExplainBatch(x=x, target=labels, index=torch.arange(n))
    rows = []
    for method in args.methods.split(","):
        t = seconds(lambda: compute_maps(model, batch, [method], params), device, args.repeats)
        passes = passes_per_image(method, args)
        chunk_rows = min(n * passes, max(n, params.max_chunk_elements // x[0].numel()))
        base = baseline_rate(chunk_rows)
        rows.append({"stage": f"extract-{method} (B={n})", "ours": n * passes / t, "baseline": base,
                     "unit": "pass/s", "ratio": (n * passes / t) / base,
                     "baseline_name": f"model fwd + input bwd, {chunk_rows} rows", "target": ">= 0.8"})
    return rows


def bench_ops(args, device):
    """rank+mask and noise+ensemble, from benchmarks/ops.py's cases (one definition of each baseline)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("op_bench", Path(__file__).with_name("ops.py"))
    op_bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(op_bench)
    rows = []
    for size in (["cifar"] if args.quick else ["cifar", "imagenet"]):
        shape = op_bench.SIZES[size]
        times = {name: (op_bench.median_seconds(ours, 0.5), op_bench.median_seconds(base, 0.5))
                 for name, ours, base, _ in op_bench.cases(shape, device)
                 if name in ("rank+mask", f"noise n={op_bench.N_SAMPLES}", f"ensemble n={op_bench.N_SAMPLES}")}
        b = shape[0]
        t_ours, t_base = times["rank+mask"]
        label = f"{size} B={b} {'x'.join(map(str, shape[1:]))}"
        rows.append({"stage": f"rank+mask {label}", "ours": b / t_ours, "baseline": b / t_base, "unit": "img/s",
                     "ratio": t_base / t_ours, "baseline_name": "argsort + scatter + where",
                     "target": "GPU >= 10x, CPU >= 3x"})
        pair = [times[f"noise n={op_bench.N_SAMPLES}"], times[f"ensemble n={op_bench.N_SAMPLES}"]]
        t_ours, t_base = sum(t for t, _ in pair), sum(t for _, t in pair)
        rows.append({"stage": f"noise+ensemble {label} (n={op_bench.N_SAMPLES})", "ours": b / t_ours,
                     "baseline": b / t_base, "unit": "img/s", "ratio": t_base / t_ours,
                     "baseline_name": "randn/mul/add/repeat + stack/mean/var", "target": "GPU >= 3x, CPU >= 2x"})
    return rows


def bench_retrain(args, device):
    from roarfast.data import load_dataset
    from roarfast.recipe import default_model, effective_recipe
    from roarfast.train import train_classifier

    ds = load_dataset("embedded")
    model_name = default_model(ds, device)
    recipe = effective_recipe(model_name, device, ds)
    start = time.perf_counter()
    result = train_classifier(ds, model_name, recipe, device, seed=0, progress=False)
    took = time.perf_counter() - start
    n = len(ds.train)
    return {"stage": f"retrain embedded ({model_name}, {result.epochs} ep, test {result.test_acc:.1%})",
            "ours": took, "baseline": None, "unit": "s/model", "ratio": None, "baseline_name": "-",
            "target": "CPU <= 30 s" if device.type == "cpu" else "-", "images_per_s": n * result.epochs / took}


def roarfast_command(argv, tuning: bool):
    """Runs `roarfast ARGV` in a subprocess (this checkout's package) with the allocator the CLI picks or none;
    returns its usage row (wall, user, sys, faults, max RSS of that process alone)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    env["ROARFAST_ALLOCATOR"] = "auto" if tuning else "0"
    zero = resource.struct_rusage((0.0,) * 16)
    start = time.perf_counter()
    process = subprocess.Popen([sys.executable, "-m", "roarfast.cli", *argv], env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
    output = process.stdout.read()
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - start
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        raise RuntimeError(f"roarfast {' '.join(argv)} failed ({process.returncode}):\n{output}")
    return usage_row(" ".join(argv), wall, zero, usage, max_rss_kib=usage.ru_maxrss)


def same_ranks(dir_a: Path, dir_b: Path) -> bool:
    """Whether two run directories' rank stores hold identical ranks for every method and split."""
    import numpy as np

    from roarfast.rundir.directory import RunDir

    root_a, root_b = RunDir(dir_a).ranks_root, RunDir(dir_b).ranks_root
    files = sorted(p.relative_to(root_a) for p in root_a.rglob("ranks.npy"))
    return bool(files) and all(np.array_equal(np.load(root_a / f), np.load(root_b / f)) for f in files)


def bench_extract_cli(args, device, usage_rows):
    """Each --cli-methods entry as a whole `roarfast extract` command, with the allocator tuning and then,
    back to back, without it, each on a copy of one freshly trained base model (1 epoch is enough: the
    passes cost the same)."""
    data = ["--data-option", f"num_train={args.cli_images}", "--data-option", f"num_test={max(1, args.cli_images // 5)}"]
    common = ["--device", device.type, "--no-progress"]
    rows = []
    with tempfile.TemporaryDirectory(prefix="roarfast-bench-") as tmp:
        base = Path(tmp) / "base"
        roarfast_command(["train", "--run-dir", str(base), "--epochs", "1", *data, *common], tuning=True)
        for methods in args.cli_methods.split(";"):
            runs = {}
            for tuning in (True, False):
                run_dir = Path(tmp) / f"{methods}-{tuning}"
                shutil.copytree(base, run_dir)
                usage = roarfast_command(["extract", "--method", methods, "--run-dir", str(run_dir), *common], tuning)
                usage["stage"] = f"extract-cli {methods}, tuning {'on' if tuning else 'off'}"
                usage_rows.append(usage)
                runs[tuning] = (run_dir, usage)
            (dir_on, on), (dir_off, off) = runs[True], runs[False]
            identical = same_ranks(dir_on, dir_off)
            rows.append({"stage": f"extract-cli --method {methods} ({args.cli_images} + {args.cli_images // 5} "
                                  f"images; ranks {'identical' if identical else 'DIFFER'}; sys/user "
                                  f"{on['sys_s'] / on['user_s']:.0%} vs {off['sys_s'] / off['user_s']:.0%})",
                         "ours": on["wall_s"], "baseline": off["wall_s"], "unit": "s", "ratio": off["wall_s"] / on["wall_s"],
                         "baseline_name": "same command, ROARFAST_ALLOCATOR=0",
                         "target": "CPU >= 2x, sys <= 10% of user", "identical_ranks": identical})
    return rows


#: JPEG stages: one timed pass after one untimed one, which pays worker start-up and DALI's initialization
ONE_WARM_RUN = {"repeats": 1, "warmup": 1}


def bench_jpeg(args, device):
    """An ImageFolder tree to the uint8 canvas, whole (decoded into memory) and streamed (one pass of the
    StreamLoader: decode, normalize), each against torchvision ImageFolder + DataLoader doing the same
    with the same number of workers."""
    from torch.utils.data import DataLoader
    from torchvision import datasets, transforms

    from roarfast.data.builtin.imagefolder import load_imagefolder
    from roarfast.data.imagefolder import split_dirs
    from roarfast.data.stream import StreamLoader

    root = Path(args.jpeg_dir)
    decoder = "gpu" if device.type == "cuda" else "cpu"
    canvas = [transforms.Resize(args.jpeg_resize), transforms.CenterCrop(args.jpeg_crop)]
    folders = [datasets.ImageFolder(d, transforms.Compose([*canvas, transforms.PILToTensor()]))
               for d in split_dirs(root)]
    n = sum(len(f) for f in folders)

    def torchvision_load(sets, to_device):
        for folder in sets:
            for x, _ in DataLoader(folder, batch_size=64, num_workers=args.workers):
                if to_device:  # as the streamed batches arrive on the device
                    x.to(device)

    def dali_load():
        load_imagefolder(root, resize=args.jpeg_resize, crop=args.jpeg_crop, skip_bad=True, device=decoder,
                         stream=False)

    t_tv = seconds(lambda: torchvision_load(folders, False), device, **ONE_WARM_RUN)
    t_dali = seconds(dali_load, device, **ONE_WARM_RUN)
    baseline_name = f"ImageFolder+DataLoader ({args.workers} workers)"
    rows = [{"stage": f"jpeg-load {root.name} ({n} files, {args.jpeg_crop}px canvas)", "ours": n / t_dali,
             "baseline": n / t_tv, "unit": "img/s", "ratio": t_tv / t_dali, "baseline_name": baseline_name,
             "target": "GPU >= 3x"}]

    # streamed: the measurement pass (statistics, digest) happens once, before the timing
    train, _ = load_imagefolder(root, resize=args.jpeg_resize, crop=args.jpeg_crop, skip_bad=True, device=decoder,
                                stream=True)
    mean, std = train.stats
    loader = StreamLoader(train, mean, std, device, num_threads=args.workers)
    normalized = transforms.Compose([*canvas, transforms.ToTensor(), transforms.Normalize(mean, std)])
    train_folder = datasets.ImageFolder(split_dirs(root)[0], normalized)

    def stream_pass():
        for _ in loader.batches(torch.arange(len(train)), 64):
            pass

    t_tv = seconds(lambda: torchvision_load([train_folder], True), device, **ONE_WARM_RUN)
    t_stream = seconds(stream_pass, device, **ONE_WARM_RUN)
    rows.append({"stage": f"jpeg-stream {root.name} train ({len(train)} files, normalized batches)",
                 "ours": len(train) / t_stream, "baseline": len(train) / t_tv, "unit": "img/s",
                 "ratio": t_tv / t_stream, "baseline_name": baseline_name, "target": "GPU >= 3x"})
    return rows


#: the paper preset on CIFAR-10-size data: train images (the validation split among them), test images
PAPER_TRAIN, PAPER_TEST = 50_000, 10_000
#: model passes per image of each paper estimator (random and sobel need none); one set of noisy samples
#: serves sg, sg-sq and var of a base estimator
PAPER_PASSES = {"grad": 1, "ig": 25, "gb": 1, "sg/sg-sq/var of grad": 15, "sg/sg-sq/var of ig": 15 * 25,
                "sg/sg-sq/var of gb": 15}


def estimate_paper(args, device):
    """Wall time of `roarfast sweep --preset paper` on CIFAR-10-size data on this machine: measures the
    training rate (images/s, one short run of the default model and recipe on synthetic 32x32 data) and
    the attribution pass rate (forward + input-backward, images/s), then extrapolates to the preset's
    counts. Returns (rows, total seconds)."""
    from roarfast.data import ImageSet, make_dataset
    from roarfast.recipe import DataSize, default_model, effective_recipe
    from roarfast.planning.grid import preset_grid
    from roarfast.stages.basemodel import TrainOptions
    from roarfast.train import train_classifier

    grid = preset_grid("paper")
    cells = grid.cells()
    n = 4096 if device.type == "cpu" else 16384
    gen = torch.Generator().manual_seed(0)
    images = torch.randint(0, 256, (n, 3, 32, 32), dtype=torch.uint8, generator=gen)
    labels = torch.randint(0, 10, (n,), generator=gen)
    split = ImageSet(images=images, labels=labels, masks=None, classes=[str(i) for i in range(10)])
    ds = make_dataset("synthetic", split, split, {"n": n})
    # the model and recipe a CIFAR-10-size dataset gets, measured on fewer images
    model_name = default_model(SimpleNamespace(image_size=32, train=range(PAPER_TRAIN)), device)
    recipe = effective_recipe(model_name, device, DataSize(PAPER_TRAIN, 32))
    short = effective_recipe(model_name, device, DataSize(PAPER_TRAIN, 32), TrainOptions(epochs=2))
    # untimed first: a sweep pays CUDA's set-up and cuDNN's autotuning once, not per model
    train_classifier(ds, model_name, recipe.replace(epochs=1), device, seed=0, progress=False)
    sync(device)
    start = time.perf_counter()
    train_classifier(ds, model_name, short, device, seed=0, progress=False)
    sync(device)
    took = time.perf_counter() - start
    # per epoch: the training images once, plus val evaluation; test evaluation once per model
    seen = short.epochs * len(ds.train) + n
    train_rate = seen / took
    # evaluation images counted at the training rate: an over-estimate, forward passes cost less
    per_model = (recipe.epochs * PAPER_TRAIN + PAPER_TEST) / train_rate
    model = trained_free_model(model_name, device)
    x = torch.randn(256 if device.type == "cpu" else 1024, 3, 32, 32, device=device)
    for p in model.parameters():
        p.requires_grad_(False)

    def forward_input_backward():
        xi = x.detach().requires_grad_(True)
        torch.autograd.grad(model(xi).max(1).values.sum(), xi)

    pass_rate = x.shape[0] / seconds(forward_input_backward, device, args.repeats)
    passes = sum(PAPER_PASSES.values())
    extract_s = passes * (PAPER_TRAIN + PAPER_TEST) / pass_rate
    rows = [
        {"what": f"training rate, {model_name} ({recipe.epochs} epochs/model)", "measured": f"{train_rate:,.0f} img/s",
         "count": "1 base model", "seconds": per_model},
        {"what": "attribution passes (fwd + input bwd)", "measured": f"{pass_rate:,.0f} img/s",
         "count": f"{passes} passes x {PAPER_TRAIN + PAPER_TEST:,} images", "seconds": extract_s},
        {"what": "retraining cells (roar, kar)", "measured": f"{per_model:,.0f} s/model (extrapolated)",
         "count": f"{sum(not c.control for c in cells)} cells", "seconds": per_model * sum(not c.control for c in cells)},
        {"what": "mask-only controls", "measured": f"{per_model:,.0f} s/model (extrapolated)",
         "count": f"{sum(c.control for c in cells)} controls", "seconds": per_model * sum(c.control for c in cells)},
    ]
    return rows, sum(r["seconds"] for r in rows)


def format_estimate(rows, total) -> str:
    from roarfast.common.progress import format_duration

    lines = ["| stage | measured here | count | extrapolated wall time |", "|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['what']} | {r['measured']} | {r['count']} | {format_duration(r['seconds'])} |")
    lines.append(f"| **total** (one process, one device) | | | **{format_duration(total)}** |")
    return "\n".join(lines)


#: impute stage: CIFAR-size images, half of each image's pixels removed at random (ROAD's setting)
IMPUTE_SHAPE = (256, 3, 32, 32)
IMPUTE_FRACTION = 0.5


def bench_impute(args, device):
    """ops.impute on the whole batch vs the ROAD reference way: scipy spsolve image by image (CPU)."""
    from roarfast import _reference as ref
    from roarfast import ops

    g = torch.Generator().manual_seed(0)
    b, _, h, w = IMPUTE_SHAPE
    images = torch.randn(IMPUTE_SHAPE, generator=g)
    removed = torch.rand(b, h, w, generator=g).flatten(1).argsort(1).argsort(1).view(b, h, w) < IMPUTE_FRACTION * h * w
    t_ours = seconds(lambda: ops.impute(images.to(device), removed.to(device), noise=0.01), device, args.repeats)
    t_base = seconds(lambda: ref.impute(images, removed), torch.device("cpu"), repeats=1, warmup=0)
    return {"stage": f"impute B={b} {h}x{w} {IMPUTE_FRACTION:.0%} removed", "ours": b / t_ours,
            "baseline": b / t_base, "unit": "img/s", "ratio": t_base / t_ours,
            "baseline_name": "per-image scipy spsolve", "target": "GPU >= 50x, CPU >= 5x"}


def format_rows(rows):
    lines = ["| stage | ours | baseline | unit | ratio | baseline is | target |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        fmt = lambda v: "-" if v is None else f"{v:,.1f}"  # noqa: E731
        ratio = "-" if r["ratio"] is None else f"{r['ratio']:.2f}x"
        lines.append(f"| {r['stage']} | {fmt(r['ours'])} | {fmt(r['baseline'])} | {r['unit']} | {ratio} | "
                     f"{r['baseline_name']} | {r['target']} |")
    return "\n".join(lines)


def _machine(device) -> str:
    return (torch.cuda.get_device_name(device) if device.type == "cuda"
            else f"{platform.processor() or platform.machine()}, {torch.get_num_threads()} threads")


def format_usage(rows):
    lines = ["| stage | wall s | user s | sys s | sys/user | minor faults | max RSS MiB |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        ratio = f"{r['sys_s'] / r['user_s']:.0%}" if r["user_s"] else "-"
        rss = "-" if r["max_rss_mib"] is None else f"{r['max_rss_mib']:,.0f}"
        lines.append(f"| {r['stage']} | {r['wall_s']:.1f} | {r['user_s']:.1f} | {r['sys_s']:.1f} | {ratio} | "
                     f"{r['minflt']:,} | {rss} |")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--quick", action="store_true", help="CIFAR sizes only (skip 224px op benchmarks)")
    parser.add_argument("--stages", default="extract,ops,retrain,jpeg,impute,extract-cli", help="comma-separated subset")
    parser.add_argument("--model", default=None, help="model for the extract stages (default: the device's default)")
    parser.add_argument("--batch", type=int, default=None, help="images per extract batch")
    parser.add_argument("--samples", type=int, default=15)
    parser.add_argument("--ig-steps", type=int, default=25)
    parser.add_argument("--noise-level", type=float, default=0.15)
    parser.add_argument("--methods", default="grad,sg-sq,ig,gb,gradcam")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--jpeg-dir", default=None, help="ImageFolder root for the JPEG stage (skipped without)")
    parser.add_argument("--jpeg-resize", type=int, default=256)
    parser.add_argument("--jpeg-crop", type=int, default=224)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--cli-methods", default="ig;sg-sq,var",
                        help="extract-cli: --method values, separated by ';', each timed as one command")
    parser.add_argument("--cli-images", type=int, default=1000,
                        help="extract-cli: embedded train images (test: a fifth); 5000 is the default dataset")
    parser.add_argument("--json", default=None, help="also write the rows as JSON here")
    parser.add_argument("--md", default=None, help="also write the tables (with the machine's line) as markdown here")
    parser.add_argument("--estimate", choices=["paper"], default=None,
                        help="instead of the stages: the wall time of `roarfast sweep --preset paper` on CIFAR-10-size "
                             "data here, from measured training and attribution rates")
    args = parser.parse_args(argv)
    from roarfast.common.memory import allocator

    malloc = allocator()  # the in-process stages run with what this process started with
    device = torch.device(args.device)
    if args.estimate:
        rows, total = estimate_paper(args, device)
        print(f"roarfast paper-preset estimate: {_machine(device)}, torch {torch.__version__}, "
              f"{time.strftime('%Y-%m-%d')}")
        print("Measured: the two rates. Extrapolated: everything else (counts x measured rates; data loading, "
              "ranking and masking assumed free beside the passes).")
        print(format_estimate(rows, total))
        return
    stages = set(args.stages.split(","))
    rows, usage = [], []
    if "extract" in stages:
        model_name = args.model or ("fastnet-gpu" if device.type == "cuda" else "fastnet")
        batch = args.batch or (512 if device.type == "cuda" else 64)
        model = trained_free_model(model_name, device)
        torch.manual_seed(1)
        x = torch.randn(batch, 3, 32, 32, device=device)
        labels = torch.randint(0, 10, (batch,), device=device)
        if importlib.util.find_spec("captum") is None:  # the GPU machine has none unless it is carried as a wheel
            print("extract-sg3: skipped (Captum is not installed: pip install captum, or carry its wheel)")
        else:
            with StageUsage("extract-sg3 (ours + Captum)") as stage:
                rows.append(bench_extract_sg3(model, x, labels, args, device))
            usage.append(stage.row)
        with StageUsage("extract-<method> (ours + baselines)") as stage:
            rows.extend(bench_extract_methods(model, x, labels, args, device))
        usage.append(stage.row)
    if "ops" in stages:
        with StageUsage("ops (ours + baselines)") as stage:
            rows.extend(bench_ops(args, device))
        usage.append(stage.row)
    if "retrain" in stages:
        with StageUsage("retrain") as stage:
            rows.append(bench_retrain(args, device))
        usage.append(stage.row)
    if "jpeg" in stages and args.jpeg_dir:
        with StageUsage("jpeg (ours + baselines)") as stage:
            rows.extend(bench_jpeg(args, device))
        usage.append(stage.row)
    if "impute" in stages:
        with StageUsage("impute (ours + scipy)") as stage:
            rows.append(bench_impute(args, device))
        usage.append(stage.row)
    if "extract-cli" in stages:
        rows.extend(bench_extract_cli(args, device, usage))
    machine = _machine(device)
    text = (f"roarfast throughput: {machine}, torch {torch.__version__}, {time.strftime('%Y-%m-%d')}, malloc {malloc}"
            f"\n\n{format_rows(rows)}\n\n{format_usage(usage)}\n")
    print(text)
    if args.md:
        Path(args.md).write_text(text)
    if args.json:
        Path(args.json).write_text(json.dumps({"machine": machine, "torch": torch.__version__,
                                               "date": time.strftime("%Y-%m-%d"), "rows": rows, "usage": usage},
                                              indent=1))


if __name__ == "__main__":
    main()
