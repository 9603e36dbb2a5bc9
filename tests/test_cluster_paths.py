"""What a worker must see of the driver's run directory (roarfast.stages.worker_view), without a cluster: the
driver hands its workers the run directory as an absolute path, so a worker in another working directory finds
it where a relative path would not; a worker given a directory that does not hold the driver's records (another
node's, a copy, nothing), or that cannot see the data's folder, refuses before any work, in one line naming its
node and saying where the run directory must be; none falls back to a default dataset."""

import json
import shutil

import pytest
import torch

from roarfast.data import load_dataset
from roarfast.errors import UserError
from roarfast.rundir.directory import RunDir
from roarfast.stages.cell_workers import train_cells, worker_trainer
from roarfast.stages.extract_tasks import worker_explainer
from roarfast.models import build_model
from roarfast.stages.worker_view import check_view, driver_data, driver_view

SHARED = "must be on a filesystem every node mounts at the same path"


def untrained_base(run_dir, dataset) -> str:
    """Saves an untrained fastnet of `dataset` as run_dir's base model, HEAD naming it and the data; its id."""
    torch.manual_seed(0)
    run = RunDir(run_dir)
    base = run.save_base_model(build_model("fastnet", dataset.num_classes), {
        "model": "fastnet", "num_classes": dataset.num_classes, "image_size": 32, "in_channels": 3,
        "dataset_fingerprint": dataset.fingerprint})
    run.update_head("test", base=base, dataset=run.remember_dataset(dataset))
    return base


@pytest.fixture(scope="module")
def dataset():
    return load_dataset("embedded", num_train=10, num_test=20)


@pytest.fixture
def driver(tmp_path, dataset, monkeypatch):
    """(the driver's view, the base model's id), the driver working in tmp_path/driver on the relative run
    directory "run" (a dataset record and an untrained base model in it)."""
    (tmp_path / "driver").mkdir()
    monkeypatch.chdir(tmp_path / "driver")
    base = untrained_base("run", dataset)
    return driver_view(RunDir("run"), dataset, base), base


def test_the_driver_hands_an_absolute_run_directory_that_a_worker_elsewhere_finds(driver, dataset, tmp_path,
                                                                                  monkeypatch):
    view, base = driver
    assert view["run_dir"] == str(tmp_path / "driver" / "run")
    assert sorted(view["records"]) == sorted([str(RunDir(".").dataset_record_path(dataset.fingerprint)),
                                              f"models/{base}/meta.json"])
    (tmp_path / "worker").mkdir()
    monkeypatch.chdir(tmp_path / "worker")  # a Ray worker's working directory is its own
    run = check_view(view["run_dir"], view, "Ray node 0123abcd (host-b)")
    assert driver_data(run, view, "Ray node 0123abcd (host-b)").fingerprint == dataset.fingerprint
    # the relative path the user typed names nothing here: refused, never read as another directory
    with pytest.raises(UserError, match=r"^Ray node 0123abcd \(host-b\) cannot see the run directory .*/driver/run "
                                        r"as the driver does \(it was given the relative path run, .*\): .*" + SHARED):
        check_view("run", view, "Ray node 0123abcd (host-b)")


@pytest.mark.parametrize("damage, says", [
    (lambda other, view: shutil.rmtree(other), "there is no .*/other there"),
    (lambda other, view: (other / next(iter(view["records"]))).unlink(), r"datasets/\w+\.json is missing there"),
    (lambda other, view: (other / "models").rename(other / "elsewhere"), r"models/\w+/meta\.json is missing there"),
    (lambda other, view: (other / next(iter(view["records"]))).write_text(json.dumps({"name": "embedded"})),
     r"datasets/\w+\.json differs from the driver's"),
])
def test_a_worker_that_does_not_see_the_drivers_records_refuses_in_one_line(driver, tmp_path, damage, says):
    """The node's directory at that path is not the driver's: gone, a record missing, or another record."""
    view, _ = driver
    other = shutil.copytree(tmp_path / "driver" / "run", tmp_path / "other")
    damage(other, view)
    with pytest.raises(UserError, match=f"^a node cannot see the run directory .* as the driver does \\({says}\\): "
                                        f"the run directory and the data {SHARED}$"):
        check_view(str(other), view, "a node")


def test_a_worker_checks_before_any_work_and_never_loads_a_default_dataset(driver, tmp_path):
    """The workers of cells (a Ray task, a cell process, a data-parallel cell) and of chunks check first: given
    an empty directory (no HEAD.json, no dataset record), they refuse, where they used to load the embedded
    dataset or fail on a missing record."""
    view, _ = driver
    empty = tmp_path / "empty"
    empty.mkdir()
    settings = {"device": "cpu", "view": view, "workers": 1}  # nothing else is read before the check
    for work in (lambda: worker_trainer(str(empty), settings, node="Ray node feedbeef (host-c)"),
                 lambda: train_cells(str(empty), {**settings, "workers": 2}, [], node="Ray node feedbeef (host-c)"),
                 lambda: worker_explainer(str(empty), settings, node="Ray node feedbeef (host-c)")):
        with pytest.raises(UserError, match=r"^Ray node feedbeef \(host-c\) cannot see the run directory .* \(datasets/"
                                            r"\w+\.json is missing there\)"):
            work()
    with pytest.raises(UserError, match=f"cannot load the driver's data .*: the run directory and the data {SHARED}"):
        driver_data(RunDir(empty), view, "a node")


def test_a_worker_that_cannot_see_the_data_refuses(driver, tmp_path):
    view, _ = driver
    away = {**view, "data_dir": str(tmp_path / "data-on-the-driver-only")}
    with pytest.raises(UserError, match=f"^a node cannot see the data directory .*data-on-the-driver-only the driver "
                                        f"loaded the data from: the run directory and the data {SHARED}$"):
        check_view(view["run_dir"], away, "a node")
