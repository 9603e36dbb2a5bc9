"""Claims in results.sqlite: a cell is trained by one live process at a time; a claim whose process is
gone (or, from another host, whose heartbeat went stale) is taken over. (Files of earlier schema versions:
tests/test_results_migration.py.)"""

import socket
import sqlite3
import subprocess
import sys
import time

import pytest

from roarfast.records.claims import HEARTBEAT_STALE_S, _start_time, this_process
from roarfast.results import RETRAIN, MeasurementKey, ResultsDB


def cell(**overrides):
    fields = dict(kind=RETRAIN, dataset="embedded", model="fastnet", method="random", mode="roar",
                  fill="dataset-mean", fraction=0.5, seed=0, config_hash="c" * 64)
    fields.update(overrides)
    return MeasurementKey(**fields)


def metrics():
    return dict(test_acc=0.5, val_acc=0.5, epochs=1, seconds=1.0, versions={"roarfast": "test"})


def dead_process() -> dict:
    """The identity of a process that has exited (same host)."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return {"host": socket.gethostname(), "pid": child.pid, "start": "1"}


def test_a_live_claim_blocks_others_and_a_done_cell_is_never_claimed(tmp_path):
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        live = {"host": socket.gethostname(), "pid": sleeper.pid, "start": _start_time(sleeper.pid)}
        with ResultsDB(tmp_path / "r.sqlite") as db:
            assert db.claim(cell(), live)
            assert not db.claim(cell())  # held by a live process
            assert db.claim(cell(), live)  # the holder itself may claim again
            db.record(cell(), metrics())
            assert not db.claim(cell(), live) and not db.claim(cell())
            assert db.get(cell())["owner"] is None
    finally:
        sleeper.kill()


def test_a_dead_claimant_and_a_reused_pid_are_taken_over(tmp_path):
    with ResultsDB(tmp_path / "r.sqlite") as db:
        assert db.claim(cell(), dead_process())
        assert db.claim(cell())
        assert db.get(cell())["owner"] == this_process()
        # our own pid but another start time: a process that died and whose pid came back
        impostor = {**this_process(), "start": "0"}
        assert db.claim(cell(seed=1), impostor)
        assert db.claim(cell(seed=1))


@pytest.mark.parametrize("where", ["another host", "this host's name, another pid namespace"])
def test_another_hosts_claim_counts_while_its_heartbeat_is_fresh(tmp_path, where):
    if where == "another host":
        remote = {"host": "elsewhere-" + socket.gethostname(), "pid": 1, "start": "1"}
    else:  # a container sharing the host's name: its pid means nothing here (here it names no process)
        remote = {**dead_process(), "pidns": "pid:[1]"}
    path = tmp_path / "r.sqlite"
    with ResultsDB(path) as db:
        assert db.claim(cell(), remote)
        assert not db.claim(cell())
        db.heartbeat([cell()], remote)
        assert not db.claim(cell())
    with sqlite3.connect(path) as raw:  # its last heartbeat, long ago
        raw.execute("UPDATE measurements SET heartbeat = ?", (time.time() - HEARTBEAT_STALE_S - 1,))
    with ResultsDB(path) as db:
        assert db.claim(cell())


def test_release_forgets_only_the_releasers_claim(tmp_path):
    with ResultsDB(tmp_path / "r.sqlite") as db:
        db.claim(cell())
        db.release(cell(), dead_process())  # not the holder: nothing happens
        assert db.status(cell()) == "running"
        db.release(cell())
        assert db.status(cell()) is None


def test_a_run_directory_claim_makes_the_other_process_wait_until_the_holder_is_gone(tmp_path):
    """RunDir.claim (the base model, a method's ranks): a second claimant is told who holds it, waits, and
    gets it once the holder has exited (the kernel drops the lock of a process that ends or dies)."""
    from roarfast.rundir.directory import RunDir

    holder = subprocess.Popen(
        [sys.executable, "-c", "import pathlib, time; from roarfast.rundir.directory import RunDir\n"
         f"with RunDir({str(tmp_path)!r}).claim('ranks-grad'):\n"
         "    print('held', flush=True); time.sleep(1.5)\n"
         f"    pathlib.Path({str(tmp_path / 'built')!r}).touch()"],
        stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    told = []
    with RunDir(tmp_path).claim("ranks-grad", waiting=told.append):
        built_before = (tmp_path / "built").exists()  # what the holder made before it let go
    holder.wait()
    assert told == [f"pid {holder.pid} on {socket.gethostname()}"] and built_before
