"""Are two run directories the same run? `python benchmarks/compare_runs.py DIR_A DIR_B` compares
- every measurement of results.sqlite: the same keys (kind, dataset, model, method, mode, fill, fraction,
  seed, config hash), each with the same status, epochs and accuracies bit for bit (test_acc, val_acc as
  float64 bit patterns); times, dates and versions are left out;
- report/index.md, equal once the stage times and the configurations' finished times (the only timings in
  it) are blanked and the run directory's own path (in notes) is written <run-dir>;
- report/summary.json, equal once its timings (the stages' and the base model's seconds, each
  configuration's first and last finished time) are blanked.
Prints what differs and exits 1 on a difference, 0 when the two agree.

A results.sqlite of an earlier schema (a run made before an upgrade) is compared through a copy migrated by
roarfast.results, so the files themselves are not touched. `--across-versions` matches measurements without
their config hash, for two versions of roarfast that record a configuration differently (the hash covers
what a version writes down, e.g. the ranks' provenance), and leaves the report out: each run directory must
then hold one configuration per cell.
"""

import argparse
import json
import re
import shutil
import struct
import sys
import tempfile
from pathlib import Path

#: what identifies a measurement, and what must be equal between the two runs
KEY = ("kind", "dataset", "model", "method", "mode", "fill", "fraction", "seed", "config_hash")
COMPARED = ("status", "epochs", "test_acc", "val_acc")


def _bits(value):
    """A float as its 64-bit pattern (bit-for-bit comparison; NaN equals itself), anything else as is."""
    return struct.pack("<d", value).hex() if isinstance(value, float) else value


def measurements(run_dir: Path, key_columns=KEY) -> dict:
    """{key: compared values} of run_dir's results.sqlite, read from a migrated copy, keyed by `key_columns`."""
    from roarfast.results import ResultsDB
    from roarfast.rundir.directory import RunDir

    source = RunDir(run_dir).results_path
    with tempfile.TemporaryDirectory() as tmp:
        copy = RunDir(tmp).results_path
        for suffix in ("", "-wal", "-shm"):  # a WAL database is its file plus the log not yet checkpointed
            if Path(f"{source}{suffix}").exists():
                shutil.copy(f"{source}{suffix}", f"{copy}{suffix}")
        with ResultsDB(copy) as db:
            rows = db.rows()
    out = {tuple(row[k] for k in key_columns): tuple(_bits(row[k]) for k in COMPARED) for row in rows}
    if len(out) != len(rows):
        raise SystemExit(f"{run_dir}: several measurements share a key of {', '.join(key_columns)}")
    return out


def index_markdown(run_dir: Path) -> str:
    """report/index.md with the seconds column of its stage-times table and the finished times of its
    configurations table blanked and the run directory's path replaced."""
    from roarfast.rundir.directory import RunDir

    out, in_stage_times, in_configurations = [], False, False
    text = (RunDir(run_dir).report_dir / "index.md").read_text().replace(str(run_dir), "<run-dir>")
    for line in text.splitlines():
        if line.startswith("## "):
            in_stage_times = line == "## Stage times"
            in_configurations = line.startswith("## Configurations: ")
        elif in_stage_times and line.startswith("| ") and not line.startswith("| stage |"):
            line = re.sub(r"^(\| [^|]* \| )[-\d.]+( \|)", r"\1<seconds>\2", line)
        elif in_configurations and line.startswith("| ") and not line.startswith("| configuration |"):
            line = re.sub(r"^(\| [^|]* \| [^|]* \| )[^|]* \| [^|]*( \|)", r"\1<finished> | <finished>\2", line)
        out.append(line)
    return "\n".join(out)


def summary(run_dir: Path) -> dict:
    """report/summary.json with its timings (stage seconds, the base model's training seconds) blanked and the
    run directory's path replaced."""
    from roarfast.rundir.directory import RunDir

    text = (RunDir(run_dir).report_dir / "summary.json").read_text()
    data = json.loads(text.replace(json.dumps(str(run_dir))[1:-1], "<run-dir>"))
    for stage in data.get("stages", []):
        stage["seconds"] = None
    for part in data.get("configurations") or [data]:  # several configurations, or the one
        part.get("base", {})["seconds"] = None
        part.get("configuration", {}).update(first=None, last=None)
    return data


def compare(a: Path, b: Path, across_versions: bool = False) -> list[str]:
    """The differences between run directories a and b, one line each (none: the same run)."""
    problems = []
    key_columns = KEY[:-1] if across_versions else KEY
    ma, mb = measurements(a, key_columns), measurements(b, key_columns)
    for key in sorted(set(ma) | set(mb), key=repr):
        if key not in mb or key not in ma:
            problems.append(f"measurement only in {a if key in ma else b}: {dict(zip(key_columns, key))}")
        elif ma[key] != mb[key]:
            problems.append(f"measurement {dict(zip(key_columns, key))}: {dict(zip(COMPARED, ma[key]))} vs "
                            f"{dict(zip(COMPARED, mb[key]))}")
    if across_versions:
        if not problems:
            print(f"same measurements: {len(ma)} equal bit for bit across versions (keys without the config hash)")
        return problems
    ia, ib = index_markdown(a).splitlines(), index_markdown(b).splitlines()
    differing = [f"index.md line {i + 1}:\n  {x}\n  {y}" for i, (x, y) in enumerate(zip(ia, ib)) if x != y]
    if len(ia) != len(ib):
        differing.append(f"index.md has {len(ia)} lines in {a} and {len(ib)} in {b}")
    problems += differing
    if summary(a) != summary(b):
        problems.append("summary.json differs beyond its timings")
    if not problems:
        print(f"same run: {len(ma)} measurements equal bit for bit "
              f"({sum(1 for k in ma if k[0] == 'retrain')} retraining cells and controls), index.md equal but for "
              f"{sum('<seconds>' in line for line in ia)} stage times, summary.json equal but for its timings")
    return problems


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("run_a", type=Path)
    parser.add_argument("run_b", type=Path)
    parser.add_argument("--across-versions", action="store_true",
                        help="match measurements without their config hash; leave the reports out")
    args = parser.parse_args(argv)
    problems = compare(args.run_a, args.run_b, args.across_versions)
    for line in problems:
        print(line)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
