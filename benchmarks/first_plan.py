"""The first plan against the run it plans (issue 50 item 4): on a machine with no records yet (an empty cache
directory, a fresh run directory), `roarfast sweep --dry-run` states an ETA; the same sweep is then run and timed as a
whole process. The plan is good when the ETA is within 2x of the measured wall time (a ratio in [0.5, 2]).

    python benchmarks/first_plan.py --out /tmp/first-plan [--case embedded] [--case photos --tree DIR]

Cases (each a fresh cache directory ROARFAST_CACHE_DIR under --out, so nothing measured before is read):
  embedded  the embedded dataset, one estimator (random), one fraction, one seed, with its control: 2 cells
  photos    a JPEG tree of photographs (--tree, train/ and val/), 224-px canvases streamed from disk (stream=true),
            the same grid: 2 streamed 224-px cells, the kind of run the issue found planned 12x too long
Writes --out/first_plan.json and first_plan.md (the machine, the load average at each start).
"""

import argparse
import json
import os
import platform
import re
from datetime import datetime, timezone
from pathlib import Path

from everyday import timed  # benchmarks/ is this script's folder: on the path

ROOT = Path(__file__).resolve().parent.parent

#: the grid of every case: small enough to run on 2 cores in minutes, with a base model, ranks and cells
GRID = ["--method", "random", "--fraction", "0.5", "--mode", "roar", "--seeds", "1"]
#: the plan's ETA line: "ETA: 6m17s: base model ..." (hours, minutes, seconds as the CLI prints them)
ETA = re.compile(r"^ETA: ((?:\d+h)?(?:\d+m)?(?:[\d.]+s)?)", re.M)


def seconds_of(text: str) -> float:
    """'2h07m' / '6m17s' / '45s' / '0.4s' (as the CLI prints a duration) -> seconds."""
    parts = dict((unit, float(value)) for value, unit in re.findall(r"([\d.]+)([hms])", text))
    return 3600 * parts.get("h", 0) + 60 * parts.get("m", 0) + parts.get("s", 0)


def case_arguments(case: str, tree: Path) -> list:
    """The data arguments of a case (argparse's choices admit only these two)."""
    if case == "embedded":
        return []
    return ["--dataset", "imagefolder", "--data-dir", str(tree), "--data-option", "stream=true"]


def measure(case: str, tree: Path, out: Path) -> dict:
    """The dry run's ETA on an empty cache, then the sweep itself, timed."""
    env = {"ROARFAST_CACHE_DIR": str(out / f"cache-{case}")}
    sweep = ["sweep", "--run-dir", str(out / f"run-{case}"), *case_arguments(case, tree), *GRID, "--no-progress"]
    load = round(os.getloadavg()[0], 1)
    planned = timed(ROOT, [*sweep, "--dry-run"], env)
    plan_wall, plan = planned["wall_s"], planned["output"]
    found = ETA.search(plan)
    if found is None:
        raise RuntimeError(f"no ETA line in the dry run's output:\n{plan[-2000:]}")
    eta = seconds_of(found.group(1))
    run_wall = timed(ROOT, sweep, env)["wall_s"]
    row = {"case": case, "eta_s": eta, "run_s": round(run_wall, 1), "ratio": round(eta / run_wall, 2),
           "dry_run_s": round(plan_wall, 1), "load": load, "plan": [line for line in plan.splitlines()
                                                                     if line.startswith(("plan", "ETA"))]}
    print(f"{case}: ETA {eta:.0f} s, ran {run_wall:.0f} s: ETA / run = {row['ratio']}", flush=True)
    return row


def table(rows: list) -> str:
    when = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    head = (f"`python benchmarks/first_plan.py` on {platform.machine()}, {os.cpu_count()} cores, {when}; each case "
            "on an empty cache directory (no step, trace or extraction recorded before):\n\n"
            "| case | first dry run | its ETA | the sweep ran | ETA / run | within 2x |\n"
            "| --- | ---: | ---: | ---: | ---: | --- |\n")
    return head + "".join(
        f"| {r['case']} | {r['dry_run_s']} s (load {r['load']}) | {r['eta_s']:.0f} s | {r['run_s']} s | {r['ratio']} "
        f"| {'yes' if 0.5 <= r['ratio'] <= 2 else 'no'} |\n" for r in rows)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--case", action="append", choices=["embedded", "photos"], help="repeatable (default: both)")
    parser.add_argument("--tree", type=Path, help="a JPEG tree of photographs for the photos case")
    parser.add_argument("--out", type=Path, required=True, help="a fresh folder for caches, runs and the tables")
    args = parser.parse_args()
    cases = args.case or ["embedded", "photos"]
    args.out, args.tree = args.out.resolve(), args.tree and args.tree.resolve()  # the commands run in the repository
    if "photos" in cases and args.tree is None:  # before any case runs: the embedded one takes a minute or more
        parser.error("the photos case needs --tree DIR (a JPEG tree with train/ and val/)")
    args.out.mkdir(parents=True, exist_ok=True)
    if any(args.out.iterdir()):
        raise SystemExit(f"{args.out} is not empty: the first plan needs an empty cache (pass a fresh folder)")
    rows = [measure(case, args.tree, args.out) for case in cases]
    (args.out / "first_plan.json").write_text(json.dumps(rows, indent=1))
    (args.out / "first_plan.md").write_text(table(rows))
    print(table(rows))


if __name__ == "__main__":
    main()
