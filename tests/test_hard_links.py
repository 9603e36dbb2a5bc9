"""Nothing written through a hard link, nothing created beside a file roarfast does not own (issue 30, item 7):
a file with other hard links where roarfast writes in place (results.sqlite and its -wal/-shm/-journal, a
claim lock, a rank store's ranks.npy and .lock) is refused in one line naming it, the file behind its other
names unchanged; a record written by rename (stages.json, a checkpoint, a manifest) replaces the link and
leaves that file alone; a reader refuses a symbolically linked results.sqlite and creates nothing beside
its target. Symbolic links at write places: tests/test_no_links.py."""

import os

import numpy as np
import pytest

import roarfast.results
from roarfast.common import atomic
from roarfast.records.checkpoint import save_checkpoint
from roarfast.errors import UserError
from roarfast.models import build_model
from roarfast.results import ResultsDB
from roarfast.rundir.directory import RunDir
from roarfast.store import RankStore
from tests.test_cli_errors import TINY, fails_with_one_line
from tests.test_report_sections import fill_run
from tests.test_store import random_ranks, write_chunks, writer_args

OUTSIDE_TEXT = b"not roarfast's\n"


@pytest.fixture
def outside(tmp_path):
    """A directory outside the run directory, whose files must keep their bytes and gain no neighbours."""
    directory = tmp_path / "outside"
    directory.mkdir()
    return directory


def contents(directory) -> dict:
    return {p.name: p.read_bytes() for p in directory.iterdir()}


def hard_link(place, existing):
    """`place` made another name of the file `existing`."""
    place.parent.mkdir(parents=True, exist_ok=True)
    place.unlink(missing_ok=True)
    os.link(existing, place)
    return place


def refusal(path, links=2) -> str:
    return (f"refusing to write {path}: it has {links} hard links, and a write in place would change the file behind "
            f"its other names too; give it a copy of its own (cp {path} {path}.copy && mv {path}.copy {path}) and "
            f"rerun")


def half_written_store(tmp_path):
    """A rank store of grad's train ranks with its first chunk written, and the ranks it is written from."""
    store = RankStore(tmp_path / "attributions")
    ranks = random_ranks((10, 4, 5), np.uint16)
    writer = store.open_writer("grad", "train", **writer_args())
    write_chunks(writer, ranks, [0])
    writer.close()
    return store, ranks


def outside_results(outside):
    """A results.sqlite outside the run directory (another run's), written and closed."""
    path = outside / "results.sqlite"
    fill_run(RunDir(outside))
    return path


# ----------------------------------------------------------------------------------------- written in place

@pytest.mark.parametrize("suffix", ["", "-wal"])
def test_a_hard_link_at_results_sqlite_or_its_wal_stops_a_stage_before_it_computes(tmp_path, outside, suffix):
    existing = outside_results(outside) if not suffix else outside / "log"
    existing.write_bytes(existing.read_bytes() if not suffix else OUTSIDE_TEXT)
    before = contents(outside)
    run = RunDir(tmp_path / "run")
    link = hard_link(run.root / f"results.sqlite{suffix}", existing)
    line = fails_with_one_line(["retrain", "--run-dir", str(run.root), "--method", "random", "--epochs", "1", *TINY])
    assert line == f"Error: {refusal(link)}"
    assert contents(outside) == before


@pytest.mark.parametrize("suffix", ["", "-wal", "-shm", "-journal"])
def test_results_db_refuses_a_hard_link_at_each_file_sqlite_writes(tmp_path, outside, suffix):
    run = RunDir(tmp_path / "run")
    fill_run(run)
    existing = outside_results(outside) if not suffix else outside / "side"
    if suffix:
        existing.write_bytes(OUTSIDE_TEXT)
    before = contents(outside)
    if not suffix:
        run.results_path.unlink()
    link = hard_link(run.root / f"results.sqlite{suffix}", existing)
    with pytest.raises(UserError) as err:
        ResultsDB(run.results_path)
    assert str(err.value) == refusal(link)
    if suffix in ("-wal", "-shm"):  # a reader writes the -shm (and would use the -wal): refused as well
        with pytest.raises(UserError) as err:
            ResultsDB(run.results_path, readonly=True)
        assert str(err.value) == refusal(link)
    assert contents(outside) == before


def test_a_hard_linked_results_sqlite_is_read_and_nothing_created_beside_it(tmp_path, outside):
    """A reader writes nothing to results.sqlite itself: a second name of it (a `cp -al` backup) is read."""
    existing = outside_results(outside)
    run = RunDir(tmp_path / "run")
    hard_link(run.results_path, existing)
    before, listing = contents(outside), sorted(os.listdir(run.root))
    assert len(roarfast.results.load(run.root, kind="retrain")) == 12
    assert contents(outside) == before and sorted(os.listdir(run.root)) == listing


def test_a_hard_link_at_a_claim_lock_stops_the_sweep(tmp_path, outside):
    existing = outside / "lock"
    existing.write_bytes(OUTSIDE_TEXT)
    run = RunDir(tmp_path / "run")
    link = hard_link(run.claims_dir / "head.lock", existing)  # every sweep takes it to update HEAD.json
    line = fails_with_one_line(["sweep", "--run-dir", str(run.root), "--method", "random", "--fraction", "0.5",
                                "--mode", "roar", "--seeds", "1", "--no-control", "--epochs", "1", *TINY])
    assert line == f"Error: {refusal(link)}"
    link = hard_link(run.claims_dir / "ranks-grad.lock", existing)
    with pytest.raises(UserError) as err:
        with run.claim("ranks-grad"):
            pytest.fail("the claim was taken through the link")
    assert str(err.value) == refusal(link, links=3)
    assert existing.read_bytes() == OUTSIDE_TEXT


@pytest.mark.parametrize("name", ["ranks.npy", ".lock"])
def test_a_hard_link_in_a_rank_store_being_resumed_is_refused(tmp_path, outside, name):
    """A half-written store resumed writes ranks.npy in place (pwrite) and opens .lock: another name of
    either (here a copy outside, so the resume's checks of the file pass) is refused, never written."""
    store, ranks = half_written_store(tmp_path)
    path = store.path("grad", "train") / name
    existing = outside / name
    existing.write_bytes(path.read_bytes() if name == "ranks.npy" else OUTSIDE_TEXT)
    before = contents(outside)
    hard_link(path, existing)
    with pytest.raises(UserError) as err:
        writer = store.open_writer("grad", "train", **writer_args())
        write_chunks(writer, ranks, writer.pending_chunks())
    assert str(err.value) == refusal(path)
    assert contents(outside) == before


def test_open_nofollow_checks_the_opened_file_and_truncates_only_after(tmp_path, outside):
    """The check is made on the descriptor (no check-then-open race), before O_TRUNC takes effect; a read
    opens a shared file, and a file of its own is truncated as asked."""
    existing = outside / "shared"
    existing.write_bytes(OUTSIDE_TEXT)
    link = hard_link(tmp_path / "ranks.npy", existing)
    with pytest.raises(UserError) as err:
        atomic.open_nofollow(link, os.O_RDWR | os.O_TRUNC)
    assert str(err.value) == refusal(link) and existing.read_bytes() == OUTSIDE_TEXT
    os.close(atomic.open_nofollow(link, os.O_RDONLY))
    own = tmp_path / "own"
    own.write_bytes(OUTSIDE_TEXT)
    os.close(atomic.open_nofollow(own, os.O_WRONLY | os.O_TRUNC))
    assert own.read_bytes() == b""


# ----------------------------------------------------------------------------------------- written by rename

def test_records_written_by_rename_replace_a_hard_link_and_leave_its_file_alone(tmp_path, outside):
    run = RunDir(tmp_path / "run")
    run.record_stage_time("train", 1.0)
    checkpoint = tmp_path / "ckpt"
    meta = {"model": "resnet8", "num_classes": 4, "image_size": 32, "in_channels": 3}
    save_checkpoint(checkpoint, build_model("resnet8", 4), meta)
    places = [run.stage_times_path, checkpoint / "meta.json", checkpoint / "model.safetensors"]
    for place in places:  # each an outside file's second name, holding what roarfast wrote there
        (outside / place.name).write_bytes(place.read_bytes())
        hard_link(place, outside / place.name)
    before = contents(outside)
    run.record_stage_time("extract", 2.0)
    save_checkpoint(checkpoint, build_model("resnet8", 4), meta)
    assert contents(outside) == before
    assert all(place.stat().st_nlink == 1 for place in places)
    assert run.stage_times()["extract"] == 2.0


def test_a_hard_link_at_a_rank_store_manifest_is_replaced_on_resume(tmp_path, outside):
    store, ranks = half_written_store(tmp_path)
    manifest = store.path("grad", "train") / "manifest.json"
    (outside / "manifest.json").write_bytes(manifest.read_bytes())
    hard_link(manifest, outside / "manifest.json")
    before = contents(outside)
    writer = store.open_writer("grad", "train", **writer_args())
    write_chunks(writer, ranks, writer.pending_chunks())
    writer.close()
    assert contents(outside) == before and manifest.stat().st_nlink == 1


# ----------------------------------------------------------------------------------------------- readers

@pytest.mark.parametrize("planted_wal", [False, True])
def test_a_symlinked_results_sqlite_is_refused_by_readers_and_nothing_created_beside_its_target(
        tmp_path, outside, planted_wal):
    """`report` and `results.load` on a results.sqlite linked to another run's: refused in one line, and no
    -wal or -shm appears beside the target (an empty -wal beside the link once sent SQLite's read-only mode
    there, which creates both)."""
    target = outside_results(outside)
    run = RunDir(tmp_path / "run")
    run.root.mkdir()
    run.results_path.symlink_to(target)
    if planted_wal:
        (run.root / "results.sqlite-wal").write_bytes(b"")
    before = contents(outside)
    said = (f"refusing to read {run.results_path}: it is a symbolic link (to {target}), and SQLite would create its "
            f"-wal and -shm beside the target, outside the run directory; put the file itself there and rerun")
    assert fails_with_one_line(["report", "--run-dir", str(run.root), "--out", str(tmp_path / "out")]) == \
        f"Error: {said}"
    with pytest.raises(UserError) as err:
        roarfast.results.load(run.root)
    assert str(err.value) == said
    assert contents(outside) == before



def test_a_rank_array_is_created_exclusively_so_a_link_planted_after_the_unlink_is_never_written(tmp_path, outside,
                                                                                                    monkeypatch):
    """A fresh store unlinks its files, then creates them: a link another process plants in between (here, at
    the moment of the unlink) makes the creation fail, and the file behind it keeps its bytes."""
    from pathlib import Path

    existing = outside / "ranks"
    existing.write_bytes(OUTSIDE_TEXT)
    unlink = Path.unlink
    plant = {"ranks.npy": lambda path: os.link(existing, path), "maps.npy": lambda path: path.symlink_to(existing)}

    def unlink_then_plant(path, missing_ok=False):
        unlink(path, missing_ok=missing_ok)
        if path.name in plant and path.parent.name == "train":
            plant[path.name](path)

    monkeypatch.setattr(Path, "unlink", unlink_then_plant)
    for planted in ("ranks.npy", "maps.npy"):
        with pytest.raises(FileExistsError):
            RankStore(tmp_path / planted).open_writer("grad", "train", keep_maps=planted == "maps.npy", **writer_args())
        plant.pop(planted)
    assert contents(outside) == {"ranks": OUTSIDE_TEXT}
