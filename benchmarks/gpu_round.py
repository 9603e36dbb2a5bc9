"""The GPU round (issue 51), in parts that each fit one call of the device tool (10 minutes; the carried or built
extension is used), on CIFAR-10's JPEGs packed to travel (benchmarks/cifar_gpu.py pack -> .device-data):

  reference airbench94's published script (unchanged: ../shared/reference/airbench94, or a copy carried as
            .device-data/airbench94.py) on the same decoded images, written as its cifar10/train.pt and test.pt;
            its first --reference-runs runs (TTA accuracy, its own timer), then stopped
  timing    time per training against airbench94 on the same card (item 5): the built-in airbench, airbench94's
            choices eager and compiled, --seeds each after an untimed one; each against the reference's runs
            after its first, images/s, TFLOP/s and the share of the dense bf16 peak over the training's wall time
  gap       roarfast's airbench against airbench94's choices, one difference at a time (benchmarks/airbench_gap.py)
            and a profile of one training
  in-a-row  the compiled step decided (item 2): --cells cells trained one after another in one process as a sweep
            trains them (ROAR and KAR at the paper's fractions, mask-only controls, ROAD's fill, each its seed),
            eager and by each of --ways: each cell's seconds and the graphs compiled during it, so the cost of a
            process's compilation, the later cells' time, the recompilations and the cells it takes to pay show
  grouped   K cells trained one at a time vs together (benchmarks/grouped.py), the share of peak
  paper     the paper's grid across loans (benchmarks/paper_loans.py, item 4): one call of it, resumed from the
            carried archive (--carry-in) and packed for the next call (DIR/paper-carry.tar.gz); the reports once
            every fill's sweep has finished (DIR/paper-report.tar.gz)

    python benchmarks/gpu_round.py --parts reference,timing --out DIR             (loan 1, call 2)
    python benchmarks/gpu_round.py --parts paper --seconds S --out DIR            (every call of the later loans)
    python benchmarks/gpu_round.py --smoke --out DIR [--parts ...]                (here, on a CPU: tiny data)

scripts/gpu_check.sh runs them as its stages (its header has the loans' commands). Each part writes
DIR/<part>.json and DIR/<part>.md; DIR/summary.md gathers them, to paste into RESULTS.md. --smoke runs the parts
on the CPU on a pack of a few hundred of the shared JPEGs (or the embedded dataset when the tree is missing);
its paper part runs the grid cut to two methods, one fraction and one epoch as a straight run and as two loans
(loan 1 cut, packed, its run directory wiped, loan 2 unpacked and finished) and fails unless their rows are equal.
"""

import argparse
import json
import shlex
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
STARTED = time.monotonic()

from benchmarks import paper_loans  # noqa: E402
from benchmarks.cifar_gpu import PACK, canvas_hash, encoded, load_pack  # noqa: E402
from benchmarks.grouped import flops_per_image_step, markdown, measure, train_way  # noqa: E402

#: the H100 SXM's (and the H200's) dense bf16 tensor-core peak (no sparsity)
H100_BF16_PEAK = 989e12
#: the paper run's directory: under runs/ (ignored by git, so a warm device machine keeps it between calls)
PAPER_RUN = ROOT / "runs" / "gpu-round-paper"
#: the paper grid as every loan sweeps it: the preset, its seeds added in looks only where a verdict against random
#: is undecided, at most the paper's 5 (--max-seeds, not --detect: a design from --detect follows the recorded
#: spread, which grows as cells land, so a resumed sweep could change it), controls for one seed (a control is
#: tested against chance on the test split: one seed allows the binomial test)
PAPER_SWEEP = ("--preset", "paper", "--seeds", "auto", "--control-seeds", "1")
#: the smoke run's grid: the paper's flags, cut to what a CPU trains in a minute
SMOKE_GRID = ("--method", "random,grad", "--fraction", "0.5", "--mode", "roar", "--epochs", "1", "--model",
              "fastnet-small")
SMOKE_DATA = ("--dataset", "embedded", "--data-option", "num_train=300", "--data-option", "num_test=100")
#: files per class and split in the smoke run's pack of the shared JPEGs
SMOKE_PER_CLASS = (20, 5)
SHARED = ROOT.parent / "shared"  # ../shared beside the checkout
#: airbench94's published script: beside the shared data here, or carried with the pack to the GPU machine
REFERENCE_SCRIPTS = (SHARED / "reference" / "airbench94" / "airbench94.py", ROOT / ".device-data" / "airbench94.py")
#: the cells of the in-a-row part, in turn: what a sweep's cells vary (mode, fraction, control, fill)
CELL_KINDS = (("roar", 0.1, False, None), ("kar", 0.3, False, None), ("roar", 0.5, True, None),
              ("roar", 0.7, False, "road"), ("kar", 0.9, False, None))


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
    """--dataset benchmarks.gpu_round:cifar10_pack --data-dir DIR: CIFAR-10 from DIR's pack (the name is part of
    the data's fingerprint: the paper grid's loans keep it)."""
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
        return load_dataset("embedded", num_train=300, num_test=100, seed=0)
    return load_dataset("benchmarks.gpu_round:cifar10_pack", str(args.pack))


def sync(device) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def machine(device) -> dict:
    name = torch.cuda.get_device_name(0) if torch.device(device).type == "cuda" else "CPU (smoke)"
    return dict(device=name, torch=torch.__version__, date=time.strftime("%Y-%m-%d", time.gmtime()))


def on_gpu(args) -> bool:
    return torch.device(args.device).type == "cuda"


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
    if not on_gpu(args):  # the published script needs a GPU: the smoke run checks the data
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


def training_flops(spec, data, recipe, device) -> tuple[float, int]:
    """(FLOPs per image-step of `spec`'s network, image-steps of one training with `recipe` on `data`)."""
    from roarfast.models import resolve_model
    from roarfast.train.loop import Steps

    net = resolve_model(spec).build(data.num_classes, data.image_size, data.channels).to(device)
    steps = Steps.of(data, recipe, 1)
    return flops_per_image_step(net, data.channels, data.image_size), steps.total * steps.batch_size


def part_timing(args, ds) -> tuple[dict, str]:
    """Item 5: seconds per training, ours against airbench94's (the reference part's runs after its first, which
    pays its set-up), with the share of the dense bf16 peak over each training's wall time."""
    from benchmarks.airbench_gap import VARIANTS, variant_inputs
    from roarfast.train import Run

    reference = args.out / "reference.json"
    measured = json.loads(reference.read_text()) if reference.exists() else {}
    if not measured.get("rows"):
        measured, _ = part_reference(args, ds)  # this call's: the same card
    ref_rows = measured.get("rows", [])
    ref_s = float(np.mean([r["seconds"] for r in ref_rows[1:]])) if len(ref_rows) > 1 else None
    choices = VARIANTS[-1]
    variants = [("built-in (ReLU, validation images held out)", VARIANTS[0], "alone"),
                ("airbench94's choices", choices, "alone"),
                *[(f"airbench94's choices, {way}", choices, way) for way in args.ways if "+" in way]]
    rows, lines = [], []
    for label, (_, _, fields, options, all_images), way in variants:
        data, spec, recipe = variant_inputs(ds, args.device, fields, options, all_images, args.epochs)
        flops, images = training_flops(spec, data, recipe, args.device)
        train_way(data, spec, recipe, args.device, way, [Run(seed=99)])  # set-up (a compilation), untimed
        for seed in range(args.seeds):
            seconds, accs = train_way(data, spec, recipe, args.device, way, [Run(seed=seed)])
            rows.append(dict(variant=label, way=way, seed=seed, seconds=seconds, test_acc=accs[0][0],
                             images=images, flops_per_image_step=flops))
            print(f"{label} seed {seed}: {accs[0][0]:.2%} in {seconds:.2f} s", flush=True)
        mine = [r for r in rows if r["variant"] == label]
        mean_s = float(np.mean([r["seconds"] for r in mine]))
        tflops = flops * images / mean_s / 1e12
        share = f"{tflops * 1e12 / H100_BF16_PEAK:.1%}" if on_gpu(args) else "-"
        ratio = f"{mean_s / ref_s:.2f}x" if ref_s else "-"
        lines.append(f"| {label} | {len(data.train_index):,} | {np.mean([r['test_acc'] for r in mine]):.2%} | "
                     f"{mean_s:.2f} | {ratio} | {images / mean_s:,.0f} | {tflops:.1f} | {share} |")
    head = [f"Time per training on {ds.name}, each variant {args.seeds} time(s) after an untimed one; airbench94's "
            "published script on the same card and images: " + (f"{ref_s:.2f} s (its runs 1-{len(ref_rows) - 1}, its "
                                                                 "timer)" if ref_s else "not measured here"), "",
            "| variant | training images | test acc (TTA), mean | seconds, mean | x airbench94 | images/s | TFLOP/s | "
            "share of the dense bf16 peak |", "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    foot = ["", "Seconds: train_classifier's wall time (data to the device, whitening fit, training, the test with its "
            "views); the share of peak: the step's FLOPs (3 x the forward's multiply-adds x 2) times the image-steps, "
            "over that wall time."]
    return dict(reference_seconds=ref_s, rows=rows), "\n".join(head + lines + foot) + "\n"


def part_gap(args, ds) -> tuple[dict, str]:
    from benchmarks.airbench_gap import run_gap

    return run_gap(ds, args.device, args.seeds, args.epochs, profile_out=args.out / "gap-profile.txt",
                   sync=lambda: sync(args.device))


def compiled_graphs() -> int | None:
    """Graphs torch.compile has made in this process so far (its dynamo counters), None where torch keeps none."""
    try:
        from torch._dynamo.utils import counters
    except ImportError:
        return None
    return int(counters["stats"]["unique_graphs"])


def sweep_cells(ds, count: int) -> list:
    """`count` (label, Run) as a sweep trains them, CELL_KINDS in turn, each its own seed, on one random ranking."""
    from roarfast import ops
    from roarfast.train import Masking, Run

    ranks = [ops.rank(torch.rand(len(part), ds.image_size, ds.image_size, generator=torch.Generator().manual_seed(s)))
             for s, part in enumerate((ds.train, ds.test))]
    cells = []
    for i in range(count):
        mode, fraction, control, fill = CELL_KINDS[i % len(CELL_KINDS)]
        masking = Masking(train_ranks=ranks[0], test_ranks=ranks[1], fraction=fraction, keep=mode == "kar",
                          fill=fill, mask_only=control)
        label = f"{'control ' if control else ''}{mode} {fraction:g}{f' {fill}' if fill else ''}"
        cells.append((label, Run(seed=i, masking=masking)))
    return cells


def part_in_a_row(args, ds) -> tuple[dict, str]:
    """Item 2: --cells cells one after another in this process by each way (eager first): each cell's seconds
    and the graphs compiled during it."""
    from roarfast.recipe import effective_recipe
    from roarfast.stages.basemodel import TrainOptions

    recipe = effective_recipe(args.model, args.device, ds, TrainOptions(epochs=args.epochs or None))
    cells = sweep_cells(ds, args.cells)
    ways = ["alone", *[w for w in args.ways if w != "alone"]]
    out = {}
    for way in ways:
        for label, run in cells:
            before = compiled_graphs()
            took, acc = train_way(ds, args.model, recipe, args.device, way, [run])
            after = compiled_graphs()
            graphs = None if before is None else after - before
            out.setdefault(way, []).append(dict(cell=label, seconds=took, graphs=graphs, test_acc=acc[0][0]))
            print(f"{way} {label}: {took:.2f} s, {graphs} graph(s) compiled, test {acc[0][0]:.2%}", flush=True)
    eager = float(np.median([c["seconds"] for c in out["alone"][1:] or out["alone"]]))
    lines = [f"{args.cells} cells of {args.model} ({recipe.epochs} epochs each) one after another in one process, "
             f"as a sweep varies them ({', '.join(c for c, _ in cells[:len(CELL_KINDS)])}, in turn), each way "
             "after the eager one (which pays the process's CUDA set-up):", "",
             "| way | first cell s | later cells s, median (min-max) | x eager (later) | compile cost s | "
             "graphs compiled: first cell / later cells | cells to pay the compile cost | test acc, mean |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for way in ways:
        runs = out[way]
        later = [c["seconds"] for c in runs[1:]] or [runs[0]["seconds"]]
        median = float(np.median(later))
        cost = runs[0]["seconds"] - median
        gain = eager - median
        pays = "-" if way == "alone" else f"{cost / gain:.0f}" if gain > 0 and cost > 0 else "never"
        recompiled = "-" if runs[0]["graphs"] is None else f"{runs[0]['graphs']} / {sum(c['graphs'] for c in runs[1:])}"
        lines.append(f"| {way} | {runs[0]['seconds']:.2f} | {median:.2f} ({min(later):.2f}-{max(later):.2f}) | "
                     f"{eager / median:.2f} | {'-' if way == 'alone' else f'{cost:.1f}'} | {recompiled} | {pays} | "
                     f"{np.mean([c['test_acc'] for c in runs]):.2%} |")
    lines += ["", "A compiled way pays within a sweep when its cells to pay are fewer than the cells a sweep trains in "
              "one process (the paper grid: about 200 a call)."]
    return dict(cells=out, recipe=recipe.to_dict()), "\n".join(lines) + "\n"


def part_grouped(args, ds) -> tuple[dict, str]:
    from roarfast.models import resolve_model
    from roarfast.recipe import effective_recipe
    from roarfast.stages.basemodel import TrainOptions

    recipe = effective_recipe(args.model, args.device, ds, TrainOptions(epochs=args.grouped_epochs))
    net = resolve_model(args.model).build(ds.num_classes, ds.image_size, ds.channels).to(args.device)
    flops = flops_per_image_step(net, ds.channels, ds.image_size)
    rows = measure(ds, args.model, recipe, args.device, args.sizes, args.ways, args.repeats)
    header = (f"{args.model} on {ds.name}, {recipe.epochs} epoch(s) per cell, batch {recipe.batch_size}, "
              f"{recipe.amp or 'fp32'}; {flops / 1e9:.3f} GFLOP per image-step (3 x the forward's 2 x multiply-adds "
              f"of its convolutions and linear layers)")
    text = markdown(rows, header, flops=flops, peak=H100_BF16_PEAK if on_gpu(args) else None)
    return dict(flops_per_image_step=flops, recipe=recipe.to_dict(), rows=rows), text


def paper_grid(args) -> paper_loans.PaperGrid:
    data = SMOKE_DATA if args.pack is None else ("--dataset", "benchmarks.gpu_round:cifar10_pack", "--data-dir",
                                                   str(args.pack))
    sweep = (*PAPER_SWEEP, "--max-seeds", str(args.max_seeds), *(SMOKE_GRID if args.smoke else ()),
             *shlex.split(args.sweep_args))
    extra = ("--group-size", str(args.group_size)) if args.group_size else ()
    return paper_loans.PaperGrid(sweep=sweep, fills=tuple(args.fills.split(",")), data=data, device=args.device,
                                 extra=extra)


def part_paper(args, ds) -> tuple[dict, str]:
    """One call of the grid across loans (the smoke run: the two-loan simulation, checked against a straight run)."""
    grid = paper_grid(args)
    if args.smoke:
        result = paper_loans.simulate(args.out / "paper-loans", grid, cut_cells=2)
        if not (result["equal"] and result["finished"] and result["ok"]):
            said = {k: result[k] for k in ("finished", "ok", "only_straight", "only_resumed")}
            raise SystemExit(f"the resumed grid differs from the straight run or did not finish: "
                             f"{json.dumps(said, default=str)}")
        text = (f"Two loans on the CPU: loan 1 cut after {result['loan_1']['sweeps'][0]['cells']} cell(s), packed "
                f"({result['archive_1']:,} bytes), its run directory wiped; loan 2 unpacked, extracted the ranks "
                f"again ({result['loan_2'].get('ranks', {}).get('stores', 0)} stores, the same bytes) and finished: "
                f"{len(result['resumed'])} rows, equal to the straight run's.\n")
        return {k: v for k, v in result.items() if k not in ("straight", "resumed")}, text
    # --seconds counts from this process's start: decoding the pack and the earlier parts come out of it
    left = args.seconds - (time.monotonic() - STARTED)
    out = paper_loans.paper_call(args.run_dir, grid, left, carry_in=args.carry_in,
                                 carry_out=args.out / paper_loans.CARRY, report_out=args.out / paper_loans.REPORT)
    return out, paper_summary(args, ds, grid, out)


def paper_summary(args, ds, grid, out: dict) -> str:
    """Where the grid stands after this call: each fill's cells, the calls so far, and the retraining's share
    of peak."""
    from roarfast.recipe import effective_recipe
    from roarfast.results import RETRAIN, ResultsDB

    results = args.run_dir / paper_loans.RESULTS
    rows = []
    if results.exists():
        with ResultsDB(results, readonly=True) as db:
            rows = db.rows(kind=RETRAIN, status="done")
    loans, call = out["loans"], out["call"]
    lines = [f"`roarfast sweep {' '.join(grid.sweep)}` with each fill of {', '.join(grid.fills)} on {ds.name}: "
             f"{'every fill finished' if out['finished'] else 'not finished (the next call resumes)'} after "
             f"{len(loans)} call(s) of {sum(s['seconds'] for c in loans for s in c['sweeps']) / 60:.1f} min of "
             f"sweeping" + ("" if out["ok"] else "; STOPPED: see the ranks or ids below"), "",
             "| fill | cells done | controls done | finished |", "| --- | ---: | ---: | --- |"]
    for fill in grid.fills:
        lines.append(f"| {fill} | {sum(r['fill'] == fill for r in rows)} | | "
                     f"{'yes' if paper_loans.finished(loans, fill) else 'no'} |")
    lines.append(f"| (mask-only controls, shared) | | {sum(r['fill'] is None for r in rows)} | |")
    ranks = call.get("ranks")
    if ranks:
        lines += ["", f"This call extracted {len(ranks['methods'])} methods' ranks again in {ranks['seconds']:.0f} s: "
                  + ("every store the same bytes as the carried manifests'"
                     if not ranks["differing"] and ranks["exit"] == 0
                     else f"exit {ranks['exit']}; " + "; ".join(ranks["differing"]))]
    for sweep in call["sweeps"]:
        lines.append(f"- {sweep['fill']}: {sweep['seconds']:.0f} s, exit {sweep['exit']} (None: cut), "
                     f"{sweep['cells']} cells done after it" + (f"; IDS CHANGED: {sweep['changed']}" if sweep["changed"]
                                                                   else ""))
    seconds = sum(r["seconds"] for r in rows)
    if rows and on_gpu(args):
        model = rows[0]["model"]
        recipe = effective_recipe(model, args.device, ds)
        flops, images = training_flops(model, ds, recipe, args.device)
        image_steps = sum(r["epochs"] for r in rows) * images / recipe.epochs  # images: a training's, all epochs
        lines += ["", f"Retraining: {len(rows)} cells in {seconds / 60:.1f} min of their own seconds, "
                  f"{image_steps * flops / seconds / H100_BF16_PEAK:.1%} of the dense bf16 peak"]
    return "\n".join(lines) + "\n"


def parts_asked(args) -> list:
    """--parts, each a part of PARTS (SystemExit naming the others)."""
    unknown = set(args.parts.split(",")) - set(PARTS)
    if unknown:
        raise SystemExit(f"--parts: no part {', '.join(sorted(unknown))} (the parts: {', '.join(PARTS)})")
    return args.parts.split(",")


def plan(args) -> str:
    """benchmarks/plan_check.py's hook (no GPU, no pack needed): the parts named exist, and the roarfast command
    lines the paper part would run parse."""
    from benchmarks.plan_check import click_parses

    if "paper" not in parts_asked(args):
        return f"parts {args.parts}"
    grid = paper_grid(args)
    skip = len(paper_loans.roarfast())
    for fill in grid.fills:
        click_parses(grid.sweep_command(args.run_dir, fill)[skip:])
    click_parses(grid.extract_command(args.run_dir, ["grad", "sg-sq"])[skip:])
    return f"parts {args.parts}; the paper grid's {len(grid.fills)} sweeps and its extraction parse"


PARTS = {"reference": part_reference, "timing": part_timing, "gap": part_gap, "in-a-row": part_in_a_row,
         "grouped": part_grouped, "paper": part_paper}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parts", default="reference,timing")
    parser.add_argument("--reference-runs", type=int, default=5, help="airbench94's runs to wait for")
    parser.add_argument("--out", type=Path, default=ROOT / "gpu-results" / "gpu-round")
    parser.add_argument("--pack", type=Path, default=ROOT / ".device-data")
    parser.add_argument("--jpeg-dir", type=Path, default=SHARED / "data" / "cifar10-jpeg",
                        help="--smoke: the JPEG tree its tiny pack is taken from")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--seeds", type=int, default=5, help="trainings per variant (timing, gap)")
    parser.add_argument("--epochs", type=int, default=None, help="airbench epochs (default: its recipe's)")
    parser.add_argument("--model", default="airbench", help="the in-a-row and grouped parts' model")
    parser.add_argument("--sizes", default="1,2,4,8")
    parser.add_argument("--ways", default="loop+reduce-overhead,loop+default",
                        help="compiled (and grouped) ways: IMPLEMENTATION[+COMPILE_MODE] of roarfast.train.group")
    parser.add_argument("--cells", type=int, default=10, help="the in-a-row part's cells per way")
    parser.add_argument("--grouped-epochs", type=int, default=2, help="epochs per cell in the grouped part")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--group-size", type=int, default=None, help="the paper sweep's --group-size")
    parser.add_argument("--seconds", type=float, default=480,
                        help="the paper part's end, in seconds from this process's start")
    parser.add_argument("--fills", default="dataset-mean,road", help="the paper grid's fills, swept in this order")
    parser.add_argument("--max-seeds", type=int, default=5, help="the paper grid's seeds at most (--seeds auto)")
    parser.add_argument("--sweep-args", default="", help="more flags of the paper sweep, as --sweep-args='--epochs 8'")
    parser.add_argument("--run-dir", type=Path, default=PAPER_RUN)
    parser.add_argument("--carry-in", type=Path, default=ROOT / ".device-data" / paper_loans.CARRY,
                        help="the archive the last call returned, unpacked on a fresh machine")
    parser.add_argument("--smoke", action="store_true", help="the parts on the CPU on tiny data")
    args = parser.parse_args(argv)
    parts = parts_asked(args)
    args.out = args.out.resolve()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.smoke:
        args.device, args.seeds, args.epochs, args.repeats, args.grouped_epochs = "cpu", 1, 1, 1, 1
        args.sizes, args.cells, args.model, args.max_seeds = "1,2", len(CELL_KINDS), "fastnet-small", 3
        args.ways = "loop+default"
        args.pack = args.out / "pack" if args.jpeg_dir.is_dir() else None
        if args.pack is not None and not (args.pack / PACK).exists():
            tiny_pack(args.jpeg_dir, args.pack, SMOKE_PER_CLASS)
    elif not (args.pack / PACK).exists():
        raise SystemExit(f"no {args.pack / PACK}: python benchmarks/cifar_gpu.py pack (here), carried as .device-data")
    args.sizes = [int(k) for k in str(args.sizes).split(",")]
    args.ways = str(args.ways).split(",")
    ds = dataset(args)
    meta = machine(args.device)
    header = f"{meta['device']}, torch {meta['torch']}, {meta['date']}"
    for name in parts:
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
