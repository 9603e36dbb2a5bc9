"""Answers kept (roarfast.common.kept): a dry run on an image tree, or an extraction with nothing to do, asked
again with nothing it read changed prints the same answer in a process that cannot import torch; the tree changed,
it is planned afresh; an extraction that finds its ranks in place writes nothing. And the mechanism itself: an
answer is replayed only while every file it read is as it was (a rewrite with its times put back included), and
never kept when it wrote outside the folders it may write in, failed, read something live or said it depends on
the time; a damaged or forged record runs nothing."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from roarfast.common import kept
from tests.test_data_bad_images import jpeg, make_tree

TINY = ["--data-option", "num_train=64", "--data-option", "num_test=32", "--device", "cpu"]

#: a process in which `import torch` fails: what a replayed answer must not need
NO_TORCH = """
import importlib.abc, sys
class NoTorch(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "torch":
            raise ImportError("torch is blocked in this test: the answer was not replayed")
sys.meta_path.insert(0, NoTorch())
"""


def roarfast(tmp_path, *args, torch: bool = True) -> subprocess.CompletedProcess:
    """`roarfast ARGS` in a process of its own, as the console script runs it (its own process: answers are kept
    there only), with the test's cache; `torch=False`: torch cannot be imported there."""
    code = ("" if torch else NO_TORCH) + "import sys; sys.argv[0] = 'roarfast'; from roarfast.cli import main; main()"
    env = {**os.environ, "ROARFAST_CACHE_DIR": str(tmp_path / "cache"), "ROARFAST_ALLOCATOR": "0"}
    done = subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True, text=True, env=env,
                          cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    return done


def test_an_image_tree_changed_after_a_kept_answer_is_planned_afresh(tmp_path):
    tree = make_tree(tmp_path / "tree")
    dry = ["sweep", "--run-dir", tmp_path / "run", "--dataset", "imagefolder", "--data-dir", tree, "--method",
           "random", "--seeds", "1", "--dry-run"]
    roarfast(tmp_path, *dry)  # the first measures the tree and this machine's steps into the cache: not kept
    second = roarfast(tmp_path, *dry)
    third = roarfast(tmp_path, *dry, torch=False)
    assert third.stdout == second.stdout and "6 train" in third.stdout and "done: 0, to do: 12" in third.stdout
    assert "kept answer of" in third.stderr and "kept answer of" not in second.stderr
    assert not (tmp_path / "run").exists()  # a dry run writes nothing there, kept or not
    (tree / "train" / "a" / "9.jpg").write_bytes(jpeg(9))
    again = roarfast(tmp_path, *dry)
    assert "7 train" in again.stdout and "kept answer" not in again.stderr


def test_an_extraction_with_nothing_to_do_writes_nothing_and_is_answered_again_without_torch(tmp_path):
    run = tmp_path / "run"
    extract = ["extract", "--run-dir", run, *TINY, "--method", "random", "--no-progress"]
    roarfast(tmp_path, *extract)
    files = {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in run.rglob("*") if p.is_file()}
    idle = roarfast(tmp_path, *extract)
    assert "nothing to do" in idle.stdout
    assert {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in run.rglob("*") if p.is_file()} == files  # HEAD too
    assert roarfast(tmp_path, *extract, torch=False).stdout == idle.stdout


# ---------------------------------------------------------------------------------------------- the mechanism

def record(tmp_path, body, roots=(), sources=()) -> bool:
    """Runs body() as a kept command of the cache tmp_path/cache; whether an answer was kept."""
    store = tmp_path / "cache" / kept.FOLDER
    (store / "k.json").unlink(missing_ok=True)
    with kept.recording(store, "k", list(roots), list(sources)):
        body()
    return (store / "k.json").exists()


def test_an_answer_is_replayed_while_every_file_it_read_is_as_it_was(tmp_path, capsys):
    read = tmp_path / "read.txt"
    read.write_text("one")

    def body():
        print("planned", read.read_text())
        print("a note", file=sys.stderr)

    assert record(tmp_path, body)
    capsys.readouterr()
    assert kept.replay(tmp_path / "cache" / kept.FOLDER, "k")
    out, err = capsys.readouterr()
    assert out == "planned one\n" and err.startswith("a note\n(kept answer of ")
    # the same size and modification time, other bytes: the change time tells (cp -p, rsync -t, tar)
    status = read.stat()
    read.write_text("two")
    os.utime(read, ns=(status.st_atime_ns, status.st_mtime_ns))
    assert not kept.replay(tmp_path / "cache" / kept.FOLDER, "k")
    assert capsys.readouterr() == ("", "")


def test_a_file_created_in_a_named_folder_after_the_answer_is_seen(tmp_path):
    folder = tmp_path / "run"
    folder.mkdir()
    assert record(tmp_path, lambda: (folder / "HEAD.json").exists(), roots=[folder])  # a test, not an open
    assert kept.replay(tmp_path / "cache" / kept.FOLDER, "k")
    (folder / "HEAD.json").write_text("{}")
    assert not kept.replay(tmp_path / "cache" / kept.FOLDER, "k")


LIVE_MEMORY = {"bytes": 1}


@kept.checkable
def memory_now() -> int:
    return LIVE_MEMORY["bytes"]


def test_a_checked_decision_is_made_again_before_a_replay(tmp_path):
    assert record(tmp_path, lambda: print(kept.checked(memory_now) > 0))
    assert kept.replay(tmp_path / "cache" / kept.FOLDER, "k")
    LIVE_MEMORY["bytes"] = 2
    assert not kept.replay(tmp_path / "cache" / kept.FOLDER, "k")


def _fails():
    raise RuntimeError("failed")


@pytest.mark.parametrize("body", [
    pytest.param(lambda out: out.write_text("x"), id="wrote outside its folders"),
    pytest.param(lambda out: Path("/proc/meminfo").read_text(), id="read the memory now"),
    pytest.param(lambda out: kept.depends_on_now("a heartbeat"), id="depends on the time"),
    pytest.param(lambda out: subprocess.run(["true"]), id="ran a program"),
    pytest.param(lambda out: os.kill(os.getpid(), 0), id="looked a process up"),
])
def test_what_is_never_kept(tmp_path, body):
    run = tmp_path / "run"
    run.mkdir()
    assert not record(tmp_path, lambda: body(tmp_path / "elsewhere.txt"), roots=[run])


def test_a_failed_command_is_not_kept(tmp_path):
    with pytest.raises(RuntimeError):
        record(tmp_path, _fails)
    assert not (tmp_path / "cache" / kept.FOLDER / "k.json").exists()


def test_a_write_inside_a_named_folder_is_judged_by_what_changed(tmp_path):
    run = tmp_path / "run"
    (run / "ranks").mkdir(parents=True)
    lock = run / "ranks" / ".lock"
    lock.touch()
    # a lock opened for writing and a folder made again where it was: nothing changed, kept
    assert record(tmp_path, lambda: (open(lock, "a").close(), (run / "ranks").mkdir(exist_ok=True)), roots=[run])
    assert not record(tmp_path, lambda: (run / "HEAD.json").write_text("{}"), roots=[run])
    # a folder it only reads (an image tree): a lock opened there is a write
    assert not record(tmp_path, lambda: open(lock, "a").close(), sources=[run])


def test_a_damaged_or_forged_record_is_computed_again_and_runs_nothing(tmp_path):
    from roarfast.common.atomic import write_record
    from roarfast.common.fingerprint import read_record

    assert record(tmp_path, lambda: print("planned"))
    path = tmp_path / "cache" / kept.FOLDER / "k.json"
    forged = read_record(path, "")
    victim = tmp_path / "ran"
    forged["checks"] = [["os", "system", [f"touch {victim}"], 0], ["roarfast.common.atomic", "replace_bytes",
                                                                  [str(victim), "x"], None]]
    write_record(path, forged)  # sealed again: only the names a record gives are forged
    assert not kept.replay(path.parent, "k") and not victim.exists()
    path.write_bytes(path.read_bytes()[:-40])
    assert not kept.replay(path.parent, "k")
