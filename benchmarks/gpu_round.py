"""The GPU round of issue 25, in parts that each fit one 10-minute call of an H100 (no build: the carried
extension is used), on CIFAR-10's JPEGs packed to travel (benchmarks/cifar_gpu.py pack -> .device-data):

  reference airbench94's published script (unchanged: ../shared/reference/airbench94, or a copy carried as
            .device-data/airbench94.py) on the same decoded images, written as its cifar10/train.pt and test.pt;
            its first --reference-runs runs (TTA accuracy, its own timer), then stopped: the target for airbench
  airbench  the airbench model with its recipe (bf16, batch 1,024, TTA): test accuracy and synchronized
            seconds per training, ReLU (the built-in) and GELU, --seeds each after one untimed training
  gap       roarfast's airbench against airbench94's choices, one difference at a time (benchmarks/airbench_gap.py)
            and a profile of one training
  in-a-row  --cells ROAR cells one after another in one process, eager and compiled (--ways): each cell's
            seconds, so a compilation's cost and any recompilation show
  grouped   K cells trained one at a time vs together (loop, fused, streams, compiled; K in --sizes) with
            benchmarks/grouped.py: images/s, FLOPs per image-step from the model's shapes, TFLOP/s and the
            share of the H100's dense bf16 peak (989 TFLOP/s)
  paper     `roarfast sweep --preset paper` (base model, the 14 estimators' ranks, 1,400 trainings) then
            `roarfast report`, in a run directory under runs/ (kept between the calls of a warm machine):
            cut at --seconds and resumed by the next call; each stage's wall time from the run directory's
            stages.json and the calls, and the share of peak the retraining reached

    python benchmarks/gpu_round.py --parts airbench,grouped --out DIR              (call 1, about 8 minutes)
    python benchmarks/gpu_round.py --parts paper --group-size K --out DIR          (calls 2.., until done)
    python benchmarks/gpu_round.py --smoke --out DIR                               (here, on CPU: tiny data)

bash scripts/gpu_check.sh runs them as its stages airbench-cifar, grouped and paper. The paper part trains
cells the way roarfast.train.group.DEFAULT_GROUPING["cuda"] says: set it from the grouped part's table first.
Each part writes DIR/<part>.json and DIR/<part>.md; DIR/summary.md gathers them, to paste into RESULTS.md.
--smoke runs every part on the CPU on a pack of a few hundred of the shared JPEGs (or the embedded dataset
when the tree is missing), with the paper grid cut to two methods, one fraction and one epoch, cut once
and resumed, so that the GPU session does not debug this script.
"""

import argparse
import json
import shlex
import subprocess
import sys
import time
from functools import partial
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.cifar_gpu import PACK, canvas_hash, encoded, load_pack  # noqa: E402
from benchmarks.grouped import flops_per_image_step, markdown, measure  # noqa: E402

#: the H100 SXM's dense bf16 tensor-core peak (no sparsity)
H100_BF16_PEAK = 989e12
#: the paper run's directory: under runs/ (ignored by git, so a warm device machine keeps it between calls)
PAPER_RUN = ROOT / "runs" / "gpu-round-paper"
#: seconds a paper call keeps for the report and the summary after cutting the sweep
REPORT_RESERVE_S = 60
#: the smoke run's grid (--smoke): the paper preset cut to what a CPU trains in a minute
SMOKE_GRID = ["--method", "random,grad", "--fraction", "0.5", "--seeds", "1", "--control-seeds", "1", "--epochs", "1"]
#: files per class and split in the smoke run's pack of the shared JPEGs
SMOKE_PER_CLASS = (40, 10)
SHARED_JPEGS = ROOT.parent / "shared" / "data" / "cifar10-jpeg"  # ../shared beside the checkout
#: airbench94's published script: beside the shared data here, or carried with the pack to the GPU machine
REFERENCE_SCRIPTS = (ROOT.parent / "shared" / "reference" / "airbench94" / "airbench94.py",
                     ROOT / ".device-data" / "airbench94.py")


def decoded_pack(pack_dir) -> tuple:
    """(train, test, classes) of a pack: uint8 canvases decoded on the CPU (torchvision's decode_jpeg, which
    gives roarfast's CPU path on all 60,000 CIFAR-10 files: checked against the pack's hashes) and labels."""
    from torchvision.io import ImageReadMode, decode_jpeg

    data = load_pack(Path(pack_dir))
    images = torch.stack(decode_jpeg(encoded(data), mode=ImageReadMode.RGB))
    differing = sum(canvas_hash(c) != int(h) for c, h in zip(images.numpy(), data["canvas_hash"]))
    if differing:
        raise SystemExit(f"{differing} decoded canvases differ from the pack's CPU path: not CIFAR-10 as packed")
    labels = torch.from_numpy(data["labels"])
    test = torch.from_numpy(data["is_test"])
    return (images[~test], labels[~test]), (images[test], labels[test]), [str(c) for c in data["classes"]]


def cifar10_pack(data_dir=".device-data"):
    """--dataset benchmarks.gpu_round:cifar10_pack --data-dir DIR: CIFAR-10 from DIR's pack."""
    return decoded_pack(data_dir)


def tiny_pack(jpeg_dir: Path, out: Path, per_class: tuple) -> None:
    """A pack in cifar_gpu's format of the first `per_class` files of each class (train, test) of jpeg_dir,
    its canvases hashed from torchvision's CPU decode."""
    from torchvision.io import ImageReadMode, decode_jpeg

    from roarfast.data.imagefolder import list_tree

    classes, blobs, labels, is_test = None, [], [], []
    for split, count in zip(("train", "test"), per_class):
        classes, names, split_labels = list_tree(jpeg_dir / split, classes)
        taken = {}
        for name, label in zip(names, split_labels):
            if taken.get(label, 0) < count:
                taken[label] = taken.get(label, 0) + 1
                blobs.append((jpeg_dir / split / name).read_bytes())
                labels.append(label)
                is_test.append(split == "test")
    images = decode_jpeg([torch.frombuffer(b, dtype=torch.uint8) for b in blobs], mode=ImageReadMode.RGB)
    out.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(out / PACK, jpeg=np.frombuffer(b"".join(blobs), dtype=np.uint8),
                        offsets=np.cumsum([0] + [len(b) for b in blobs]).astype(np.int64),
                        labels=np.array(labels, dtype=np.int64), is_test=np.array(is_test), classes=np.array(classes),
                        canvas_hash=np.array([canvas_hash(i.numpy()) for i in images], dtype=np.uint64))


def dataset(args):
    """The roarfast Dataset of the run: the pack's CIFAR-10 (or, smoke without the shared tree, embedded)."""
    from roarfast.data import load_dataset

    if args.pack is None:
        return load_dataset("embedded", num_train=600, num_test=200, seed=0)
    return load_dataset("benchmarks.gpu_round:cifar10_pack", str(args.pack))


def sync(device) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def machine(device) -> dict:
    name = torch.cuda.get_device_name(0) if torch.device(device).type == "cuda" else "CPU (smoke)"
    return dict(device=name, torch=torch.__version__, date=time.strftime("%Y-%m-%d", time.gmtime()))


def write_reference_data(ds_pack, folder: Path) -> None:
    """The decoded pack as airbench94 reads it: folder/cifar10/{train,test}.pt, each a dict of `images` (uint8
    [N, 32, 32, 3], channels last), `labels` (int64 [N]) and `classes` (names)."""
    (train, test, classes) = ds_pack
    (folder / "cifar10").mkdir(parents=True, exist_ok=True)
    for name, (images, labels) in (("train", train), ("test", test)):
        torch.save({"images": images.permute(0, 2, 3, 1).contiguous(), "labels": labels.long(), "classes": classes},
                   folder / "cifar10" / f"{name}.pt")


def reference_runs(lines) -> list:
    """(tta_val_acc, total_time_seconds) of each finished run in airbench94's printed table: the `eval` rows."""
    runs = []
    for line in lines:
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 7 and cells[1] == "eval":
            runs.append((float(cells[5]), float(cells[6])))
    return runs


def part_reference(args, ds) -> tuple[dict, str]:
    script = next((s for s in REFERENCE_SCRIPTS if s.exists()), None)
    if args.pack is None:
        return dict(skipped="no pack"), "airbench94: no CIFAR-10 pack here (the shared JPEG tree is missing)\n"
    if script is None:
        return dict(skipped="airbench94.py not found"), "airbench94: its script is not here (carry it as .device-data/airbench94.py)\n"
    folder = args.out / "reference"
    write_reference_data(decoded_pack(args.pack), folder)
    if torch.device(args.device).type != "cuda":  # the published script needs a GPU: the smoke run checks the data
        return dict(skipped="no GPU"), f"airbench94: data written to {folder / 'cifar10'}; not run (it needs a GPU)\n"
    (folder / "airbench94.py").write_bytes(script.read_bytes())
    # run unchanged; stopped after the runs asked for (it makes 25)
    process = subprocess.Popen([sys.executable, "airbench94.py"], cwd=folder, stdout=subprocess.PIPE, text=True)
    lines = []
    for line in process.stdout:
        lines.append(line)
        print(line, end="", flush=True)
        if len(reference_runs(lines)) >= args.reference_runs:
            break
    process.kill()
    process.wait()
    runs = reference_runs(lines)
    rows = [dict(run=i, test_acc=acc, seconds=s) for i, (acc, s) in enumerate(runs)]
    text = ["airbench94 (published script, unchanged) on the same decoded images:", "",
            "| run | test acc (TTA) | seconds (its timer) |", "| ---: | ---: | ---: |"]
    text += [f"| {r['run']} | {r['test_acc']:.2%} | {r['seconds']:.2f} |" for r in rows]
    if rows:
        text.append(f"| mean | {np.mean([r['test_acc'] for r in rows]):.2%} | {np.mean([r['seconds'] for r in rows]):.2f} |")
    return dict(script=str(script), rows=rows), "\n".join(text) + "\n"


def part_airbench(args, ds) -> tuple[dict, str]:
    from roarfast.models.airbench import airbench
    from roarfast.models.spec import ModelSpec
    from roarfast.recipe import effective_recipe
    from roarfast.stages.basemodel import TrainOptions
    from roarfast.train import train_classifier

    recipe = effective_recipe("airbench", args.device, ds, TrainOptions(epochs=args.epochs or None))
    specs = {"relu": "airbench",
             "gelu": ModelSpec("airbench-gelu", partial(airbench, activation="gelu"), builtin=True)}
    train_classifier(ds, "airbench", recipe.replace(epochs=1), args.device, seed=99, progress=False)  # set-up
    rows = []
    for activation, spec in specs.items():
        for seed in range(args.seeds):
            sync(args.device)
            start = time.perf_counter()
            result = train_classifier(ds, spec, recipe, args.device, seed=seed, progress=False)
            sync(args.device)
            rows.append(dict(activation=activation, seed=seed, test_acc=result.test_acc, val_acc=result.val_acc,
                             best_epoch=result.best_epoch, seconds=time.perf_counter() - start))
            print(f"airbench {activation} seed {seed}: {result.test_acc:.2%} in {rows[-1]['seconds']:.2f} s",
                  flush=True)
    lines = [f"airbench on {ds.name} ({len(ds.train_index)} training images, {recipe.epochs} epochs, batch "
             f"{recipe.batch_size}, lr {recipe.lr:g}, {recipe.amp or 'fp32'}, TTA level {recipe.tta}):", "",
             "| activation | seed | test acc (TTA) | val acc | seconds |", "| --- | ---: | ---: | ---: | ---: |"]
    lines += [f"| {r['activation']} | {r['seed']} | {r['test_acc']:.2%} | {r['val_acc']:.2%} | {r['seconds']:.2f} |"
              for r in rows]
    for activation in specs:
        mine = [r for r in rows if r["activation"] == activation]
        lines.append(f"| {activation} mean | | {np.mean([r['test_acc'] for r in mine]):.2%} | | "
                     f"{np.mean([r['seconds'] for r in mine]):.2f} |")
    return dict(recipe=recipe.to_dict(), rows=rows), "\n".join(lines) + "\n"


def part_gap(args, ds) -> tuple[dict, str]:
    from benchmarks.airbench_gap import run_gap

    return run_gap(ds, args.device, args.seeds, args.epochs, profile_out=args.out / "gap-profile.txt",
                   sync=partial(sync, args.device))


def part_in_a_row(args, ds) -> tuple[dict, str]:
    """--cells ROAR cells trained one after another in this process, each alone, by each of --ways: every
    cell's seconds (the first of a compiled way pays its compilation; a later slow one, a recompilation)."""
    from benchmarks.grouped import random_maskings, train_way
    from roarfast.recipe import effective_recipe
    from roarfast.stages.basemodel import TrainOptions
    from roarfast.train import Run

    recipe = effective_recipe(args.model, args.device, ds, TrainOptions(epochs=args.epochs or None))
    maskings = random_maskings(ds, args.cells)
    ways = ["alone", *[w for w in args.ways if w != "alone"]]
    seconds, accs = {}, {}
    for way in ways:
        for i in range(args.cells):
            took, acc = train_way(ds, args.model, recipe, args.device, way, [Run(seed=i, masking=maskings[i])])
            seconds.setdefault(way, []).append(took)
            accs.setdefault(way, []).append(acc[0][0])
            print(f"{way} cell {i}: {took:.2f} s, test {acc[0][0]:.2%}", flush=True)
    lines = [f"{args.cells} ROAR cells of {args.model} ({recipe.epochs} epochs each) one after another in one "
             "process, each way (the first cell of a way pays its set-up or compilation):", "",
             "| way | first cell s | later cells s, median (min-max) | x alone (later cells) | test acc, mean |",
             "| --- | ---: | ---: | ---: | ---: |"]
    later_alone = float(np.median(seconds["alone"][1:] or seconds["alone"]))
    for way in ways:
        later = seconds[way][1:] or seconds[way]
        lines.append(f"| {way} | {seconds[way][0]:.2f} | {np.median(later):.2f} ({min(later):.2f}-{max(later):.2f}) | "
                     f"{later_alone / float(np.median(later)):.2f} | {np.mean(accs[way]):.2%} |")
    return dict(cell_seconds=seconds, test_acc=accs, recipe=recipe.to_dict()), "\n".join(lines) + "\n"


def part_grouped(args, ds) -> tuple[dict, str]:
    from roarfast.models import resolve_model
    from roarfast.recipe import effective_recipe
    from roarfast.stages.basemodel import TrainOptions

    recipe = effective_recipe(args.model, args.device, ds, TrainOptions(epochs=args.grouped_epochs))
    net = resolve_model(args.model).build(ds.num_classes, ds.image_size, ds.channels).to(args.device)
    flops = flops_per_image_step(net, ds.channels, ds.image_size)
    rows = measure(ds, args.model, recipe, args.device, args.sizes, args.ways, args.repeats)
    on_gpu = torch.device(args.device).type == "cuda"
    header = (f"{args.model} on {ds.name}, {recipe.epochs} epoch(s) per cell, batch {recipe.batch_size}, "
              f"{recipe.amp or 'fp32'}; {flops / 1e9:.3f} GFLOP per image-step (3 x the forward's 2 x multiply-adds "
              f"of its convolutions and linear layers)")
    text = markdown(rows, header, flops=flops, peak=H100_BF16_PEAK if on_gpu else None)
    return dict(flops_per_image_step=flops, recipe=recipe.to_dict(), rows=rows), text


def _sweep(args, extra: list, seconds: float) -> tuple[int | None, float]:
    """`roarfast sweep --preset paper` in the paper run directory, killed after `seconds` (then None)."""
    command = [sys.executable, "-m", "roarfast.cli", "sweep", "--preset", "paper", "--run-dir", str(args.run_dir),
               "--device", args.device, "--no-progress", *extra]
    if args.pack is not None:
        command += ["--dataset", "benchmarks.gpu_round:cifar10_pack", "--data-dir", str(args.pack)]
    else:
        command += ["--dataset", "embedded", "--data-option", "num_train=600", "--data-option", "num_test=200"]
    if args.group_size:
        command += ["--group-size", str(args.group_size)]
    command += shlex.split(args.sweep_args)
    start = time.perf_counter()
    try:
        code = subprocess.run(command, timeout=max(1.0, seconds), cwd=ROOT).returncode
    except subprocess.TimeoutExpired:
        code = None  # killed (SIGKILL): its cells resume at the next call
    return code, time.perf_counter() - start


def part_paper(args, ds) -> tuple[dict, str]:
    from roarfast.models import resolve_model
    from roarfast.recipe import default_model, effective_recipe
    from roarfast.results import RETRAIN, ResultsDB
    from roarfast.rundir.directory import RunDir

    extra = SMOKE_GRID if args.smoke else []
    calls_path = args.run_dir / "gpu-round-calls.json"
    calls = json.loads(calls_path.read_text()) if calls_path.exists() else []
    if args.smoke and not calls:  # cut once, as a GPU call would be, to check that the next one resumes
        code, wall = _sweep(args, extra, args.smoke_cut)
        calls.append(dict(step="sweep", exit=code, seconds=wall))
    code, wall = _sweep(args, extra, args.seconds - REPORT_RESERVE_S)
    calls.append(dict(step="sweep", exit=code, seconds=wall))
    run = RunDir(args.run_dir)
    if code == 0:
        start = time.perf_counter()
        report = subprocess.run([sys.executable, "-m", "roarfast.cli", "report", "--run-dir", str(args.run_dir)],
                                cwd=ROOT, capture_output=True, text=True)
        calls.append(dict(step="report", exit=report.returncode, seconds=time.perf_counter() - start))
    args.run_dir.mkdir(parents=True, exist_ok=True)
    calls_path.write_text(json.dumps(calls, indent=1) + "\n")
    stages = run.stage_times() or {}
    with ResultsDB(run.results_path) as db:
        done = db.rows(kind=RETRAIN, status="done")
        failed = db.rows(kind=RETRAIN, status="failed")
    model = (run.base_meta() or {}).get("model") or default_model(ds, args.device)
    recipe = effective_recipe(model, args.device, ds)
    batch = min(recipe.batch_size, len(ds.train_index))
    images = sum(r["epochs"] for r in done) * (len(ds.train_index) // batch) * batch
    net = resolve_model(model).build(ds.num_classes, ds.image_size, ds.channels).to(args.device)
    flops = flops_per_image_step(net, ds.channels, ds.image_size)
    retrain_s = float(stages.get("retrain", 0.0))
    on_gpu = torch.device(args.device).type == "cuda"
    share = images * flops / retrain_s / H100_BF16_PEAK if retrain_s and on_gpu else None
    finished = code == 0
    result = dict(finished=finished, calls=calls, stages=stages, cells_done=len(done), cells_failed=len(failed),
                  model=model, flops_per_image_step=flops, retrain_images=images, share_of_peak=share,
                  wall_seconds=sum(c["seconds"] for c in calls))
    extract = stages.get("extract", {})
    flags = " ".join(filter(None, [f"--group-size {args.group_size}" if args.group_size else "", args.sweep_args]))
    lines = [f"`roarfast sweep --preset paper{' ' + flags if flags else ''}` on {ds.name} ({model}): "
             f"{'finished' if finished else 'not finished yet (the next call resumes)'} after {len(calls)} step(s), "
             f"{result['wall_seconds'] / 60:.1f} min of calls", "",
             "| stage | wall time |", "| --- | ---: |",
             f"| base model (train) | {float(stages.get('train', 0.0)):.1f} s |",
             f"| ranks (extract, {len(extract)} pass(es)) | {sum(extract.values()):.1f} s |",
             f"| retraining ({len(done)} cells done, {len(failed)} failed; the cells' seconds) | {retrain_s:.1f} s |"]
    lines += [f"| report | {c['seconds']:.1f} s |" for c in calls if c["step"] == "report"]
    lines += ["", f"Retraining: {images:,} image-steps x {flops / 1e9:.3f} GFLOP = {images * flops / 1e15:.1f} PFLOP"
              + (f", {share:.1%} of the dense bf16 peak over the retraining's time" if share is not None else "")]
    return result, "\n".join(lines) + "\n"


PARTS = {"reference": part_reference, "airbench": part_airbench, "gap": part_gap, "in-a-row": part_in_a_row,
         "grouped": part_grouped, "paper": part_paper}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parts", default="reference,airbench,grouped,paper")
    parser.add_argument("--reference-runs", type=int, default=5, help="airbench94's runs to wait for")
    parser.add_argument("--out", type=Path, default=ROOT / "gpu-results" / "gpu-round")
    parser.add_argument("--pack", type=Path, default=ROOT / ".device-data")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--seeds", type=int, default=2, help="airbench trainings per activation")
    parser.add_argument("--epochs", type=int, default=None, help="airbench epochs (default: its recipe's)")
    parser.add_argument("--model", default="airbench", help="the grouped part's model")
    parser.add_argument("--sizes", default="1,2,4,8")
    # fused+<mode> compiles once per K (a shape each): add it when a call has the minutes for it
    parser.add_argument("--ways", default="loop,fused,streams,loop+reduce-overhead")
    parser.add_argument("--cells", type=int, default=12, help="the in-a-row part's cells per way")
    parser.add_argument("--grouped-epochs", type=int, default=2, help="epochs per cell in the grouped part")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--group-size", type=int, default=None, help="the paper sweep's --group-size")
    parser.add_argument("--seconds", type=float, default=480, help="the paper part's time in this call")
    parser.add_argument("--sweep-args", default="", help="more flags of the paper sweep, as --sweep-args='--control-seeds 1'")
    parser.add_argument("--run-dir", type=Path, default=PAPER_RUN)
    parser.add_argument("--smoke", action="store_true", help="every part on the CPU on tiny data")
    parser.add_argument("--smoke-cut", type=float, default=4, help="--smoke: seconds of the first, cut sweep")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    if args.smoke:
        args.device, args.seeds, args.epochs, args.repeats, args.grouped_epochs = "cpu", 1, 1, 1, 1
        args.sizes, args.ways = "1,2", "loop,fused,streams"
        args.run_dir = args.out / "paper-run"
        args.pack = args.out / "pack" if SHARED_JPEGS.is_dir() else None
        if args.pack is not None and not (args.pack / PACK).exists():
            tiny_pack(SHARED_JPEGS, args.pack, SMOKE_PER_CLASS)
    elif not (args.pack / PACK).exists():
        raise SystemExit(f"no {args.pack / PACK}: python benchmarks/cifar_gpu.py pack (here), carried as .device-data")
    args.sizes = [int(k) for k in str(args.sizes).split(",")]
    args.ways = str(args.ways).split(",")
    ds = dataset(args)
    meta = machine(args.device)
    header = f"{meta['device']}, torch {meta['torch']}, {meta['date']}"
    for name in args.parts.split(","):
        started = time.perf_counter()
        result, text = PARTS[name](args, ds)
        (args.out / f"{name}.json").write_text(json.dumps(dict(meta=meta, seconds=time.perf_counter() - started,
                                                               **result), indent=1, default=str) + "\n")
        (args.out / f"{name}.md").write_text(f"{header}\n\n{text}")
        print(text, flush=True)
    # every part measured so far in DIR, this call's and earlier calls'
    summary = [f"# GPU round: {header}", ""]
    summary += [f"## {name}\n\n{(args.out / f'{name}.md').read_text()}" for name in PARTS
                if (args.out / f"{name}.md").exists()]
    (args.out / "summary.md").write_text("\n".join(summary))


if __name__ == "__main__":
    main()
