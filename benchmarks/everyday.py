"""The everyday loop (issue 32), before and after, in one sitting: each command as a new user types it, timed as a
whole process (wall and CPU time of the process and its children), for two checkouts of roarfast run back to back:

  help          `roarfast sweep --help` (the lists of models, datasets, estimators and fills)
  dry embedded  `roarfast sweep --dry-run` on the embedded dataset, a fresh run directory (first, then again)
  dry tree      `roarfast sweep --dry-run` on an image tree (first: the tree decoded; second: what is kept)
  extract idle  `roarfast extract --method random` on that tree when its ranks are already there (nothing to do)

    python benchmarks/everyday.py --before /work/base --after . --tree ../shared/data/cifar10-jpeg --out /tmp/everyday

Each checkout runs with its own cache directory (ROARFAST_CACHE_DIR under --out), so both start cold; the extract
rows need a base model on the tree, trained first for one epoch (not timed). Writes --out/everyday.json and
everyday.md (the table benchmarks/RESULTS.md holds). The venv is this interpreter's: both checkouts need its
compiled extension (roarfast/_C*.so) in place.
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


def timed(checkout: Path, argv: list, env: dict) -> dict:
    """One `python -m roarfast.cli ARGV` in a fresh process with `checkout` first on the path: wall and CPU
    seconds (the process and its children), and its exit status; a failure raises with the output's tail."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "roarfast.cli", *argv], cwd=checkout, capture_output=True, text=True,
                          env={**os.environ, **env, "PYTHONPATH": str(checkout)})
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise RuntimeError(f"roarfast {' '.join(argv)} in {checkout} failed ({done.returncode}):\n"
                           f"{(done.stdout + done.stderr)[-3000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"wall_s": round(wall, 2), "cpu_s": round(cpu, 2)}


def load_average() -> float:
    return round(os.getloadavg()[0], 1)


def measure(checkout: Path, tree: Path, out: Path, repeats: int) -> dict:
    """Every row for one checkout: {row name: {wall_s, cpu_s, load}} (help: the median of `repeats`)."""
    name = checkout.resolve().name
    env = {"ROARFAST_CACHE_DIR": str(out / f"cache-{name}")}
    runs = out / f"runs-{name}"
    data = ["--dataset", "imagefolder", "--data-dir", str(tree)]
    rows = {}

    def row(label, argv):
        load = load_average()
        rows[label] = {**timed(checkout, argv, env), "load": load}
        print(f"{name}: {label}: {rows[label]}", flush=True)

    helps = [timed(checkout, ["sweep", "--help"], env) for _ in range(repeats)]
    rows["sweep --help"] = {"wall_s": statistics.median(h["wall_s"] for h in helps),
                            "cpu_s": statistics.median(h["cpu_s"] for h in helps), "load": load_average()}
    print(f"{name}: sweep --help: {rows['sweep --help']}", flush=True)
    row("dry run, embedded (first)", ["sweep", "--run-dir", str(runs / "embedded"), "--dry-run"])
    row("dry run, embedded (again)", ["sweep", "--run-dir", str(runs / "embedded"), "--dry-run"])
    row("dry run, tree (first)", ["sweep", "--run-dir", str(runs / "tree"), *data, "--dry-run"])
    row("dry run, tree (again)", ["sweep", "--run-dir", str(runs / "tree"), *data, "--dry-run"])
    timed(checkout, ["train", "--run-dir", str(runs / "tree"), *data, "--epochs", "1", "--no-progress"], env)
    timed(checkout, ["extract", "--run-dir", str(runs / "tree"), *data, "--method", "random", "--no-progress"], env)
    row("extract, nothing to do (tree)", ["extract", "--run-dir", str(runs / "tree"), *data, "--method", "random",
                                          "--no-progress"])
    return rows


def markdown(result: dict) -> str:
    before, after = result["checkouts"]
    lines = [f"`python benchmarks/everyday.py` on {result['machine']}, {result['date']}; the tree: {result['tree']} "
             f"({result['tree_files']:,} files); wall seconds (CPU seconds), load average at each start:", "",
             f"| command | before ({before['commit']}) | after ({after['commit']}) | after / before (wall) |",
             "| --- | ---: | ---: | ---: |"]
    for label, b in before["rows"].items():
        a = after["rows"][label]
        lines.append(f"| {label} | {b['wall_s']:.1f} s ({b['cpu_s']:.1f}; load {b['load']}) | {a['wall_s']:.1f} s "
                     f"({a['cpu_s']:.1f}; load {a['load']}) | {a['wall_s'] / b['wall_s']:.2f} |")
    return "\n".join(lines) + "\n"


def commit_of(checkout: Path) -> str:
    return subprocess.run(["git", "-C", str(checkout), "rev-parse", "--short", "HEAD"], capture_output=True,
                          text=True).stdout.strip() or "?"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before", type=Path, required=True, help="the checkout measured first")
    parser.add_argument("--after", type=Path, required=True, help="the checkout measured second")
    parser.add_argument("--tree", type=Path, required=True, help="an ImageFolder tree (train/ and test/ or classes)")
    parser.add_argument("--out", type=Path, required=True, help="results and the runs' directories (not the repo)")
    parser.add_argument("--repeats", type=int, default=3, help="--help runs per checkout (the median is kept)")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    checkouts = []
    for checkout in (args.before, args.after):
        checkouts.append({"path": str(checkout.resolve()), "commit": commit_of(checkout),
                          "rows": measure(checkout, args.tree.resolve(), args.out, args.repeats)})
    result = {"machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores",
              "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "tree": str(args.tree),
              "tree_files": sum(1 for p in args.tree.rglob("*") if p.is_file()), "checkouts": checkouts}
    (args.out / "everyday.json").write_text(json.dumps(result, indent=1))
    table = markdown(result)
    (args.out / "everyday.md").write_text(table)
    print(table)


if __name__ == "__main__":
    main()
