"""benchmarks/paper_loans.py, the paper grid across GPU loans, on a tiny fake run directory (no GPU, no training):
what the carried archive holds and leaves out, that a fresh machine gets back the run directory's records and the
rank stores' manifests (never their ranks), that rows still in SQLite's write-ahead log travel, the size limit,
the ranks' check against the carried manifests, and that a call resumes from the carried loans."""

import json
import sqlite3
import tarfile

import pytest

from benchmarks import paper_loans
from benchmarks.paper_loans import PaperGrid, side

MANIFEST = {"complete": True, "method": "grad", "checksums": ["aa", "bb"]}


def results_db(path, rows):
    """A results.sqlite in WAL mode holding `rows` (kind, status), left open: its rows stay in the -wal file, as a
    sweep killed mid-call leaves them."""
    db = sqlite3.connect(path)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA wal_autocheckpoint=0")
    db.execute("CREATE TABLE measurements (kind TEXT, status TEXT, test_acc REAL)")
    db.executemany("INSERT INTO measurements VALUES (?, ?, ?)", rows)
    db.commit()
    return db


def fake_run(run_dir):
    """A run directory as a cut sweep leaves it: records, a base model, a complete rank store, a claim, a report."""
    files = {"HEAD.json": '{"base": "b1"}', "configurations/paper-road.json": "{}", "datasets/d1.json": "{}",
             "models/b1/weights.safetensors": "w" * 1000, "models/b1/meta.json": "{}",
             "ranks/grad/r1/train/manifest.json": json.dumps(MANIFEST), "ranks/grad/r1/train/chunk-0.npy": "x" * 5000,
             "claims/cell-3.lock": "held", "report/index.md": "old report"}
    for name, text in files.items():
        (run_dir / name).parent.mkdir(parents=True, exist_ok=True)
        (run_dir / name).write_text(text)
    return results_db(run_dir / paper_loans.RESULTS, [("retrain", "done", 0.5), ("retrain", "done", 0.6),
                                                      ("retrain", "claimed", None)])


def test_the_archive_carries_records_model_and_manifests_only(tmp_path):
    run = tmp_path / "a" / "run"
    run.mkdir(parents=True)
    db = fake_run(run)
    assert (run / (paper_loans.RESULTS + "-wal")).stat().st_size > 0  # the rows are not in the main file yet
    archive = tmp_path / "out" / paper_loans.CARRY
    loans = [{"sweeps": [{"fill": "road", "exit": None}]}]
    sizes = paper_loans.pack(run, archive, loans)
    db.close()
    with tarfile.open(archive) as tar:
        names = set(tar.getnames())
    assert names == {"loans.json", "run/results.sqlite", "run/HEAD.json", "run/configurations/paper-road.json",
                     "run/datasets/d1.json", "run/models/b1/weights.safetensors", "run/models/b1/meta.json",
                     "ranks/grad/r1/train/manifest.json"}
    assert sizes["run/models/b1/weights.safetensors"] == 1000

    fresh = tmp_path / "b" / "run"  # another machine: nothing but the archive
    fresh.parent.mkdir()
    assert paper_loans.unpack(archive, fresh) == loans
    assert (fresh / "HEAD.json").read_text() == '{"base": "b1"}'
    assert (fresh / "models" / "b1" / "weights.safetensors").read_text() == "w" * 1000
    assert not (fresh / "ranks").exists() and not (fresh / "claims").exists() and not (fresh / "report").exists()
    assert paper_loans.manifests_of(side(fresh, "carried-ranks")) == {("grad", "r1", "train"): MANIFEST}
    assert paper_loans.count_done(fresh / paper_loans.RESULTS) == 2  # the write-ahead log's rows came along


def test_unpacking_over_results_is_refused(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    fake_run(run).close()
    paper_loans.pack(run, tmp_path / paper_loans.CARRY, [])
    with pytest.raises(SystemExit, match="holds results already"):
        paper_loans.unpack(tmp_path / paper_loans.CARRY, run)


def test_an_archive_over_the_returned_file_limit_names_its_largest_member(tmp_path, monkeypatch):
    run = tmp_path / "run"
    run.mkdir()
    fake_run(run).close()
    (run / "models" / "b1" / "weights.safetensors").write_bytes(bytes(range(256)) * 64)
    monkeypatch.setattr(paper_loans, "CARRY_LIMIT", 1024)
    with pytest.raises(SystemExit, match=r"over the 0 MiB.*run/models/b1/weights.safetensors \(0.0 MiB\)"):
        paper_loans.pack(run, tmp_path / paper_loans.CARRY, [])


def test_ranks_extracted_again_are_compared_chunk_by_chunk():
    carried = {("grad", "r1", "train"): MANIFEST, ("ig", "r2", "test"): {**MANIFEST, "complete": False}}
    assert paper_loans.compare_ranks(carried, {("grad", "r1", "train"): dict(MANIFEST)}) == []
    other = {("grad", "r1", "train"): {**MANIFEST, "checksums": ["aa", "cc"]}}
    assert paper_loans.compare_ranks(carried, other) == [
        "ranks of grad (train) r1: 1 of 2 chunks hold other bytes than the carried store's"]
    assert paper_loans.compare_ranks(carried, {}) == ["ranks of grad (train): no complete store r1 extracted again"]


def test_the_next_call_checks_against_the_carried_complete_stores(tmp_path):
    run = tmp_path / "run"
    for folder, manifest in ((run / "ranks", {**MANIFEST, "checksums": ["made here"]}),
                             (side(run, "carried-ranks"), MANIFEST)):
        for key in (("grad", "r1", "train"), ("ig", "r2", "train")):
            (folder.joinpath(*key)).mkdir(parents=True)
            folder.joinpath(*key, "manifest.json").write_text(json.dumps(
                manifest if key[0] == "grad" else {**manifest, "complete": False}))
    chosen = {key: json.loads(path.read_text()) for key, path in paper_loans.reference_manifests(run).items()}
    assert chosen[("grad", "r1", "train")] == MANIFEST  # what the earlier cells trained on, not this machine's
    assert chosen[("ig", "r2", "train")]["checksums"] == ["made here"]  # incomplete there: this machine's


@pytest.mark.parametrize("extracted,sweeps", [(["aa", "bb"], ["road"]), (["aa", "cc"], [])], ids=["same", "differ"])
def test_a_call_resumes_from_the_carried_loans_and_skips_finished_fills(tmp_path, monkeypatch, extracted, sweeps):
    run = tmp_path / "a" / "run"
    run.mkdir(parents=True)
    fake_run(run).close()
    loans = [{"code": "c0", "sweeps": [{"fill": "dataset-mean", "exit": 0, "ids": {"configuration": "k1"}},
                                       {"fill": "road", "exit": None}]}]
    paper_loans.pack(run, tmp_path / paper_loans.CARRY, loans)
    fresh = tmp_path / "b" / "run"
    commands = []

    def run_cut(command, *args, **kwargs):  # extract writes the store again; a sweep is cut
        commands.append(command)
        if "extract" in command:
            store = fresh / "ranks" / "grad" / "r1" / "train"
            store.mkdir(parents=True)
            (store / "manifest.json").write_text(json.dumps({**MANIFEST, "checksums": extracted}))
            return 0, 1.0
        return None, 1.0

    monkeypatch.setattr(paper_loans, "run_cut", run_cut)
    grid = PaperGrid(sweep=("--preset", "paper"), fills=("dataset-mean", "road"), data=("--dataset", "x"),
                     device="cpu")
    out = paper_loans.paper_call(fresh, grid, 3600, carry_in=tmp_path / paper_loans.CARRY,
                                 carry_out=tmp_path / "next" / paper_loans.CARRY, report=False)
    assert out["call"]["carried_in"]["cells"] == 2 and len(out["loans"]) == 2
    # the carried complete store extracted again first; then, only where its bytes are the same, the unfinished
    # fill's sweep (dataset-mean finished in the carried loan)
    assert commands[0][commands[0].index("--method") + 1] == "grad"
    assert [c[c.index("--fill") + 1] for c in commands[1:]] == sweeps
    assert not out["finished"] and out["ok"] == (sweeps != [])
    assert side(fresh, "ranks-checked").exists() == (sweeps != [])
    assert json.loads(side(fresh, "loans.json").read_text()) == out["loans"]
    with tarfile.open(tmp_path / "next" / paper_loans.CARRY) as tar:
        assert json.loads(tar.extractfile("loans.json").read()) == out["loans"]
        # the next call checks against the carried store's bytes, whatever this machine extracted
        assert json.loads(tar.extractfile("ranks/grad/r1/train/manifest.json").read()) == MANIFEST
