"""Allocators side by side (issue 49 item 4): each configuration loaded before its process starts (LD_PRELOAD, or
glibc's tunables by environment), interleaved (A B C A B C ...) and repeated, on the memory benchmarks: CPU
extraction on the embedded dataset (`roarfast extract --method M --device cpu` on a 1-epoch base model, 1,000 + 200
images), 224-px
cells (memory_scale.py's traced cell, one process each) and a long 224-px extraction (memory_scale.py's
--extract-rounds: the tree's train split extracted in one process, chunk after chunk). Per benchmark and
configuration: the median wall seconds, peak RSS (the process's, from wait4), user and system seconds, and the ratio
of each to the block cache's measured in the same run, whether the rank stores are the same bytes, and
system / user time.

    python benchmarks/allocators.py --out /tmp/roarfast-allocators [--repeats 3]
        [--block-cache /path/to/a/checkout/with/csrc/memory] [--configs block-cache,jemalloc,...]
        [--methods ig sg-sq,var] [--cells 1000 4000 20000] [--long 20000 --long-rounds 1]

Configurations: `block-cache` (roarfast's own CPU allocator, csrc/memory/, as main 75f2f8b had it: run from the
--block-cache checkout with its defaults), `glibc-tuned` (GLIBC_TUNABLES: no block mapped on its own, the free
heap top kept; the heap handed back between chunks), `glibc` (untuned), `jemalloc`, `tcmalloc`, `mimalloc` (each
preloaded: found as the CLI finds them, roarfast.common.memory.find_allocator; one not found is left out and said).
Every configuration but `block-cache` runs the --checkout (this repository unless given) with ROARFAST_ALLOCATOR=0,
so the CLI keeps the environment it is given, and ROARFAST_MALLOC_TUNING=0, so a checkout from before issue 49 does
not tune glibc in-process. Every measurement is appended to allocators.jsonl under --out as it comes; the table is
made from all of that file's records (so runs into one --out add up; --fresh starts it anew).
"""

import argparse
import hashlib
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

import memory_scale  # noqa: E402  (benchmarks/ on the path first)
from roarfast.common.memory import GLIBC_TUNABLES, find_allocator, library_dirs  # noqa: E402

SIDE, MODEL = 224, "scale_run:small_net"
CONFIGS = ("block-cache", "glibc-tuned", "glibc", "jemalloc", "tcmalloc", "mimalloc")
#: the environment of every configuration but the block cache's: the CLI keeps what it is given; a checkout from
#: before issue 49 does not tune glibc in its process
PLAIN = {"ROARFAST_ALLOCATOR": "0", "ROARFAST_MALLOC_TUNING": "0"}
#: the embedded dataset's extraction: 1,000 + 200 images (throughput.py's extract-cli, and the figures in
#: benchmarks/RESULTS.md before issue 49)
EMBEDDED = ["--data-option", "num_train=1000", "--data-option", "num_test=200"]


def config_env(name: str) -> dict | None:
    """The variables configuration `name` starts its process with (None: its allocator is not installed here)."""
    if name == "block-cache":
        return {"ROARFAST_ALLOCATOR": "0"}
    if name == "glibc-tuned":
        # the heap handed back between chunks as the tuned glibc does: a block-cache checkout does it only with its
        # in-process tuning on (its cache off), which sets what these tunables set
        return {"ROARFAST_ALLOCATOR": "0", "ROARFAST_BLOCK_CACHE": "0", "GLIBC_TUNABLES": GLIBC_TUNABLES}
    if name == "glibc":
        return dict(PLAIN)
    library = find_allocator(name)
    return None if library is None else {**PLAIN, "LD_PRELOAD": str(library)}


def timed(command: list, env: dict, log: Path) -> dict:
    """Runs `command` to its end: wall, user and system seconds, peak RSS (bytes) and minor page faults of the
    process (wait4: children included); its stdout's last line."""
    started = time.perf_counter()
    with open(log, "w") as err, open(log.with_suffix(".out"), "w") as out:
        process = subprocess.Popen(command, env=env, stdout=out, stderr=err)
        _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - started
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(map(str, command))} failed (exit {os.waitstatus_to_exitcode(status)}): see {log}")
    lines = log.with_suffix(".out").read_text().strip().splitlines()
    return {"wall": wall, "user": usage.ru_utime, "sys": usage.ru_stime, "peak": usage.ru_maxrss * 1024,
            "faults": usage.ru_minflt, "last": lines[-1] if lines else ""}


def store_digest(run: Path) -> str:
    """SHA-256 over the run directory's rank stores (their ranks.npy: the manifests hold times)."""
    digest = hashlib.sha256()
    for path in sorted((run / "ranks").rglob("ranks.npy")):
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def benchmarks(args, out: Path) -> list:
    """(name, runner) per benchmark; a runner takes (checkout, env, log) and returns timed()'s dict."""
    def python_env(checkout: Path, env: dict) -> dict:
        return {**os.environ, "PYTHONPATH": os.pathsep.join([str(checkout), str(ROOT / "benchmarks")]), **env}

    embedded = out / "embedded"
    if args.methods and not (embedded / "models").is_dir():
        subprocess.run([sys.executable, "-m", "roarfast.cli", "train", "--run-dir", str(embedded), "--device", "cpu",
                        "--epochs", "1", *EMBEDDED, "--no-progress"], check=True, env=python_env(args.checkout, PLAIN))
    os.environ["PYTHONPATH"] = os.pathsep.join([str(args.checkout), str(ROOT / "benchmarks")])  # prepare's commands
    runs = {size: memory_scale.prepare(out, size, SIDE, MODEL) for size in dict.fromkeys(args.cells + args.long)}
    found = []
    for i, method in enumerate(args.methods):
        copy = out / f"embedded-{i}"  # the base model's run directory, a copy per method: its stores alone
        if not copy.is_dir():
            shutil.copytree(embedded, copy, ignore=shutil.ignore_patterns("ranks"))

        def extract(checkout, env, log, method=method, copy=copy):
            result = timed([sys.executable, "-m", "roarfast.cli", "extract", "--run-dir", str(copy), "--method",
                            method, "--device", "cpu", "--force", "--no-progress"], python_env(checkout, env), log)
            return {**result, "digest": store_digest(copy)}
        found.append((f"embedded 32 px, extract {method}", extract))
    for size in args.cells:
        def cell(checkout, env, log, run=runs[size]):
            result = timed([sys.executable, "-c", memory_scale.TRACER, str(run), MODEL], python_env(checkout, env), log)
            return {**result, "cell_s": json.loads(result["last"])["cell_s"]}
        found.append((f"224-px cell, {size:,} images", cell))
    for size in args.long:
        def long(checkout, env, log, run=runs[size], size=size):
            tree = run.parent / f"tree-{size}-{SIDE}"
            result = timed([sys.executable, "-c", memory_scale.ROUNDS_TRACER, str(run), str(tree), MODEL,
                            str(args.long_rounds)], python_env(checkout, env), log)
            samples = json.loads(result["last"])
            third = samples[max(0, len(samples) // 3 - 1)]["hwm"]  # the peak after a third of the chunks: creep
            return {**result, "creep": samples[-1]["hwm"] - third, "chunks": len(samples)}
        found.append((f"224-px extraction, {size:,} images' train split x{args.long_rounds} in one process", long))
    return found


def ratio(value: float, base: float | None) -> str:
    return "" if not base else f" ({value / base:.2f}x)"


def table(records: list) -> str:
    """Markdown: per benchmark and configuration the medians and their ratios to the block cache's."""
    lines = ["| benchmark | allocator | n | wall s | peak RSS MiB | user s | sys s | sys / user | page faults | ranks |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for bench in dict.fromkeys(r["bench"] for r in records):
        rows = [r for r in records if r["bench"] == bench]
        med = {config: {key: statistics.median(r[key] for r in rows if r["config"] == config)
                        for key in ("wall", "peak", "user", "sys", "faults")}
               for config in dict.fromkeys(r["config"] for r in rows)}
        base = med.get("block-cache", {})
        digests = {r.get("digest") for r in rows}
        for config, m in med.items():
            n = sum(r["config"] == config for r in rows)
            same = "-" if None in digests else ("same" if len(digests) == 1 else "DIFFER")
            creep = [r["creep"] for r in rows if r["config"] == config and "creep" in r]
            peak = f"{m['peak'] / 2**20:,.0f}{ratio(m['peak'], base.get('peak'))}"
            if creep:
                peak += f", +{statistics.median(creep) / 2**20:,.0f} after the first third"
            lines.append(f"| {bench} | {config} | {n} | {m['wall']:.1f}{ratio(m['wall'], base.get('wall'))} | {peak} "
                         f"| {m['user']:.1f} | {m['sys']:.1f}{ratio(m['sys'], base.get('sys'))} | "
                         f"{m['sys'] / m['user']:.0%} | {m['faults'] / 1e6:.2f} M{ratio(m['faults'], base.get('faults'))} "
                         f"| {same} |")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True, help="where the data, runs and results go (not the repository)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--configs", default=",".join(CONFIGS), help="comma-separated, from: " + ", ".join(CONFIGS))
    parser.add_argument("--checkout", type=Path, default=ROOT, help="the roarfast every configuration but the block "
                        "cache's runs")
    parser.add_argument("--block-cache", type=Path, default=None,
                        help="a checkout that has the block cache (csrc/memory/, e.g. 75f2f8b); without it that "
                             "configuration is left out")
    parser.add_argument("--methods", nargs="*", default=["ig", "sg-sq,var"], help="embedded-dataset extractions")
    parser.add_argument("--cells", nargs="*", type=int, default=[1000, 4000, 20000], help="224-px cells' tree sizes")
    parser.add_argument("--long", nargs="*", type=int, default=[20000], help="tree whose train split is extracted "
                        "--long-rounds times in one process")
    parser.add_argument("--long-rounds", type=int, default=1)
    parser.add_argument("--fresh", action="store_true", help="forget the records of earlier runs into --out")
    parser.add_argument("--threads", type=int, default=None,
                        help="OMP_NUM_THREADS for every process (default: torch's own); on a loaded machine 1 keeps a "
                             "thread from waiting for its sibling")
    args = parser.parse_args()
    out = args.out.resolve()
    if out.is_relative_to(ROOT):
        raise SystemExit(f"--out {out} lies in the repository: give a folder outside it")
    (out / "logs").mkdir(parents=True, exist_ok=True)
    records_file = out / "allocators.jsonl"
    if args.fresh:
        records_file.unlink(missing_ok=True)
    configs = {}
    if args.threads:
        os.environ["OMP_NUM_THREADS"] = str(args.threads)
    for name in args.configs.split(","):
        env = config_env(name)
        if name == "block-cache" and not (args.block_cache and (args.block_cache / "csrc" / "memory").is_dir()):
            print("block-cache: left out (give --block-cache, a checkout that has csrc/memory/)", flush=True)
        elif env is None:
            print(f"{name}: left out (not found in {', '.join(map(str, library_dirs()))})", flush=True)
        else:
            configs[name] = ((args.block_cache if name == "block-cache" else args.checkout).resolve(), env)
    found = benchmarks(args, out)
    for repeat in range(args.repeats):
        for bench, run in found:
            for name, (checkout, env) in configs.items():  # interleaved: A B C A B C
                log = out / "logs" / f"{len(found)}-{bench.split(',')[0].replace(' ', '_')}-{name}-{repeat}.err"
                result = run(checkout, env, log)
                record = {"bench": bench, "config": name, "repeat": repeat, "load": os.getloadavg()[0],
                          **{k: v for k, v in result.items() if k != "last"}}
                with open(records_file, "a") as file:
                    file.write(json.dumps(record) + "\n")
                print(json.dumps(record), flush=True)
    records = [json.loads(line) for line in records_file.read_text().splitlines()]
    loads = [r["load"] for r in records]
    threads = os.environ.get("OMP_NUM_THREADS", "torch's default")
    print(f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, load average "
          f"{min(loads):.1f}-{max(loads):.1f} during the runs, threads a process: {threads}; "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    print(table(records))


if __name__ == "__main__":
    main()
