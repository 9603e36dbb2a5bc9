"""Claims: which process is building what, so that several processes on one run directory split the work
and take over what a dead one left.

A claimant is a process identity (`this_process`: host, pid namespace, pid, and the process's start time,
which with the pid names one process even after the pid is reused). Its process can be looked up only from
the same host and pid namespace; from anywhere else (another node, a container sharing the host's name) a
claimant counts as alive while its heartbeat is fresh. Two kinds of claim carry it:
- a results.sqlite row (ResultsDB.claim: a cell): the row holds its claimant and a heartbeat the claimant
  refreshes every HEARTBEAT_S while it trains; `owner_alive` says whether a claimant may still be working,
- a lock file (`hold_lock`, through RunDir.claim: the base model, a method's ranks): an exclusive lock the
  kernel releases when its holder exits or dies; the file names the holder for the processes that wait.
"""

import fcntl
import json
import os
import socket
import time
from contextlib import contextmanager
from pathlib import Path

from roarfast.common.atomic import open_nofollow
from roarfast.common.kept import depends_on_now

#: the folder of a run directory's claim locks (and of what a kill may leave half done: a prune's intent)
CLAIMS = "claims"
#: a claimant refreshes its heartbeat this often while it trains a cell
HEARTBEAT_S = 15.0
#: a claim from another host whose heartbeat is older than this is taken over (its process cannot be
#: looked up from here); generous against clock skew and long pauses
HEARTBEAT_STALE_S = 180.0
#: how often a process waiting on another's lock tries again
CLAIM_POLL_S = 0.5


def _start_time(pid: int) -> str | None:
    """The start time of process `pid` in clock ticks since boot (Linux /proc), or None where unknown: with
    the pid it names one process, even after the pid is reused."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]  # field 22 of stat; the name in (...) may hold spaces


def _pid_namespace() -> str | None:
    """The pid namespace of this process (Linux: "pid:[inode]"), or None where unknown."""
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return None


def this_process() -> dict:
    """The claimant identity of the calling process."""
    return {"host": socket.gethostname(), "pidns": _pid_namespace(), "pid": os.getpid(),
            "start": _start_time(os.getpid())}


def owner_alive(owner: dict | None, heartbeat: float | None) -> bool:
    """Whether the claimant `owner` may still be training: where its pid can be looked up (this host and pid
    namespace), its process exists (same pid and start time); elsewhere, its heartbeat is fresh."""
    if not owner:
        return False
    if owner.get("host") == socket.gethostname() and owner.get("pidns") in (None, _pid_namespace()):
        pid = owner.get("pid")
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            pass  # exists, owned by another user
        start = _start_time(pid)
        return start is None or owner.get("start") is None or start == owner["start"]
    depends_on_now("a claim's heartbeat")  # its age: the same records answer otherwise later
    return heartbeat is not None and time.time() - heartbeat < HEARTBEAT_STALE_S


@contextmanager
def hold_lock(path, waiting=None):
    """Holds an exclusive lock on the file `path` (created if needed) while the body runs; another process
    waits here (calling `waiting(holder)` once, holder: "pid N on HOST") until the holder releases it, exits
    or dies. The holder's identity is written into the file for the waiters' message; a symbolic link at
    `path`, or a file with other hard links, is refused (one line naming it), never written."""
    fd = open_nofollow(path, os.O_RDWR | os.O_CREAT)
    with os.fdopen(fd, "r+") as lock:
        said = False
        while True:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if not said and waiting is not None:
                    lock.seek(0)
                    waiting(_holder(lock.read()))
                    said = True
                time.sleep(CLAIM_POLL_S)
        lock.seek(0)
        lock.truncate(0)
        lock.write(json.dumps(this_process(), sort_keys=True))
        lock.flush()
        yield


def _holder(text: str) -> str:
    """"pid N on HOST" from a lock file's content (this_process), as far as it was written."""
    try:
        owner = json.loads(text)
        return f"pid {owner['pid']} on {owner['host']}"
    except (ValueError, KeyError, TypeError):
        return "another process"
