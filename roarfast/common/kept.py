"""Answers kept: a read-only command's output, printed again without importing torch while nothing it read has changed.

A dry run (`roarfast sweep --dry-run`) or an extraction with nothing left to do reads records and prints; to do
so it imports torch, the extension and the estimators, which take longer than everything else it does (about 1.5
of 2 s on two cores; 3-5 s on a slow machine). Asked again on the same run directory, it would print the same. So
the command records, while it runs, what it read, and keeps its output with that record in the machine's cache
(`recording`); the next identical command checks the record with stat calls alone and prints the kept output
(`replay`), or runs when anything differs.

What an answer is keyed by and checked against:
- the command: its name, its parsed options (a --config file's values among them), the working directory, the
  environment (but the variables a shell changes by itself: SHELL_VARIABLES) and the interpreter: the file name of
  the record (`key`);
- every file it opened, every folder it listed and every module it imported, anywhere: mode, size, inode,
  modification and change time (a file rewritten with its times put back, as `cp -p` does, has a new change time),
  or its absence;
- every entry under the folders it names (the run directory, an image tree) and under the machine's cache, stat'ed
  the same way, so that a file it only tested for (Path.exists: no audit event) counts too;
- the calls it made through `checked` (a decision on a live quantity, such as the memory available to hold an
  image tree), made again and compared.
None of it holds a file's bytes: a record is a few hundred kB at most.

What is never kept: an answer that failed, that wrote or removed a file (a first dry run measures this machine's
steps into the cache; the second is kept), that started a process or opened a socket, that read a live process's
state (`/proc/PID`, a signal 0 to a claimant: a cell another sweep is training) or the memory now (`/proc/meminfo`
outside `checked`), or that said it depends on the time (`depends_on_now`: a heartbeat's age). ROARFAST_KEEP_ANSWERS=0
keeps and replays nothing. The files read come from Python's audit events (sys.addaudithook, PEP 578), installed
once per process and idle while no command records.
"""

import functools
import hashlib
import importlib
import json
import os
import re
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path

from roarfast.common.atomic import write_record
from roarfast.common.fingerprint import read_record
from roarfast.errors import UserError

#: bump when what a record holds, or how it is keyed or checked, changes
FORMAT = 1
#: 0 / off / false / no: no answer is kept or replayed
ENV_VAR = "ROARFAST_KEEP_ANSWERS"
#: the folder of kept answers, in the machine's cache; the newest LIMIT are kept
FOLDER = "answers"
LIMIT = 64
#: variables a shell sets by itself, different for the same command typed twice; roarfast reads none of them
SHELL_VARIABLES = frozenset({"_", "OLDPWD", "PWD", "SHLVL"})
#: reads of machine state that may differ a second later: a process's own files, the memory now
LIVE = re.compile(r"^/proc/(\d+|meminfo|loadavg|stat|pressure)(/|$)")
#: the kernel's and the devices' own files: machine facts (the CPU's name, cgroup limits) or streams, not records
SYSTEM = ("/proc/", "/sys/", "/dev/")
#: audit events that change the file system
CHANGES = frozenset({"os.remove", "os.rename", "os.rmdir", "os.mkdir", "os.symlink", "os.link", "os.truncate",
                     "os.chmod", "os.chown", "os.utime", "shutil.rmtree", "shutil.move", "shutil.copyfile",
                     "shutil.copytree"})
#: audit events after which what the command saw is not in the files: another process (subprocess.Popen but
#: FACT_PROGRAMS), the network, a live process
UNKNOWN = frozenset({"os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork",
                     "os.forkpty", "socket.connect", "socket.bind", "os.kill", "os.killpg"})
#: programs a library runs to learn machine facts (ctypes.util.find_library runs ldconfig -p, else gcc or ld)
FACT_PROGRAMS = frozenset({"ldconfig", "gcc", "cc", "ld", "objdump", "uname"})
#: open() flags that write
WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND


def enabled() -> bool:
    return os.environ.get(ENV_VAR, "1").strip().lower() not in ("0", "off", "false", "no")


def stamp(path: str) -> list | None:
    """What a record holds of `path`: [mode, size, inode, modification ns, change ns] of the entry itself (a link
    is not followed), or None where nothing is."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return [st.st_mode, st.st_size, st.st_ino, st.st_mtime_ns, st.st_ctime_ns]


def tree_digest(root, skip: str | None = None) -> str:
    """A digest of every entry under `root` (names, link targets and `stamp`s; links are not followed), the folder
    named `skip` directly under root left out; "absent" where root is not a folder."""
    root = os.path.abspath(root)
    if not os.path.isdir(root):
        return f"absent {stamp(root)}"
    digest = hashlib.sha256(repr(stamp(root)).encode())
    folders = [root]
    while folders:
        folder = folders.pop()
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError as err:
            digest.update(f"{folder}: {err.errno}\n".encode())
            continue
        for entry in entries:
            if folder == root and entry.name == skip:
                continue
            try:  # an entry removed meanwhile is a change like any other
                st = entry.stat(follow_symlinks=False)
                line = f"{entry.path}\0{st.st_mode}\0{st.st_size}\0{st.st_ino}\0{st.st_mtime_ns}\0{st.st_ctime_ns}"
                if entry.is_symlink():
                    line += "\0" + os.readlink(entry.path)
                elif entry.is_dir(follow_symlinks=False):
                    folders.append(entry.path)
            except OSError as err:
                line = f"{entry.path}: {err.errno}"
            digest.update(line.encode() + b"\n")
    return digest.hexdigest()


class Recording:
    """What one command read while it ran (the audit hook fills it), whether it may be kept, and what it printed."""

    def __init__(self, roots=()):
        #: the folders compared whole before and after (what the command may write in without spoiling it: a
        #: lock opened, a folder made again that was there; a change shows in their digests)
        self.roots = tuple(os.path.join(os.path.abspath(root), "") for root in roots)
        self.read: set[str] = set()
        self.checks: list = []
        self.spoiled: str | None = None  # why it may not be kept
        self.printed: list = []  # [[stream name, text], ...] in the order written

    def inside(self, path: str) -> bool:
        return os.path.join(path, "").startswith(self.roots)

    def spoil(self, why: str) -> None:
        if self.spoiled is None:
            self.spoiled = why


_recording: Recording | None = None
_suspended = threading.local()
_hooked = False


def _path(arg) -> str | None:
    if isinstance(arg, bytes):
        arg = os.fsdecode(arg)
    return os.path.abspath(arg) if isinstance(arg, (str, os.PathLike)) else None


def _opened(recording: Recording, args: tuple) -> None:
    path = _path(args[0])
    if path is None:
        return
    mode, flags = args[1], args[2]
    if path.startswith(SYSTEM):
        if LIVE.match(path):
            recording.spoil(f"read {path}")
        return
    writes = any(c in mode for c in "wax+") if isinstance(mode, str) else bool(flags & WRITE_FLAGS)
    if writes and not recording.inside(path):
        recording.spoil(f"wrote {path}")
    recording.read.add(path)


def _listed(recording: Recording, args: tuple) -> None:
    path = _path(args[0]) if args else None
    if path is not None and not path.startswith(SYSTEM):
        recording.read.add(path)


def _changed(recording: Recording, args: tuple, event: str) -> None:
    paths = [_path(arg) for arg in args[:2] if isinstance(arg, (str, bytes, os.PathLike))]
    if not paths or not all(recording.inside(path) or path.startswith("/dev/") for path in paths):
        recording.spoil(f"{event} {paths}")


def _ran(recording: Recording, args: tuple) -> None:
    program = args[0] if args[0] is not None else (args[1][0] if isinstance(args[1], (list, tuple)) else args[1])
    if os.path.basename(os.fsdecode(program)) not in FACT_PROGRAMS:
        recording.spoil(f"ran {program}")


def _unknown(recording: Recording, args: tuple, event: str) -> None:
    recording.spoil(event)


#: what each audit event the recording watches does to it; every other event returns at the first lookup (the
#: hook sees every import, attribute access and compile of the process)
_WATCHED = {"open": _opened, "os.listdir": _listed, "os.scandir": _listed, "sqlite3.connect": _listed,
            "subprocess.Popen": _ran,
            **{event: functools.partial(_changed, event=event) for event in CHANGES},
            **{event: functools.partial(_unknown, event=event) for event in UNKNOWN}}


def _audit(event: str, args: tuple) -> None:
    watch = _WATCHED.get(event)
    if watch is None:
        return
    recording = _recording
    if recording is not None and not getattr(_suspended, "on", False):
        watch(recording, args)


def depends_on_now(why: str) -> None:
    """Says that the command's answer depends on the time or on another process (a claim's age): not kept."""
    if _recording is not None:
        _recording.spoil(why)


def checkable(func):
    """Decorator: `func` may be called through `checked` (and so by a replay, by the name a record gives: a record
    cannot name any other function)."""
    func.kept_checkable = True
    return func


def checked(func, *args):
    """func(*args), its call recorded so that a replay makes it again and prints the kept answer only where the
    result is the same: for a decision on something live (the memory available now), whose reads are not held
    against the answer. `func`: a `checkable` module-level function of a module that does not import torch, its
    arguments and result JSON values."""
    if not getattr(func, "kept_checkable", False):
        raise TypeError(f"{func.__qualname__} is not @checkable")
    if _recording is None:
        return func(*args)
    _suspended.on = True
    try:
        result = func(*args)
    finally:
        _suspended.on = False
    _recording.checks.append([func.__module__, func.__qualname__, list(args), result])
    return result


class _Tee:
    """A stream that writes through to `stream` and records what it wrote."""

    def __init__(self, stream, name: str, recording: Recording):
        self._stream, self._name, self._recording = stream, name, recording

    def write(self, text):
        if text:
            self._recording.printed.append(
                [self._name, text if isinstance(text, str) else text.decode(self.encoding or "utf-8", "replace")])
        return self._stream.write(text)

    def __getattr__(self, name):
        return getattr(self._stream, name)


def key(command: str, params: dict) -> str:
    """The file name of the record of `command` called with `params` (its parsed options) here, now."""
    env = {k: v for k, v in os.environ.items() if k not in SHELL_VARIABLES}
    what = [FORMAT, command, sorted((k, repr(v)) for k, v in params.items()), os.getcwd(), sorted(env.items()),
            sys.executable, sys.version]
    return hashlib.sha256(json.dumps(what).encode()).hexdigest()[:32]


def replay(folder: Path, name: str) -> bool:
    """Prints the answer kept in `folder` under `name` and returns True when every file, folder and check it
    recorded is as it was; else False (nothing printed)."""
    try:
        record = read_record(Path(folder) / f"{name}.json", "")
        if not _holds(record):
            return False
    except (OSError, UserError, ValueError, TypeError, KeyError, AttributeError):  # damaged: computed again
        return False
    for stream, text in record["printed"]:
        getattr(sys, stream).write(text)
    sys.stdout.flush()
    sys.stderr.write(f"(kept answer of {record['made']}: nothing it read has changed; {ENV_VAR}=0 computes it "
                     f"again)\n")
    return True


def _holds(record: dict | None) -> bool:
    """Whether everything `record` read is as it was, and its checks decide as they did."""
    if record is None or record.get("format") != FORMAT:
        return False
    if not all(stream in ("stdout", "stderr") and isinstance(text, str) for stream, text in record["printed"]):
        return False
    if any(stamp(path) != was for path, was in record["read"]):
        return False
    if any(tree_digest(root, skip=skip) != was for root, skip, was in record["trees"]):
        return False
    for module, qualname, args, result in record["checks"]:
        func = importlib.import_module(module) if module.startswith("roarfast.") else sys.modules[module]
        for part in qualname.split("."):
            func = getattr(func, part)
        if not getattr(func, "kept_checkable", False) or func(*args) != result:
            return False
    return True


@contextmanager
def recording(folder: Path, name: str, roots: list, sources: list = ()):
    """Runs the body as a recording; once it returns, keeps its answer in `folder` under `name` unless it
    may not be kept (module docstring). `roots`: the folders the command may write in (its run directory: a
    lock, a folder made again), compared whole before and after; `folder`'s parent, the machine's cache, is one
    too. `sources`: the folders it only reads (an image tree), recorded whole once it returned; a write there
    spoils it."""
    global _recording, _hooked
    folder = Path(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)  # first: the cache's own listing is part of what is checked
    except OSError:
        pass
    written = [(str(root), None) for root in roots] + [(str(folder.parent), folder.name)]
    before = [tree_digest(root, skip) for root, skip in written]
    recording = Recording(root for root, _ in written)
    if not _hooked:
        sys.addaudithook(_audit)
        _hooked = True
    stdout, stderr = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = _Tee(stdout, "stdout", recording), _Tee(stderr, "stderr", recording)
    _recording = recording
    try:
        yield recording
    finally:
        _recording = None
        sys.stdout, sys.stderr = stdout, stderr
    after = [tree_digest(root, skip) for root, skip in written]
    if recording.spoiled is not None or before != after:
        return
    trees = written + [(str(source), None) for source in sources]
    after += [tree_digest(source) for source in sources]
    read = recording.read | {m.__file__ for m in list(sys.modules.values()) if getattr(m, "__file__", None)}
    record = {"format": FORMAT, "made": time.strftime("%Y-%m-%d %H:%M:%S"), "read": sorted([p, stamp(p)] for p in read),
              "trees": [[root, skip, digest] for (root, skip), digest in zip(trees, after)],
              "checks": recording.checks, "printed": recording.printed}
    try:
        write_record(folder / f"{name}.json", record, indent=None)
        _forget_oldest(folder)
    except OSError:
        pass  # a cache that cannot be written keeps nothing; the answer was printed


def _forget_oldest(folder: Path) -> None:
    kept = sorted(folder.glob("*.json"), key=lambda p: p.stat().st_mtime_ns)
    for old in kept[:-LIMIT]:
        old.unlink(missing_ok=True)
