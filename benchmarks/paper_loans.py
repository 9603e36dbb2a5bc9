"""The paper's CIFAR grid run across GPU loans (issue 51 item 4). A loan is a fresh machine for at most 15 minutes
of device time (10 a call): nothing it writes survives it but the files it returns (at most 8, 16 MiB each), and
the next loan sees only what its call carries. The grid (about an hour of one GPU) is therefore run in calls,
each of which ends by packing what the next one needs into one archive:

    paper-carry.tar.gz   run/      results.sqlite (one consistent copy), HEAD.json, configurations/, datasets/,
                                   stages.json, models/<id>/ (the base model: weights and meta, a few MB)
                         ranks/    each rank store's manifest (ranks/<method>/<id>/<split>/manifest.json: its
                                   per-chunk checksums), not its ranks (1.7 GB for CIFAR-10's 14 estimators)
                         loans.json each call: machine, code digest, what it carried in, the ids and the seconds

A call (paper_call):
  1. on a fresh machine (no results.sqlite in the run directory) the carried archive is unpacked: the run
     directory's records and base model into it, the manifests beside it (never into it: a store is its ranks);
  2. the ranks are extracted again from the carried checkpoint (`roarfast extract`, the methods whose stores were
     complete, so the same ids) and each store's checksums compared with its carried manifest's; a store that
     differs stops the call before any cell trains on other ranks than the cells before it did (the archive is
     returned as it came). The base model is carried, not trained again: whether a GPU training is bit for bit
     the same from one machine to the next is not known, and its checkpoint is small;
  3. one sweep per fill, in order (a fill's sweep is its own configuration, named paper-<fill>; the mask-only
     controls are shared), each cut at the call's time (SIGINT: the cell in flight gives its claim back;
     SIGKILL 30 s later) and resumed by the next call; after each, HEAD's base model, ranks and configuration ids
     are compared with those the earlier calls recorded for that fill (code or flags that changed between loans
     would show there);
  4. the archive is written again; when every fill's sweep has finished, `roarfast report --all` and `roarfast
     paper` are written and packed too.

simulate() runs the same calls on a CPU: a straight run, then loan 1 cut once `cut_cells` cells are done, packed,
its run directory wiped, loan 2 unpacked and finished; the resumed rows must equal the straight run's.
"""

import hashlib
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
CARRY = "paper-carry.tar.gz"
REPORT = "paper-report.tar.gz"
#: the most the device tool returns in one file
CARRY_LIMIT = 16 * 2**20
#: the run directory's entries the archive leaves out: rank stores (their manifests travel apart), claims
#: (locks, held by no one once the machine is gone), reports (written again); results.sqlite goes as one copy
LEFT_OUT = ("ranks", "claims", "report", "paper")
RESULTS = "results.sqlite"
#: seconds a sweep has after SIGINT to give its claims back before it is killed
INTERRUPT_GRACE_S = 30
#: seconds a call keeps after its last sweep for the reports and the archive
RESERVE_S = 45
#: a sweep is not started with less time than this left (loading the data and the ranks' check take about 20 s)
LEAST_SWEEP_S = 40
#: what the code digest covers: what decides a cell's numbers, and this round's scripts
CODE = ("roarfast", "csrc", "benchmarks/gpu_round.py", "benchmarks/paper_loans.py", "benchmarks/cifar_gpu.py")
#: a done row as two runs must agree on it: its key, then its measurements (never its seconds)
ROW_FIELDS = ("kind", "dataset", "model", "method", "mode", "fill", "fraction", "seed", "config_hash", "test_acc",
              "val_acc", "epochs")


@dataclass(frozen=True)
class PaperGrid:
    """What every call of the grid runs: `sweep` (the flags of `roarfast sweep` that pick the grid), one sweep per
    fill of `fills`, on `data` (--dataset and its flags) and `device`."""

    sweep: tuple
    fills: tuple
    data: tuple
    device: str
    extra: tuple = field(default=())  # --group-size and the like: flags that change the time, never the cells

    def sweep_command(self, run_dir: Path, fill: str) -> list:
        return [*roarfast(), "sweep", "--run-dir", str(run_dir), "--device", self.device, "--no-progress",
                *self.data, *self.sweep, "--fill", fill, "--name", f"paper-{fill}", *self.extra]

    def extract_command(self, run_dir: Path, methods: list) -> list:
        return [*roarfast(), "extract", "--run-dir", str(run_dir), "--device", self.device, "--no-progress",
                *self.data, "--method", ",".join(methods)]


def roarfast() -> list:
    """The command line of `roarfast` run as a user runs it (it starts again once with its allocator preloaded)."""
    return [sys.executable, "-m", "roarfast.cli"]


def side(run_dir: Path, what: str) -> Path:
    """A file or folder of this script's beside the run directory (never in it: it holds roarfast's records)."""
    return run_dir.parent / f"{run_dir.name}.{what}"


def code_digest(root: Path = ROOT) -> str:
    """sha256 of the files CODE names (paths and bytes, sorted), to say when two calls ran other code."""
    digest = hashlib.sha256()
    for name in CODE:
        path = root / name
        files = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix in (".py", ".h", ".cpp", ".cu", ".cuh")) \
            if path.is_dir() else [path]
        for file in files:
            digest.update(str(file.relative_to(root)).encode() + b"\0" + file.read_bytes())
    return digest.hexdigest()[:16]


# ------------------------------------------------------------------------------------------------ the archive

def pack(run_dir: Path, archive: Path, loans: list) -> dict:
    """Writes `archive` from `run_dir` (the module docstring's layout) and `loans`; returns its members' sizes.
    Refuses (SystemExit) an archive over CARRY_LIMIT, naming its largest members."""
    sizes = {}
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / RESULTS
        if (run_dir / RESULTS).exists():
            # one file holding every committed row, the write-ahead log of a killed sweep included
            with sqlite3.connect(run_dir / RESULTS) as source, sqlite3.connect(copy) as target:
                source.backup(target)
            source.close()
            target.close()
        (Path(tmp) / "loans.json").write_text(json.dumps(loans, indent=1) + "\n")
        archive.parent.mkdir(parents=True, exist_ok=True)
        partial = archive.with_name(archive.name + ".partial")
        with tarfile.open(partial, "w:gz") as tar:
            def add(path: Path, name: str):
                tar.add(path, arcname=name, recursive=False)
                sizes[name] = path.stat().st_size

            add(Path(tmp) / "loans.json", "loans.json")
            if copy.exists():
                add(copy, f"run/{RESULTS}")
            if run_dir.is_dir():
                for path in sorted(run_dir.rglob("*")):
                    parts = path.relative_to(run_dir).parts
                    if path.is_file() and parts[0] not in LEFT_OUT and not parts[0].startswith(RESULTS):
                        add(path, "run/" + "/".join(parts))
                for key, manifest in sorted(reference_manifests(run_dir).items()):
                    add(manifest, "/".join(("ranks", *key, "manifest.json")))
        partial.replace(archive)
    if archive.stat().st_size > CARRY_LIMIT:
        largest = ", ".join(f"{name} ({size / 2**20:.1f} MiB)" for name, size in
                            sorted(sizes.items(), key=lambda item: -item[1])[:3])
        raise SystemExit(f"{archive}: {archive.stat().st_size / 2**20:.1f} MiB, over the {CARRY_LIMIT / 2**20:.0f} MiB "
                         f"a returned file may take; largest: {largest}")
    return sizes


def extract_data(tar: tarfile.TarFile, into: str) -> None:
    """The archive's members into `into`, only files and folders below it (no links, devices or paths out):
    tarfile's "data" filter where this Python has it (3.11.4 and later), else the same refusals here."""
    if hasattr(tarfile, "data_filter"):
        tar.extractall(into, filter="data")
        return
    for member in tar.getmembers():
        name = Path(member.name)
        if not (member.isfile() or member.isdir()) or name.is_absolute() or ".." in name.parts:
            raise SystemExit(f"the archive's member {member.name!r} is not a file or folder below its root: refused")
    tar.extractall(into)


def unpack(archive: Path, run_dir: Path) -> list:
    """The archive's run directory into `run_dir` (which must hold no results), its manifests beside it
    (side(run_dir, "carried-ranks")); returns its loans."""
    if (run_dir / RESULTS).exists():
        raise SystemExit(f"{run_dir} holds results already: the archive is unpacked only on a fresh machine")
    manifests = side(run_dir, "carried-ranks")
    shutil.rmtree(manifests, ignore_errors=True)
    with tempfile.TemporaryDirectory(dir=run_dir.parent if run_dir.parent.is_dir() else None) as tmp:
        with tarfile.open(archive, "r:gz") as tar:
            extract_data(tar, tmp)
        run_dir.mkdir(parents=True, exist_ok=True)
        for path in sorted((Path(tmp) / "run").iterdir()):
            path.rename(run_dir / path.name)
        if (Path(tmp) / "ranks").is_dir():
            (Path(tmp) / "ranks").rename(manifests)
        return json.loads((Path(tmp) / "loans.json").read_text())


def manifest_files(folder: Path) -> dict:
    """{(method folder, rank id, split): its manifest.json} of the stores below `folder` (a run directory's ranks/,
    or the carried manifests)."""
    return {tuple(p.relative_to(folder).parts[:3]): p for p in sorted(folder.glob("*/*/*/manifest.json"))}


def manifests_of(folder: Path) -> dict:
    """{(method folder, rank id, split): manifest} of the stores below `folder`."""
    return {key: json.loads(path.read_text()) for key, path in manifest_files(folder).items()}


def reference_manifests(run_dir: Path) -> dict:
    """The manifests the next call checks its ranks against: the carried complete stores' (what the cells so far
    trained on, kept even where this call's extraction differed or was cut), then this machine's for the others."""
    carried = side(run_dir, "carried-ranks")
    kept = {key: path for key, path in manifest_files(carried).items() if json.loads(path.read_text()).get("complete")}
    return {**manifest_files(run_dir / "ranks"), **kept}


def complete(manifests: dict) -> dict:
    return {key: m for key, m in manifests.items() if m.get("complete")}


def compare_ranks(carried: dict, made: dict) -> list:
    """One line per carried complete store that `made` (the stores extracted again) lacks or holds other bytes of."""
    lines = []
    for key, manifest in sorted(complete(carried).items()):
        method, rank_id, split = key
        again = made.get(key)
        if again is None or not again.get("complete"):
            lines.append(f"ranks of {method} ({split}): no complete store {rank_id[:12]} extracted again")
        elif again.get("checksums") != manifest.get("checksums"):
            differing = sum(a != b for a, b in zip(again.get("checksums", []), manifest.get("checksums", [])))
            lines.append(f"ranks of {method} ({split}) {rank_id[:12]}: {differing} of {len(manifest['checksums'])} "
                         "chunks hold other bytes than the carried store's")
    return lines


def done_rows(run_dir: Path) -> list:
    """The done rows of the run directory's results (ROW_FIELDS of each, in key order), read and verified by
    roarfast."""
    from roarfast.results import ResultsDB

    if not (run_dir / RESULTS).exists():
        return []
    with ResultsDB(run_dir / RESULTS, readonly=True) as db:
        return [tuple(row[f] for f in ROW_FIELDS) for row in db.rows(status="done")]


def count_done(results: Path) -> int:
    """Retraining rows done in `results` now (0 while it cannot be read), read without writing anything."""
    try:
        with sqlite3.connect(f"file:{results}?mode=ro", uri=True, timeout=1) as db:
            return db.execute("SELECT COUNT(*) FROM measurements WHERE kind = 'retrain' AND status = 'done'"
                              ).fetchone()[0]
    except sqlite3.Error:
        return 0


# ---------------------------------------------------------------------------------------------------- a call

def run_cut(command: list, seconds: float, until_cells: int | None = None, results: Path | None = None
            ) -> tuple[int | None, float]:
    """(exit code, or None when cut; seconds) of `command` run from the repository's root, cut after `seconds`,
    or once `results` holds `until_cells` done retrainings (the CPU simulation's cut): SIGINT to its process
    group, SIGKILL INTERRUPT_GRACE_S later."""
    print("$ " + " ".join(command), flush=True)
    start = time.monotonic()
    process = subprocess.Popen(command, cwd=ROOT, start_new_session=True)
    while process.poll() is None:
        over = time.monotonic() - start > seconds
        if over or (until_cells is not None and count_done(results) >= until_cells):
            os.killpg(process.pid, signal.SIGINT)
            try:
                process.wait(INTERRUPT_GRACE_S)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
            return None, time.monotonic() - start
        time.sleep(0.5)
    return process.returncode, time.monotonic() - start


def head_ids(run_dir: Path, since: datetime) -> dict | None:
    """The base model, ranks and configuration ids HEAD names, where a request made `since` wrote it (a sweep cut
    before its request leaves the one before it); else None."""
    head = json.loads((run_dir / "HEAD.json").read_text()) if (run_dir / "HEAD.json").exists() else {}
    if not head.get("time") or datetime.fromisoformat(head["time"]) < since:
        return None
    return {"base": head.get("base"), "ranks": head.get("ranks") or {}, "configuration": head.get("configuration")}


def recorded_ids(loans: list, fill: str) -> dict | None:
    """The ids the earliest call that swept `fill` recorded after its sweep."""
    for call in loans:
        for sweep in call.get("sweeps", []):
            if sweep["fill"] == fill and (sweep.get("ids") or {}).get("configuration"):
                return sweep["ids"]
    return None


def finished(loans: list, fill: str) -> bool:
    return any(s["fill"] == fill and s["exit"] == 0 for call in loans for s in call.get("sweeps", []))


def machine() -> dict:
    cuda = torch.cuda.is_available()
    return dict(device=torch.cuda.get_device_name(0) if cuda else "CPU", torch=torch.__version__,
                date=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), code=code_digest())


def regenerate_ranks(run_dir: Path, grid: PaperGrid, seconds: float, call: dict) -> str:
    """Step 2 of a call on a fresh machine: the carried complete stores extracted again and compared (once per
    machine: side(run_dir, "ranks-checked") says it was done); "same", "cut" (the next call does it again) or
    "differ"/"failed" (call["ranks"] says which)."""
    carried = complete(manifests_of(side(run_dir, "carried-ranks")))
    methods = sorted({m.get("method", key[0]) for key, m in carried.items()})
    if not methods or side(run_dir, "ranks-checked").exists():
        return "same"
    code, took = run_cut(grid.extract_command(run_dir, methods), seconds)
    differing = compare_ranks(carried, manifests_of(run_dir / "ranks")) if code == 0 else []
    call["ranks"] = dict(methods=methods, stores=len(carried), exit=code, seconds=took, differing=differing)
    for line in differing:
        print(f"RANKS DIFFER: {line}", flush=True)
    if code is None:
        return "cut"
    if code != 0 or differing:
        return "failed" if code != 0 else "differ"
    side(run_dir, "ranks-checked").write_text(json.dumps(call["ranks"]) + "\n")
    return "same"


def paper_call(run_dir: Path, grid: PaperGrid, seconds: float, carry_in: Path | None = None,
               carry_out: Path | None = None, report_out: Path | None = None, until_cells: int | None = None,
               report: bool = True) -> dict:
    """One call of the grid (the module docstring's steps) in at most `seconds`; returns this call's record and
    every call's so far ({"call", "loans", "finished", "ok", "archive": the carried archive's bytes})."""
    deadline = time.monotonic() + seconds
    run_dir = Path(run_dir).resolve()
    run_dir.parent.mkdir(parents=True, exist_ok=True)
    log_path = side(run_dir, "loans.json")
    call = dict(machine(), carried_in=None, sweeps=[])
    if not (run_dir / RESULTS).exists() and carry_in is not None and Path(carry_in).exists():
        loans = unpack(Path(carry_in), run_dir)
        call["carried_in"] = dict(archive=str(carry_in), calls=len(loans), cells=count_done(run_dir / RESULTS))
    else:
        loans = json.loads(log_path.read_text()) if log_path.exists() else []
    for earlier in loans[-1:]:
        if earlier.get("code") != call["code"]:
            print(f"note: the code differs from the last call's ({earlier.get('code')} -> {call['code']}); the ids "
                  "are compared below", flush=True)
    todo = [fill for fill in grid.fills if not finished(loans, fill)]
    ranks = regenerate_ranks(run_dir, grid, deadline - time.monotonic() - RESERVE_S, call) if todo else "same"
    ok = ranks in ("same", "cut")
    for fill in todo if ranks == "same" else []:
        left = deadline - time.monotonic() - RESERVE_S
        if left < LEAST_SWEEP_S:
            break
        started = datetime.now(timezone.utc)
        code, took = run_cut(grid.sweep_command(run_dir, fill), left, until_cells, run_dir / RESULTS)
        ids = head_ids(run_dir, since=started)
        before = recorded_ids(loans + [call], fill)
        changed = [k for k in ("base", "ranks", "configuration") if ids and before and before[k] != ids[k]]
        call["sweeps"].append(dict(fill=fill, exit=code, seconds=took, cells=count_done(run_dir / RESULTS), ids=ids,
                                   changed=changed))
        if changed:
            print(f"IDS CHANGED for fill {fill} since the earlier calls: {', '.join(changed)}", flush=True)
        if code != 0 or changed:
            ok = code is None and not changed  # cut: resumed by the next call; failed or changed: said
            break
    loans = loans + [call]
    done = all(finished(loans, fill) for fill in grid.fills)
    if done and report and report_out is not None:
        write_reports(run_dir, grid, report_out)
    log_path.write_text(json.dumps(loans, indent=1) + "\n")
    archive = None  # its bytes: said beside the call's record, which the archive holds
    if carry_out is not None:
        pack(run_dir, Path(carry_out), loans)
        archive = Path(carry_out).stat().st_size
    return dict(call=call, loans=loans, finished=done, ok=ok, archive=archive)


def write_reports(run_dir: Path, grid: PaperGrid, out: Path) -> None:
    """`roarfast report --all` and `roarfast paper` for the grid's configurations, packed into `out`."""
    subprocess.run([*roarfast(), "report", "--run-dir", str(run_dir), "--all"], cwd=ROOT, check=True)
    configs = [arg for fill in grid.fills for arg in ("--config", f"paper-{fill}")]
    subprocess.run([*roarfast(), "paper", str(run_dir), *configs], cwd=ROOT, check=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(out, "w:gz") as tar:
        for folder in ("report", "paper"):
            if (run_dir / folder).is_dir():
                tar.add(run_dir / folder, arcname=folder)


# ------------------------------------------------------------------------------------------- the CPU's proof

def wipe(run_dir: Path) -> None:
    """What a new machine lacks: the run directory and this script's files beside it."""
    shutil.rmtree(run_dir, ignore_errors=True)
    for what in ("loans.json", "carried-ranks", "ranks-checked"):
        target = side(run_dir, what)
        shutil.rmtree(target, ignore_errors=True) if target.is_dir() else target.unlink(missing_ok=True)


def simulate(root: Path, grid: PaperGrid, cut_cells: int = 1, seconds: float = 3600) -> dict:
    """A straight run of `grid` and the same grid over two loans (loan 1 cut once `cut_cells` cells are done,
    packed, its run directory wiped; loan 2 unpacked and finished): the rows of both, and where they differ."""
    root = Path(root)
    paper_call(root / "straight" / "run", grid, seconds, report=False)
    resumed = root / "loans" / "run"
    first = paper_call(resumed, grid, seconds, carry_out=root / "loan-1" / CARRY, until_cells=cut_cells)
    wipe(resumed)
    second = paper_call(resumed, grid, seconds, carry_in=root / "loan-1" / CARRY, carry_out=root / "loan-2" / CARRY,
                        report_out=root / "loan-2" / REPORT)
    straight, loans = done_rows(root / "straight" / "run"), done_rows(resumed)
    return dict(straight=straight, resumed=loans, equal=straight == loans, loan_1=first["call"],
                archive_1=first["archive"], loan_2=second["call"], finished=second["finished"], ok=first["ok"] and second["ok"],
                only_straight=sorted(set(straight) - set(loans)), only_resumed=sorted(set(loans) - set(straight)))
