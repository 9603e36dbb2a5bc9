"""What a worker (a Ray task on another node, a cell process, a data-parallel rank) must see of the driver's run
directory, checked before it does any work: the run directory at the driver's absolute path (a relative one
would be read against each worker's own working directory), the driver's records of the data and of the base
model there, byte for byte (compared by digest), and the data's folder. A worker that sees less fails in one line
naming its node; none falls back to a default dataset (the data is loaded by its fingerprint's record alone).

HEAD.json is not compared: every request rewrites it, so another sweep sharing the run directory would make the
workers of this one refuse; the dataset record and the base model's meta.json never change once written.
"""

import os
import socket
from pathlib import Path

from roarfast.common.fingerprint import sha256_file
from roarfast.errors import UserError
from roarfast.records.checkpoint import META
from roarfast.rundir.directory import RunDir

#: what every refusal says to do
SHARED = "the run directory and the data must be on a filesystem every node mounts at the same path"


class NotShared(UserError):
    """A worker does not see what the driver sees: no work can be done there, so the run ends in this line
    (every claim given back) rather than marking each cell failed."""


def this_node(ray_node: str | None = None) -> str:
    """How a refusal names the worker's machine: its host name, and its Ray node id when it is a Ray task."""
    host = socket.gethostname()
    return f"Ray node {ray_node[:8]} ({host})" if ray_node else f"a worker on {host}"


def driver_view(run, ds, base: str | None = None) -> dict:
    """What the driver sees of RunDir `run` for the data `ds` and the base model `base` (None: none needed): the
    run directory's absolute path, {record's path in it: sha256} of the data's record (written here when it is
    missing: the workers load the data by it) and the base model's meta.json, and the data's folder."""
    root = Path(os.path.abspath(run.root))
    run = RunDir(root)
    if not run.dataset_record_path(ds.fingerprint).is_file():
        run.remember_dataset(ds)
    paths = [run.dataset_record_path(ds.fingerprint)] + ([run.model_path(base) / META] if base else [])
    records = {str(path.relative_to(root)): sha256_file(path) for path in paths if path.is_file()}
    return {"run_dir": str(root), "dataset": ds.fingerprint, "records": records,
            "data_dir": run.dataset_record(ds.fingerprint)["data_dir"]}


def check_view(run_dir, view: dict, node: str) -> RunDir:
    """The RunDir at `run_dir` once it shows what the driver's `view` (driver_view) saw; else NotShared, one
    line naming `node` (this_node) and saying where the run directory must be."""
    root = Path(run_dir)

    def refuse(what: str):
        raise NotShared(f"{node} cannot see the run directory {view['run_dir']} as the driver does ({what}): "
                        f"{SHARED}")

    if not root.is_absolute():
        refuse(f"it was given the relative path {run_dir}, which each node reads against its own working directory")
    if not root.is_dir():
        refuse(f"there is no {root} there")
    for name, digest in view["records"].items():
        path = root / name
        if not path.is_file():
            refuse(f"{name} is missing there")
        if sha256_file(path) != digest:
            refuse(f"{name} differs from the driver's")
    data_dir = view["data_dir"]
    if data_dir is not None and not Path(data_dir).exists():
        raise NotShared(f"{node} cannot see the data directory {data_dir} the driver loaded the data from: {SHARED}")
    return RunDir(root)


def driver_data(run, view: dict, node: str):
    """The dataset of the driver's `view`, loaded from its record in RunDir `run` (never a default one) and
    checked to be the driver's data (its fingerprint); else NotShared, naming `node`."""
    try:
        return run.open_recorded_dataset(view["dataset"])
    except UserError as err:
        raise NotShared(f"{node} cannot load the driver's data ({err}): {SHARED}") from None
