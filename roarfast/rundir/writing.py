"""A run directory opened for writing: the one way a command that writes opens one (`open_for_writing`). It is
upgraded first (roarfast.rundir.migrate.upgrade: format 1 migrated in place, a prune a kill left unfinished
finished), once per process and directory; the readers (`roarfast ls`, `report`, `prune --dry-run`) open a
RunDir as it is and never come here."""

from pathlib import Path

from roarfast.rundir.directory import RunDir
from roarfast.rundir.migrate import upgrade

#: the run directories (resolved) this process upgraded: a second stage of the same command finds it done
_UPGRADED = set()


def open_for_writing(root) -> RunDir:
    """The RunDir at `root`, upgraded when this process has not yet upgraded it (an upgrade that fails, or is
    interrupted, is tried again by the next opening)."""
    run = RunDir(root)
    where = Path(root).expanduser().resolve()
    if where not in _UPGRADED:
        upgrade(run)
        _UPGRADED.add(where)
    return run


def forget(run) -> None:
    """Makes the next open_for_writing of `run` upgrade it again: this process left work that the upgrade
    finishes (a prune interrupted here, whose intent the next command completes)."""
    _UPGRADED.discard(Path(run.root).expanduser().resolve())
