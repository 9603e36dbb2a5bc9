"""The everyday loop (issues 32 and 50): each command as a user types it (the `roarfast` console script of this
interpreter's environment, so its start again with the allocator is counted), timed as a whole process (wall and
CPU time of the process and its children), the median of --repeats runs:

  sweep --help    the lists of models, datasets, estimators and fills
  report --help   a command's help
  dry embedded    `roarfast sweep --dry-run` on the embedded dataset, a fresh run directory (first, then again:
                  the first run again keeps its answer, the next print it without importing torch; then computed
                  each time, ROARFAST_KEEP_ANSWERS=0: what a changed run directory costs)
  dry tree        `roarfast sweep --dry-run` on an image tree (first: the tree decoded; then again: what is kept;
                  then once a base model is trained: its epochs read by the learning check)
  extract idle    `roarfast extract --method random` on that tree when its ranks are already there (nothing to do)
  ls              `roarfast ls` of that run directory
  import torch    `python -c "import torch"`: the floor of every command that computes (not a roarfast command)

    python benchmarks/everyday.py --after . --tree ../shared/data/cifar10-jpeg --out /tmp/everyday
    python benchmarks/everyday.py --before /work/base --after . --tree ... --out ...

Against ec0ec6e's figures (REFERENCE: a quiet 2-core machine, issue 50) as ratios, and against the goal of 2 s
(GOAL); with --before, that checkout is measured too, back to back. Each checkout runs with its own cache directory
(ROARFAST_CACHE_DIR under --out), so both start cold ("first" rows are one run each); the extract and ls rows need a
base model on the tree, trained first for one epoch (not timed). Writes --out/everyday.json and everyday.md. The venv
is this interpreter's: every checkout needs its compiled extension (roarfast/_C*.so) in place. Numbers taken while
other work shares the machine say so (the load average at each start is in the table).
"""

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path


#: wall seconds of ec0ec6e on a nearly quiet 2-core machine (issue 50): the rows it measured
REFERENCE = {"dry run, embedded (again)": 2.1, "dry run, tree (again)": 2.4, "extract, nothing to do (tree)": 2.1}
#: every everyday command's goal, wall seconds on 2 quiet cores
GOAL = 2.0


#: a row that is not a roarfast command: the process's argv as it is
TORCH = ["python", "-c", "import torch"]


def timed(checkout: Path, argv: list, env: dict) -> dict:
    """One `roarfast ARGV` (this environment's console script; TORCH: this interpreter) in a fresh process with
    `checkout` first on the path: wall and CPU seconds (the process and its children) and what it printed; a failure
    raises with the output's tail."""
    command = [sys.executable, *argv[1:]] if argv == TORCH else [str(Path(sys.executable).parent / "roarfast"), *argv]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(command, cwd=checkout, capture_output=True, text=True,
                          env={**os.environ, **env, "PYTHONPATH": str(checkout)})
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise RuntimeError(f"roarfast {' '.join(argv)} in {checkout} failed ({done.returncode}):\n"
                           f"{(done.stdout + done.stderr)[-3000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"wall_s": wall, "cpu_s": cpu, "output": done.stdout + done.stderr}


def median_of(checkout: Path, argv: list, env: dict, repeats: int) -> dict:
    """The median wall and CPU seconds of `repeats` runs, each run's wall in order (the first of a read-only
    command's runs keeps its answer, the next replay it: roarfast.common.kept), and the load average before the
    first."""
    load = load_average()
    runs = [timed(checkout, argv, env) for _ in range(repeats)]
    return {"wall_s": round(statistics.median(r["wall_s"] for r in runs), 2),
            "cpu_s": round(statistics.median(r["cpu_s"] for r in runs), 2), "load": load, "runs": repeats,
            "walls": [round(r["wall_s"], 2) for r in runs]}


def load_average() -> float:
    return round(os.getloadavg()[0], 1)


def measure(checkout: Path, tree: Path, out: Path, repeats: int) -> dict:
    """Every row for one checkout: {row name: {wall_s, cpu_s, load, runs}}."""
    name = checkout.resolve().name
    env = {"ROARFAST_CACHE_DIR": str(out / f"cache-{name}")}
    runs = out / f"runs-{name}"
    data = ["--dataset", "imagefolder", "--data-dir", str(tree)]
    embedded = ["sweep", "--run-dir", str(runs / "embedded"), "--dry-run"]
    on_tree = ["sweep", "--run-dir", str(runs / "tree"), *data, "--dry-run"]
    extract = ["extract", "--run-dir", str(runs / "tree"), *data, "--method", "random", "--no-progress"]
    rows = {}

    def row(label, argv, times=repeats, extra=None):
        rows[label] = median_of(checkout, argv, {**env, **(extra or {})}, times)
        print(f"{name}: {label}: {rows[label]}", flush=True)

    row("sweep --help", ["sweep", "--help"])
    row("report --help", ["report", "--help"])
    row("dry run, embedded (first)", embedded, 1)
    row("dry run, embedded (again)", embedded)
    row("dry run, embedded (computed again)", embedded, extra={"ROARFAST_KEEP_ANSWERS": "0"})
    row("dry run, tree (first)", on_tree, 1)
    row("dry run, tree (again)", on_tree)
    timed(checkout, ["train", "--run-dir", str(runs / "tree"), *data, "--epochs", "1", "--no-progress"], env)
    row("dry run, tree (a base model trained)", on_tree)
    timed(checkout, extract, env)
    row("extract, nothing to do (tree)", extract)
    row("ls", ["ls", "--run-dir", str(runs / "tree")])
    row("import torch", TORCH)
    return rows


def markdown(result: dict) -> str:
    """The table: each checkout's wall (CPU; load), then the last checkout's wall as ratios: to the first checkout's
    in this run (with --before: the same machine, back to back), to ec0ec6e's figures on the issue's machine
    (REFERENCE) and to GOAL."""
    checkouts = result["checkouts"]
    head = " | ".join(f"{c['commit']}" for c in checkouts)
    paired = len(checkouts) > 1
    lines = [f"`python benchmarks/everyday.py` on {result['machine']}, {result['date']}; the tree: {result['tree']} "
             f"({result['tree_files']:,} files); wall seconds (CPU seconds; load average at the start; each run's wall "
             f"in order), the median of {result['repeats']} runs but the \"first\" rows; ratios: the last checkout's wall"
             + (f" against {checkouts[0]['commit']}'s in this run," if paired else "")
             + f" against ec0ec6e's figures on the issue's machine and against {GOAL:g} s:", "",
             f"| command | {head} |" + (f" / {checkouts[0]['commit']} |" if paired else "")
             + f" ec0ec6e there | / ec0ec6e there | / {GOAL:g} s |",
             "| --- |" + " ---: |" * (len(checkouts) + 3 + paired)]
    for label in checkouts[-1]["rows"]:
        cells = [f"{c['rows'][label]['wall_s']:.1f} s ({c['rows'][label]['cpu_s']:.1f}; load "
                 f"{c['rows'][label]['load']}{_each(c['rows'][label])})" for c in checkouts]
        last = checkouts[-1]["rows"][label]["wall_s"]
        if paired:
            cells.append(f"{last / checkouts[0]['rows'][label]['wall_s']:.2f}")
        reference = REFERENCE.get(label)
        lines.append(f"| {label} | {' | '.join(cells)} | {f'{reference:.1f} s' if reference else '-'} | "
                     f"{f'{last / reference:.2f}' if reference else '-'} | {last / GOAL:.2f} |")
    return "\n".join(lines) + "\n"


def _each(row: dict) -> str:
    """Each run's wall, in order, where a row has several."""
    walls = row.get("walls", [])
    return f"; runs {' / '.join(f'{w:.1f}' for w in walls)}" if len(walls) > 1 else ""


def commit_of(checkout: Path) -> str:
    return subprocess.run(["git", "-C", str(checkout), "rev-parse", "--short", "HEAD"], capture_output=True,
                          text=True).stdout.strip() or "?"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before", type=Path, help="a checkout measured first (optional)")
    parser.add_argument("--after", type=Path, required=True, help="the checkout measured (last)")
    parser.add_argument("--tree", type=Path, required=True, help="an ImageFolder tree (train/ and test/ or classes)")
    parser.add_argument("--out", type=Path, required=True, help="results and the runs' directories (not the repo)")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each row but the first ones (the median)")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    checkouts = []
    for checkout in filter(None, (args.before, args.after)):
        checkouts.append({"path": str(checkout.resolve()), "commit": commit_of(checkout),
                          "rows": measure(checkout, args.tree.resolve(), args.out, args.repeats)})
    result = {"machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores",
              "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "tree": str(args.tree),
              "tree_files": sum(1 for p in args.tree.rglob("*") if p.is_file()), "repeats": args.repeats,
              "checkouts": checkouts}
    (args.out / "everyday.json").write_text(json.dumps(result, indent=1))
    table = markdown(result)
    (args.out / "everyday.md").write_text(table)
    print(table)


if __name__ == "__main__":
    main()
