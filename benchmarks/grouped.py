"""Cells trained together: K ROAR cells (each its own seed and random ranks, 50% removed) trained one at a
time (train_classifier, K times) against the same K cells trained together (train_group) as a loop of
states, fused into one network, on CUDA streams, and with a compiled step, each way timed in the same run
(repetitions interleaved, so that a machine's load falls on every way alike), with the accuracies of both
ways side by side.

    python benchmarks/grouped.py [--device cpu] [--model fastnet] [--sizes 1,2,4] [--ways loop,fused]
                                 [--train 1000] [--epochs 1] [--repeats 2] [--json out.json] [--md out.md]

A way is `alone` (the baseline, always measured), or IMPLEMENTATION[+COMPILE_MODE] of roarfast.train.group
(loop, fused, streams; loop+default, fused+reduce-overhead, ...). Every way is run once untimed first
(one process trains cell after cell: torch.compile's and cuDNN's set-up is paid once). On a CPU the data is
the embedded dataset (--train images); gpu_round.py calls measure() with CIFAR-10.
Writes a markdown table (and JSON) of images/s per way and K, and the ratio to one at a time.
"""

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

#: the share of pixels every cell removes (ROAR), so that masking runs inside every step as in a real cell
FRACTION = 0.5


def sync(device) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def flops_per_image_step(model: torch.nn.Module, channels: int, image_size: int) -> float:
    """FLOPs of one training step per image from the model's shapes: 2 x the multiply-adds of its convolutions
    and linear layers in one forward, x 3 for forward and backward (input and weight gradients)."""
    macs = []

    def count(module, inputs, output):
        if isinstance(module, torch.nn.Conv2d):
            kernel = module.in_channels // module.groups * module.kernel_size[0] * module.kernel_size[1]
            macs.append(output.numel() // output.shape[0] * kernel)
        elif isinstance(module, torch.nn.Linear):
            macs.append(module.in_features * module.out_features)

    layers = [m for m in model.modules() if isinstance(m, (torch.nn.Conv2d, torch.nn.Linear))]
    handles = [m.register_forward_hook(count) for m in layers]
    was_training = model.training
    model.eval()
    with torch.no_grad():
        model(torch.zeros(1, channels, image_size, image_size, device=next(model.parameters()).device))
    model.train(was_training)
    for handle in handles:
        handle.remove()
    return 3 * 2 * float(sum(macs))


def random_maskings(ds, count: int, seed: int = 0) -> list:
    """`count` ROAR maskings of ds at FRACTION, each with its own random ranks."""
    from roarfast import ops
    from roarfast.train import Masking

    out = []
    for k in range(count):
        ranks = [ops.rank(torch.rand(len(part), ds.image_size, ds.image_size,
                                     generator=torch.Generator().manual_seed(seed + 2 * k + s)))
                 for s, part in enumerate((ds.train, ds.test))]
        out.append(Masking(train_ranks=ranks[0], test_ranks=ranks[1], fraction=FRACTION))
    return out


def parse_way(way: str):
    """"alone" -> None; "fused+default" -> Grouping(how="fused", compile="default") (size set per K)."""
    from roarfast.train import Grouping

    if way == "alone":
        return None
    how, _, mode = way.partition("+")
    return Grouping(how=how, compile=mode or None)


def train_way(ds, model, recipe, device, way: str, runs: list) -> tuple[float, list]:
    """(seconds, [(test_acc, val_acc) per run]) of training `runs` the way `way` says."""
    from dataclasses import replace

    from roarfast.train import train_classifier, train_group

    grouping = parse_way(way)
    sync(device)
    start = time.perf_counter()
    if grouping is None:
        results = [train_classifier(ds, model, recipe, device, seed=run.seed, masking=run.masking, progress=False)
                   for run in runs]
    else:
        results = train_group(ds, model, recipe, device, runs, replace(grouping, size=len(runs)))
        failed = [r for r in results if isinstance(r, Exception)]
        if failed:
            raise failed[0]
        expected = way if len(runs) > 1 or grouping.how != "fused" else way.replace("fused", "loop")
        if torch.device(device).type == "cpu":
            expected = expected.replace("streams", "loop")
        if {r.trained_as for r in results} != {expected}:  # e.g. a network that cannot be fused
            raise RuntimeError(f"trained as {sorted({r.trained_as for r in results})}, not {expected}")
    sync(device)
    return time.perf_counter() - start, [(r.test_acc, r.val_acc) for r in results]


def measure(ds, model, recipe, device, sizes: list, ways: list, repeats: int, echo=print) -> list:
    """Rows (way, K, seconds per repetition, images/s, ratio to alone, accuracies) of every way and K."""
    from roarfast.train import Run

    ways = ["alone", *[w for w in ways if w != "alone"]]
    maskings = random_maskings(ds, max(sizes))
    steps = len(ds.train_index) // min(recipe.batch_size, len(ds.train_index))
    images = recipe.epochs * steps * min(recipe.batch_size, len(ds.train_index))
    errors = {}
    for way in ways:  # one untimed pass each (compiled: per K, a shape each): a process's set-up, not a cell's
        for k in sizes if "+" in way else [min(sizes)]:
            try:
                train_way(ds, model, recipe.replace(epochs=1), device, way,
                          [Run(seed=100 + s, masking=maskings[s]) for s in range(k)])
            except Exception as err:  # noqa: BLE001  (a way that fails is reported, the others measured)
                errors[way] = f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"
                echo(f"{way}: FAILED ({errors[way]})")
    ways = [way for way in ways if way not in errors]
    times, accs = {}, {}
    for repeat in range(repeats):
        for k in sizes:
            runs = [Run(seed=s, masking=maskings[s]) for s in range(k)]
            for way in ways:
                seconds, acc = train_way(ds, model, recipe, device, way, runs)
                times.setdefault((way, k), []).append(seconds)
                accs[(way, k)] = acc
                echo(f"repeat {repeat} K={k} {way}: {seconds:.2f} s ({k * images / seconds:,.0f} img/s)")
    rows = [dict(way=way, error=error) for way, error in errors.items()]
    for (way, k), seconds in times.items():
        ratios = [a / s for a, s in zip(times[("alone", k)], seconds)]
        rows.append(dict(way=way, k=k, seconds=seconds, images_per_s=k * images / statistics.median(seconds),
                         ratio_to_alone=statistics.median(ratios), ratios=ratios,
                         test_acc=[a for a, _ in accs[(way, k)]], val_acc=[v for _, v in accs[(way, k)]]))
    return rows


def markdown(rows: list, header: str, flops: float | None = None, peak: float | None = None) -> str:
    lines = [header, "", "| way | K | seconds (each repetition) | images/s | x one at a time (median, each) |"
             + (" TFLOP/s | share of peak |" if flops else ""),
             "| --- | ---: | --- | ---: | --- |" + (" ---: | ---: |" if flops else "")]
    lines += [f"| {r['way']} | | failed: {r['error']} | | |" for r in rows if "error" in r]
    rows = [r for r in rows if "error" not in r]
    for r in sorted(rows, key=lambda r: (r["k"], r["way"] != "alone", r["way"])):
        seconds = " / ".join(f"{s:.2f}" for s in r["seconds"])
        line = (f"| {r['way']} | {r['k']} | {seconds} | {r['images_per_s']:,.0f} | "
                f"{r['ratio_to_alone']:.2f} ({' / '.join(f'{x:.2f}' for x in r['ratios'])}) |")
        if flops:
            tflops = r["images_per_s"] * flops / 1e12
            line += f" {tflops:.1f} | {tflops * 1e12 / peak:.1%} |" if peak else f" {tflops:.3f} | |"
        lines.append(line)
    same = [r for r in rows if r["way"] != "alone"]
    if same:
        alone = {r["k"]: r for r in rows if r["way"] == "alone"}
        gaps = [max(abs(a - b) for a, b in zip(r["test_acc"], alone[r["k"]]["test_acc"])) for r in same]
        lines += ["", f"Largest test-accuracy gap between a grouped cell and the same cell alone: {max(gaps):.4f}."]
    return "\n".join(lines) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--model", default="fastnet")
    parser.add_argument("--sizes", default="1,2,4")
    parser.add_argument("--ways", default="loop,fused")
    parser.add_argument("--train", type=int, default=1000, help="embedded training images (val is a tenth of them)")
    parser.add_argument("--test", type=int, default=200)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--md", type=Path, default=None)
    args = parser.parse_args(argv)
    from roarfast.data import load_dataset
    from roarfast.recipe import effective_recipe
    from roarfast.stages.basemodel import TrainOptions

    if args.threads:
        torch.set_num_threads(args.threads)
    ds = load_dataset("embedded", num_train=args.train, num_test=args.test, seed=0)
    recipe = effective_recipe(args.model, args.device, ds, TrainOptions(epochs=args.epochs))
    rows = measure(ds, args.model, recipe, args.device, [int(k) for k in args.sizes.split(",")],
                   args.ways.split(","), args.repeats)
    header = (f"{platform.node()} ({torch.get_num_threads()} torch threads), torch {torch.__version__}, "
              f"{time.strftime('%Y-%m-%d %H:%M')}; {args.model}, embedded {len(ds.train_index)} training images, "
              f"{args.epochs} epoch(s), batch {recipe.batch_size}, ROAR {FRACTION:g} random ranks per cell")
    text = markdown(rows, header)
    print(text)
    if args.md:
        args.md.write_text(text)
    if args.json:
        args.json.write_text(json.dumps(dict(header=header, rows=rows), indent=1) + "\n")


if __name__ == "__main__":
    main()
