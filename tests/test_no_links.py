"""No write through a link, nothing half-written (issue 24, item 5): a symbolic link planted where roarfast
writes (a claim lock, HEAD.json, stages.json, the checkpoint, a rank store's manifest, .lock or
ranks.npy, results.sqlite and its -wal) is refused with one line naming it, and its target is never
written; `atomic.replace_dir` swaps a directory in whole (a link planted inside the old one included), and a
failure or a kill at each point leaves the previous one whole or the new one whole."""

import os
import signal
import subprocess
import sys
import time

import pytest

from roarfast.common import atomic
from roarfast.common.atomic import replace_dir
from roarfast.records.checkpoint import save_checkpoint
from roarfast.errors import UserError
from roarfast.models import build_model
from roarfast.results import ResultsDB
from roarfast.rundir.directory import RunDir
from tests.test_cli_errors import TINY, cli_ok, fails_with_one_line
from tests.test_hard_links import half_written_store
from tests.test_store import write_chunks, writer_args

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET_TEXT = "not roarfast's\n"


@pytest.fixture
def target(tmp_path):
    """A file outside the run directory that a planted link points to; it must keep its content."""
    path = tmp_path / "precious.txt"
    path.write_text(TARGET_TEXT)
    yield path
    assert path.read_text() == TARGET_TEXT, "the link's target was written"


def plant(link, target):
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(target)
    return link


def refusal(link) -> str:
    return (f"refusing to write {link}: it is a symbolic link (to {os.readlink(link)}), and roarfast writes nothing "
            f"through a link; remove it and rerun")


def test_a_link_at_a_claim_lock_is_refused(tmp_path, target):
    run = RunDir(tmp_path / "run")
    link = plant(run.claims_dir / "ranks-grad.lock", target)
    with pytest.raises(UserError) as err:
        with run.claim("ranks-grad"):
            pytest.fail("the claim was taken through the link")
    assert str(err.value) == refusal(link)


def trained_here(run) -> str:
    """The directory, relative to the run directory, of the base model `train ... --epochs 1 *TINY` makes."""
    import torch

    from roarfast.stages.basemodel import TrainOptions
    from roarfast.records.model import ModelRecord
    from roarfast.data import load_dataset
    from roarfast.models.probe import checked_model
    from roarfast.recipe import default_model, effective_recipe

    ds = load_dataset("embedded", num_train=10, num_test=10)
    spec = checked_model(default_model(ds, torch.device("cpu")), ds)
    recipe = effective_recipe(spec, torch.device("cpu"), ds, TrainOptions(epochs=1))
    return str(run.model_dir(ModelRecord.trained(spec, ds, recipe, 0).id).relative_to(run.root))


@pytest.mark.parametrize("name", ["HEAD.json", "stages.json", "{model}/model.safetensors", "{model}/meta.json",
                                  "results.sqlite"])
def test_a_link_at_a_record_stops_a_stage_before_it_computes(tmp_path, target, monkeypatch, name):
    from roarfast.stages import basemodel
    monkeypatch.setattr(basemodel, "train_classifier", lambda *a, **k: pytest.fail("trained before the check"))
    run = RunDir(tmp_path / "run")
    link = plant(run.root / name.format(model=trained_here(run)), target)
    # --dataset named: HEAD.json is not read first (a link is read through; only writes refuse it)
    line = fails_with_one_line(["train", "--run-dir", str(run.root), "--dataset", "embedded", "--epochs", "1", *TINY])
    assert line == f"Error: {refusal(link)}"


def test_a_link_at_stages_json_is_refused(tmp_path, target):
    run = RunDir(tmp_path / "run")
    link = plant(run.stage_times_path, target)
    with pytest.raises(UserError, match="refusing to write .*stages.json: it is a symbolic link"):
        run.record_stage_time("train", 1.0)
    assert link.is_symlink()


def test_a_checkpoint_is_never_saved_through_a_link(tmp_path, target):
    directory = tmp_path / "ckpt"
    plant(directory / "meta.json", target)
    meta = {"model": "resnet8", "num_classes": 4, "image_size": 32, "in_channels": 3}
    with pytest.raises(UserError, match="meta.json: it is a symbolic link"):
        save_checkpoint(directory, build_model("resnet8", 4), meta)


@pytest.mark.parametrize("name", ["manifest.json", "ranks.npy", ".lock"])
def test_links_in_a_rank_store_are_refused(tmp_path, target, name):
    """A half-written store resumed: its manifest is replaced, ranks.npy written in place (pwrite), .lock
    opened; a link at any of them is refused, its target untouched."""
    store, ranks = half_written_store(tmp_path)
    path = store.path("grad", "train") / name
    path.unlink()
    plant(path, target)
    with pytest.raises(UserError) as err:
        writer = store.open_writer("grad", "train", **writer_args())
        write_chunks(writer, ranks, writer.pending_chunks())
    assert str(err.value) == refusal(path)


def test_a_link_at_results_sqlite_or_its_wal_is_refused(tmp_path, target):
    run = RunDir(tmp_path / "run")
    for suffix in ("", "-wal"):
        link = plant(run.root / f"results.sqlite{suffix}", target)
        line = fails_with_one_line(["retrain", "--run-dir", str(run.root), "--method", "random", "--epochs", "1",
                                    *TINY])
        assert line == f"Error: {refusal(link)}"
        if suffix:
            with pytest.raises(UserError, match="results.sqlite-wal: it is a symbolic link"):
                ResultsDB(run.results_path, readonly=True)  # a WAL reader writes its -shm
        link.unlink()
        if suffix == "":
            cli_ok("train", "--run-dir", str(run.root), "--epochs", "1", *TINY)
            cli_ok("extract", "--run-dir", str(run.root), "--method", "random", *TINY)
            ResultsDB(run.results_path).close()


def test_open_nofollow_refuses_a_link_that_appears_after_the_checks(tmp_path, target):
    """The files written in place are opened without following links: a link planted after every check
    (a race) is refused by the open itself, and a plain file opens."""
    link = plant(tmp_path / "ranks.npy", target)
    with pytest.raises(UserError) as err:
        atomic.open_nofollow(link, os.O_RDWR)
    assert str(err.value) == refusal(link)
    os.close(atomic.open_nofollow(tmp_path / "plain", os.O_RDWR | os.O_CREAT))


# ------------------------------------------------------------------------------------------- replace_dir

def _write_report(directory, text="new"):
    (directory / "index.html").write_text(text)
    (directory / "cells.csv").write_text(f"{text},1\n")
    (directory / "figures").mkdir()
    (directory / "figures" / "a.png").write_bytes(text.encode())
    return directory / "index.html"


def _content(directory) -> dict:
    return {str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


def test_replace_dir_swaps_the_new_directory_in_whole(tmp_path):
    report = tmp_path / "report"
    replace_dir(report, lambda d: _write_report(d, "old"))
    (report / "stale.txt").write_text("from an older report")
    written = replace_dir(report, _write_report)
    assert written.name == "index.html" and written.parent != report  # paths into the temporary directory
    assert _content(report) == {"cells.csv": b"new,1\n", "figures/a.png": b"new", "index.html": b"new"}
    assert sorted(p.name for p in tmp_path.iterdir()) == [".report.lock", "report"]


def test_replace_dir_never_writes_through_a_link_planted_in_the_old_report(tmp_path, target):
    report = tmp_path / "report"
    replace_dir(report, _write_report)
    (report / "cells.csv").unlink()
    plant(report / "cells.csv", target)
    replace_dir(report, _write_report)
    assert not (report / "cells.csv").is_symlink() and (report / "cells.csv").read_text() == "new,1\n"


def test_replace_dir_refuses_a_link_or_a_file_at_its_place(tmp_path, target):
    (tmp_path / "elsewhere").mkdir()
    link = plant(tmp_path / "report", tmp_path / "elsewhere")
    with pytest.raises(UserError) as err:
        replace_dir(link, _write_report)
    assert str(err.value) == refusal(link) and not any((tmp_path / "elsewhere").iterdir())
    with pytest.raises(UserError, match="is a file, not a directory"):
        replace_dir(target, _write_report)


def test_a_failed_build_or_rename_leaves_the_previous_directory_whole(tmp_path, monkeypatch):
    report = tmp_path / "report"
    replace_dir(report, lambda d: _write_report(d, "old"))
    old = _content(report)

    def full_disk(directory):
        _write_report(directory)
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError, match="No space"):
        replace_dir(report, full_disk)
    assert _content(report) == old and sorted(p.name for p in tmp_path.iterdir()) == [".report.lock", "report"]

    rename = os.rename

    def second_fails(src, dst):
        if str(src).startswith(str(tmp_path / ".report.build-")):
            raise OSError(5, "Input/output error")
        rename(src, dst)

    monkeypatch.setattr(atomic.os, "rename", second_fails)
    with pytest.raises(OSError, match="Input/output"):
        replace_dir(report, _write_report)
    assert _content(report) == old and sorted(p.name for p in tmp_path.iterdir()) == [".report.lock", "report"]


#: replace_dir in a child process killed (SIGKILL) at one point: while building, or between the renames
KILLED = """
import os, signal, sys, time
from pathlib import Path
from roarfast.common import atomic
report, point = Path(sys.argv[1]), sys.argv[2]
rename = os.rename

def killed_at_second_rename(src, dst):
    if Path(src).name.startswith(".report.build-"):
        os.kill(os.getpid(), signal.SIGKILL)
    rename(src, dst)

def build(directory):
    (directory / "index.html").write_text("new")
    if point == "build":
        (report.parent / "marker").write_text("")
        time.sleep(600)

if point == "rename":
    atomic.os.rename = killed_at_second_rename
atomic.replace_dir(report, build)
"""


@pytest.mark.parametrize("point", ["build", "rename"])
def test_a_kill_leaves_the_previous_directory_whole_and_the_next_call_recovers(tmp_path, point):
    report = tmp_path / "report"
    replace_dir(report, lambda d: _write_report(d, "old"))
    old = _content(report)
    child = subprocess.Popen([sys.executable, "-c", KILLED, str(report), point], cwd=REPO)
    if point == "build":
        for _ in range(600):
            if (tmp_path / "marker").exists() or child.poll() is not None:
                break
            time.sleep(0.1)
        child.send_signal(signal.SIGKILL)
    assert child.wait() == -signal.SIGKILL
    if point == "build":  # the previous report as it was, a build directory beside it
        assert _content(report) == old
    else:  # between the renames: no report, the previous one whole beside it
        assert not report.exists() and _content(tmp_path / ".report.previous") == old
    assert any(p.name.startswith(".report.build-") for p in tmp_path.iterdir())
    seen = {}
    replace_dir(report, lambda d: seen.update(_content(report)) or _write_report(d))
    assert seen == old  # the next call put the previous back before building
    assert _content(report)["index.html"] == b"new"
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "marker") == [".report.lock", "report"]
