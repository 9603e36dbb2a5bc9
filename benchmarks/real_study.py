"""The README's real-data example: a ROAR/KAR study on CIFAR-10 (JPEG q75, from ../shared/data) with both
fills, fill leakage and the report, sized to take about 40 minutes on 2 CPU cores.

    python benchmarks/real_study.py                 # the full study (the README's figure and numbers)
    python benchmarks/real_study.py --tiny          # a few hundred images, 1 epoch: does it all run?

It builds a subset of the JPEG tree as symlinks (the first --train-per-class / --test-per-class files of each
class, in roarfast's listing order), runs the grid through roarfast.Study with the dataset-mean fill and with
ROAD's imputation fill (the mask-only controls, which see no pixel values, are trained once), measures how
visible each fill's holes are (fill leakage), writes the report, and copies into --results (default
benchmarks/real-study/) the figure (both fills' curves, the leakage in the row titles) and a Markdown page of the
numbers the README quotes: verdicts, mask-only controls, fill leakage, stage times, machine. The full study also
rewrites the README's and RESULTS.md's real-study blocks (between `<!-- real-study:begin/end -->`). Exits 0
without doing anything when the JPEG tree is absent (a clone without ../shared).
"""

import argparse
import json
import os
import platform
import shutil
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

JPEG_DIR = REPO.parent / "shared" / "data" / "cifar10-jpeg"
#: the estimators: the reference, the plain gradient, guided backprop and the paper's best ensemble
METHODS = ("random", "grad", "gb", "sg-sq")
FRACTIONS = (0.1, 0.3, 0.5, 0.7, 0.9)
FILLS = ("dataset-mean", "road")
#: 500 + 100 images per class: fastnet learns the 4,500 training images (val held out) in 6 epochs to about
#: half-way between chance and its full-data accuracy, and a cell takes seconds on 2 cores
FULL = {"train_per_class": 500, "test_per_class": 100, "epochs": 6, "seeds": 3, "fractions": FRACTIONS}
TINY = {"train_per_class": 30, "test_per_class": 10, "epochs": 1, "seeds": 2, "fractions": (0.5,)}
#: the JPEGs are 32x32: the evaluation canvas is the image itself, decoded by DALI on the CPU
CANVAS = {"resize": 32, "crop": 32, "device": "cpu", "stream": False}


def subset_tree(source: Path, target: Path, per_class: dict) -> Path:
    """target/{train,test}/<class>/ holding symlinks to the first per_class[split] files of each class of source
    (sorted names, the order roarfast lists them in); rebuilt when it holds other counts."""
    from roarfast.data.imagefolder import IMAGE_EXTENSIONS, class_names

    marker = target / "subset.json"
    wanted = {"source": str(source), **per_class}
    if marker.is_file() and json.loads(marker.read_text()) == wanted:
        return target
    shutil.rmtree(target, ignore_errors=True)
    for split, count in per_class.items():
        for name in class_names(source / split):
            files = sorted(p for p in (source / split / name).iterdir() if p.suffix.lower() in IMAGE_EXTENSIONS)
            folder = target / split / name
            folder.mkdir(parents=True)
            for path in files[:count]:
                (folder / path.name).symlink_to(path.resolve())
    marker.write_text(json.dumps(wanted))
    return target


def numbers_page(summary: dict, args, seconds: float, command: str) -> str:
    """The Markdown page of what the README quotes."""
    import torch

    from roarfast.report.text import verdict_lines

    lines = [f"# CIFAR-10 (JPEG q75): {args.train_per_class * 10:,} train / {args.test_per_class * 10:,} test images",
             "", f"Command: `{command}`", "",
             f"Machine: {os.cpu_count()} CPU cores ({platform.processor() or platform.machine()}), torch "
             f"{torch.__version__}, {time.strftime('%Y-%m-%d')}; {seconds / 60:.0f} min of stage times (below, and the "
             f"fill leakage).", "",
             f"Grid: {', '.join(args.methods)} x roar, kar x {', '.join(f'{f:g}' for f in args.fractions)} x "
             f"{args.seeds} seeds, fills {', '.join(FILLS)}, {args.epochs} epochs per model (fastnet), mask-only "
             f"controls for seed 0.", "",
             f"Base model: test {summary['base']['test_acc']:.1%} (chance {summary['chance']:.1%}).", "",
             "## Verdicts", "", "```", *verdict_lines(summary), "```", "", "## Fill leakage", "",
             "| fill | fraction | hole detector | base rate |", "| --- | --- | --- | --- |"]
    lines += [f"| {r['fill']} | {r['fraction']:.0%} | {r['accuracy']:.1%} | {r['base_rate']:.1%} |"
              for r in summary.get("fill_leakage") or []]
    lines += ["", "## Mask-only controls (ROAR/KAR trained on the removal pattern alone)", "",
              "| method | mode | fraction | accuracy | leaky |", "| --- | --- | --- | --- | --- |"]
    leaky = {True: "yes", False: "no", None: "not tested"}
    lines += [f"| {e['method']} | {e['mode']} | {e['fraction']:.0%} | {e['mean']:.1%} | {leaky[e['leaky']]} |"
              for e in summary["leakage"]]
    lines += ["", "## Stage times", "", "| stage | seconds |", "| --- | --- |"]
    lines += [f"| {s['stage']} | {s['seconds']:.0f} |" for s in summary["stages"] if s.get("seconds") is not None]
    return "\n".join(lines) + "\n"


def readme_snippet(summary: dict, args, seconds: float, command: str, figure: str, page: str) -> str:
    """What the README shows beside the figure (which stays under 1,500 words): the command and its cost, the
    rankings, how visible each fill's holes are; the verdicts and the rest are on the numbers page."""
    from roarfast.report.text import verdict_lines

    shown = [line for line in verdict_lines(summary) if line.startswith("ranking")]
    holes = [f"{r['fill']} {r['accuracy']:.0%}" for r in summary.get("fill_leakage") or [] if r["fraction"] == 0.5]
    return "\n".join([
        f"![ROAR and KAR on CIFAR-10 (JPEG q75), dataset-mean fill and ROAD fill]({figure})", "",
        f"`{command}`: CIFAR-10 (JPEG q75), {args.train_per_class * 10:,} train / {args.test_per_class * 10:,} test "
        f"images, fastnet ({args.epochs} epochs per model, base model {summary['base']['test_acc']:.1%}), "
        f"{', '.join(args.methods)} at {', '.join(f'{f:.0%}' for f in args.fractions)} removed (ROAR) or kept (KAR), "
        f"{args.seeds} seeds, both fills, mask-only controls; {seconds / 60:.0f} min on {os.cpu_count()} CPU cores.",
        "", _counts_line(summary), "", "```", *shown, "```", "",
        f"Fill leakage at 50% removed (a per-pixel detector finding the holes; base rate 50%): {', '.join(holes)}. "
        f"Every number: [{Path(page).name}]({page}).", ""])


def _counts_line(summary: dict) -> str:
    """How far the verdicts can be trusted, in one sentence: the leaky mask-only controls (with the range of
    their accuracies) and the verdicts the leak leaves standing."""
    controls, verdicts = summary["counts"]["controls"], summary["counts"]["verdicts"]
    leaky = [e["mean"] for e in summary["leakage"] if e["leaky"]]
    spread = f" ({min(leaky):.0%}-{max(leaky):.0%} against chance {summary['chance']:.0%})" if leaky else ""
    return (f"{controls['leaky']} of {controls['tested']} mask-only controls are leaky{spread}: the removal "
            f"pattern alone tells the class apart. Of {verdicts['drawn']} verdicts, {verdicts['significant']} are "
            f"significant after Holm; by their leak's direction, {verdicts['leaky_stands']} stand despite a leaky "
            f"control and {verdicts['leaky_could_explain']} could be the leak's doing (rings and red squares in the "
            f"figure).")


def replace_between(path: Path, name: str, text: str) -> None:
    """Replaces what lies between `<!-- name:begin -->` and `<!-- name:end -->` in the file at `path`."""
    begin, end = f"<!-- {name}:begin -->", f"<!-- {name}:end -->"
    content = path.read_text()
    head, _, rest = content.partition(begin)
    _, _, tail = rest.partition(end)
    if not rest or end not in rest:
        raise SystemExit(f"real_study: {path} has no {begin} ... {end} block")
    path.write_text(f"{head}{begin}\n{text}{end}{tail}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", action="store_true", help="a few hundred images and 1 epoch: a check that it runs")
    parser.add_argument("--jpeg-dir", type=Path, default=JPEG_DIR)
    parser.add_argument("--out", type=Path, default=REPO / "runs" / "real-study", help="the subset tree and the run")
    parser.add_argument("--results", type=Path, default=REPO / "benchmarks" / "real-study",
                        help="where the figure and the numbers go")
    parser.add_argument("--methods", default=",".join(METHODS))
    args = parser.parse_args(argv)
    if not (args.jpeg_dir / "train").is_dir():
        print(f"real_study: skipped, no JPEG tree at {args.jpeg_dir}")
        return 0
    for key, value in (TINY if args.tiny else FULL).items():
        setattr(args, key, value)
    args.methods = args.methods.split(",")

    from roarfast import Study

    started = time.perf_counter()
    size = "tiny" if args.tiny else "full"
    tree = subset_tree(args.jpeg_dir, args.out / f"cifar10-jpeg-{size}",
                       {"train": args.train_per_class, "test": args.test_per_class})
    study = Study(args.out / f"run-{size}", dataset="imagefolder", data_dir=tree, dataset_options=CANVAS,
                  methods=args.methods, fractions=args.fractions, seeds=args.seeds, recipe={"epochs": args.epochs},
                  fill=FILLS[0], device="cpu")
    for fill in FILLS:
        study.run(fill=fill)
    leakage_started = time.perf_counter()  # measured again on every call (the cells, once: resumed)
    study.leakage(fills=FILLS, fractions=(0.5,) if args.tiny else (0.3, 0.5, 0.7))
    leakage_seconds = time.perf_counter() - leakage_started
    report = study.report()
    wall = time.perf_counter() - started
    # what the study costs, the same on a rerun that finds every cell done: the stage times the run directory
    # recorded (base model, extraction, every retraining) and this call's fill-leakage measurement
    seconds = leakage_seconds + sum(s["seconds"] for s in report.summary["stages"] if s.get("seconds") is not None)

    args.results.mkdir(parents=True, exist_ok=True)
    name = f"cifar10-jpeg{'-tiny' if args.tiny else ''}"
    shutil.copyfile(report.out_dir / "fills.png", args.results / f"{name}.png")
    command = "python benchmarks/real_study.py" + (" --tiny" if args.tiny else "")
    (args.results / f"{name}.md").write_text(numbers_page(report.summary, args, seconds, command))
    if not args.tiny:  # the README and RESULTS.md quote the full study only
        figure, page = f"benchmarks/real-study/{name}.png", f"benchmarks/real-study/{name}.md"
        replace_between(REPO / "README.md", "real-study",
                        readme_snippet(report.summary, args, seconds, command, figure, page))
        replace_between(REPO / "benchmarks" / "RESULTS.md", "real-study",
                        f"`{command}` ({time.strftime('%Y-%m-%d')}, {os.cpu_count()} CPU cores, "
                        f"{platform.processor() or platform.machine()}): {seconds / 60:.0f} min for the whole "
                        f"study (its stage times: base model, extraction, every retraining, fill leakage); "
                        f"the stages are on [{name}.md](real-study/{name}.md).\n")
    for line in report.verdict_lines():
        print(line)
    print(f"real_study: {seconds / 60:.1f} min of stage times, this call {wall / 60:.1f} min; "
          f"figure {args.results / f'{name}.png'}, numbers "
          f"{args.results / f'{name}.md'}, report {report.index_html}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
