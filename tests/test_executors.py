"""The executors' one path for a cell's life in results.sqlite (roarfast.execution.executors), with a stand-in
trainer: every cell claimed and recorded once, a done cell never trained again, a failing cell marked
failed while the others go on, an interrupted cell's claim given back, one progress line per cell; the CPU threads
of a cell decided once (asked for, else each executor's default, on Ray whatever the nodes hold), trained with and
recorded in its row, and a line where done cells of a configuration trained with other counts."""

from types import SimpleNamespace

import pytest
import torch

from roarfast.stages.cells import Cell, CellTrainer
from roarfast.errors import UserError
from roarfast.stages.executor import Executor
from roarfast.execution.executors import Progress, execute, execute_elsewhere, thread_note
from roarfast.execution.backends.local import LocalExecutor
from roarfast.execution.backends.ray import RayExecutor, RayOptions
from roarfast.execution.ray_cluster import task_resources
from roarfast.stages.worker_view import NotShared
from roarfast.results import RETRAIN, MeasurementKey, ResultsDB


class StandInTrainer:
    """Trains nothing on the CPU: a cell's accuracy is its seed / 10, its threads torch's count as it trains; the
    cells in `fail` raise `error`."""

    device = "cpu"

    def __init__(self, fail=(), error=RuntimeError("out of memory")):
        self.fail, self.error, self.trained = set(fail), error, []

    def key(self, cell: Cell):
        return MeasurementKey(RETRAIN, "embedded", "fastnet", cell.method, cell.measured_mode,
                              None if cell.control else "dataset-mean", cell.fraction, cell.seed, "h" * 64)

    def train(self, cell: Cell) -> dict:
        self.trained.append(cell)
        if cell in self.fail:
            raise self.error
        return {"test_acc": cell.seed / 10, "val_acc": 0.5, "epochs": 1, "seconds": 2.0,
                "threads": torch.get_num_threads()}

    train_cells = CellTrainer.train_cells  # the executors' one call: alone or together, as the real trainer


CELLS = [Cell("random", "roar", 0.5, seed) for seed in range(3)] + [Cell("random", "roar", 0.5, 0, control=True)]


def test_each_cell_is_recorded_once_and_a_done_cell_is_skipped(tmp_path):
    trainer = StandInTrainer()
    lines = []
    with ResultsDB(tmp_path / "r.sqlite") as db:
        db.record(trainer.key(CELLS[1]), {"test_acc": 0.9, "val_acc": 0.9, "epochs": 1, "seconds": 1.0})
        todo = [(cell, trainer.key(cell)) for cell in CELLS]
        execute(trainer, todo, db, progress=Progress(len(todo), False, lines.append, eta=lambda *a: 30.0))
        rows = {(r["seed"], r["mode"]): r["test_acc"] for r in db.rows()}
    assert trainer.trained == [CELLS[0], CELLS[2], CELLS[3]]
    assert rows == {(0, "roar"): 0.0, (1, "roar"): 0.9, (2, "roar"): 0.2, (0, "roar-mask"): 0.0}
    assert lines[0] == "[sweep] 1/4 random roar 0.5 seed 0: 0.0% (2.0 s), ETA 30s"
    assert len(lines) == 3 and lines[-1].startswith("[sweep] 3/4 random roar-mask 0.5 seed 0")


def test_a_failing_cell_is_marked_failed_and_the_others_go_on(tmp_path):
    trainer = StandInTrainer(fail={CELLS[1]})
    lines = []
    with ResultsDB(tmp_path / "r.sqlite") as db:
        with pytest.raises(UserError, match=r"1 cell\(s\) failed, e.g. random roar 0.5 seed 1: RuntimeError: out of "
                                            r"memory \(marked failed in .*r.sqlite; the same command retries them\)"):
            execute(trainer, [(cell, None) for cell in CELLS], db, echo=lines.append)
        statuses = {r["seed"] if r["mode"] == "roar" else "control": (r["status"], r["error"]) for r in db.rows()}
    assert statuses == {0: ("done", None), 1: ("failed", "RuntimeError: out of memory"), 2: ("done", None),
                        "control": ("done", None)}
    assert [line for line in lines if "FAILED" in line] == [
        "[sweep] random roar 0.5 seed 1: FAILED (RuntimeError: out of memory)"]
    assert sum(": FAILED" not in line for line in lines) == 3  # a progress line per recorded cell
    # the same command retries the failed cell only
    again = StandInTrainer()
    with ResultsDB(tmp_path / "r.sqlite") as db:
        execute(again, [(cell, None) for cell in CELLS], db)
        assert {r["status"] for r in db.rows()} == {"done"}
    assert again.trained == [CELLS[1]]


def test_an_interrupted_cell_gives_its_claim_back(tmp_path):
    trainer = StandInTrainer(fail={CELLS[0]}, error=KeyboardInterrupt())
    with ResultsDB(tmp_path / "r.sqlite") as db:
        with pytest.raises(KeyboardInterrupt):
            execute(trainer, [(cell, None) for cell in CELLS], db)
        assert db.rows() == []  # as if never started: another run takes it at once


class GroupTrainer(StandInTrainer):
    """Trains groups too: the groups it was handed (seeds), each cell's outcome as StandInTrainer's (an
    exception in place of a failing cell's metrics, a UserError ending the group); `during(group)` runs
    while a group trains."""

    def __init__(self, fail=(), error=RuntimeError("out of memory"), during=None):
        super().__init__(fail, error)
        self.groups, self.during = [], during

    def train_group(self, cells):
        self.groups.append([cell.seed for cell in cells])
        if self.during is not None:
            self.during(cells)
        outcomes = []
        for cell in cells:
            try:
                outcomes.append(self.train(cell))
            except UserError:
                raise
            except Exception as err:  # noqa: BLE001
                outcomes.append(err)
        return outcomes


SEEDS = [Cell("random", "roar", 0.5, seed) for seed in range(5)]


def test_cells_are_handed_out_in_groups_and_a_group_of_one_trains_alone(tmp_path):
    trainer = GroupTrainer()
    with ResultsDB(tmp_path / "r.sqlite") as db:
        execute(trainer, [(cell, None) for cell in SEEDS], db, group_size=2)
        assert sorted(r["seed"] for r in db.rows(status="done")) == [0, 1, 2, 3, 4]
    assert trainer.groups == [[0, 1], [2, 3]]  # the last cell alone: train, not train_group
    assert trainer.trained == SEEDS


def test_a_cell_held_elsewhere_is_skipped_and_the_group_takes_the_next(tmp_path):
    """Another live process holds seed 1: the first group is seeds 0 and 2; once that process has recorded
    seed 1, it leaves the plan, never trained here."""
    other = {"host": "another-host", "pid": 1, "start": None}  # alive while its heartbeat is fresh
    trainer = GroupTrainer()
    with ResultsDB(tmp_path / "r.sqlite") as db:
        assert db.claim(trainer.key(SEEDS[1]), other)
        done = {"test_acc": 0.7, "val_acc": 0.7, "epochs": 1, "seconds": 1.0}
        trainer.during = lambda cells: db.record(trainer.key(SEEDS[1]), done) if cells[0].seed == 0 else None
        execute(trainer, [(cell, None) for cell in SEEDS], db, group_size=2)
        accuracies = {r["seed"]: r["test_acc"] for r in db.rows(status="done")}
    assert trainer.groups == [[0, 2], [3, 4]]
    assert accuracies == {0: 0.0, 1: 0.7, 2: 0.2, 3: 0.3, 4: 0.4}


def test_a_failing_cell_of_a_group_is_marked_failed_alone(tmp_path):
    trainer = GroupTrainer(fail={SEEDS[1]})
    with ResultsDB(tmp_path / "r.sqlite") as db:
        with pytest.raises(UserError, match=r"1 cell\(s\) failed, e.g. random roar 0.5 seed 1"):
            execute(trainer, [(cell, None) for cell in SEEDS], db, group_size=3)
        statuses = {r["seed"]: r["status"] for r in db.rows()}
    assert statuses == {0: "done", 1: "failed", 2: "done", 3: "done", 4: "done"}


def test_a_group_ended_by_a_user_error_gives_every_claim_back(tmp_path):
    trainer = GroupTrainer(fail={SEEDS[3]}, error=UserError("ranks damaged"))
    with ResultsDB(tmp_path / "r.sqlite") as db:
        with pytest.raises(UserError, match="ranks damaged"):
            execute(trainer, [(cell, None) for cell in SEEDS], db, group_size=3)
        rows = {r["seed"]: r["status"] for r in db.rows()}
    assert rows == {0: "done", 1: "done", 2: "done"}  # the second group (3, 4) left no claim behind


def test_a_lost_hosts_claim_is_waited_for_until_its_heartbeat_is_stale(tmp_path, monkeypatch):
    """A claimant on another host (a driver whose node was lost) cannot be looked up from here: its cell is
    left to it, said once, until its heartbeat is older than HEARTBEAT_STALE_S; then it is taken over."""
    from roarfast.records import claims
    from roarfast.execution import executors

    for holder in (claims, executors):  # what takes over, and the line that says when
        monkeypatch.setattr(holder, "HEARTBEAT_STALE_S", 1.5)
    monkeypatch.setattr(executors, "POLL_S", 0.1)  # how often the local executor looks again
    trainer, lines = StandInTrainer(), []
    lost = {"host": "lost-node", "pid": 4242, "start": "1"}
    with ResultsDB(tmp_path / "r.sqlite") as db:
        assert db.claim(trainer.key(CELLS[0]), lost)  # its heartbeat: now
        execute(trainer, [(cell, None) for cell in CELLS[:2]], db, echo=lines.append)
        rows = db.rows()
    assert trainer.trained == [CELLS[1], CELLS[0]]  # the free cell first, the lost one once its claim went stale
    assert [line for line in lines if "waiting" in line] == [
        "[sweep] waiting for the cells that pid 4242 on lost-node trains (taken over once it is gone: from another "
        "host or pid namespace, after 2 s without its heartbeat)"]
    assert [(r["seed"], r["status"], r["owner"]) for r in rows] == [(0, "done", None), (1, "done", None)]


# ------------------------------------------------------------------------------------ the executor seam


def test_executors_are_made_in_one_place_from_their_name_and_options():
    from roarfast.execution.backends.local import LocalExecutor
    from roarfast.execution.backends.ray import RayExecutor
    from roarfast.execution.registry import DEFAULT_EXECUTOR, EXECUTORS, make_executor

    assert EXECUTORS[DEFAULT_EXECUTOR].value is LocalExecutor and EXECUTORS["ray"].value is RayExecutor
    for entry in EXECUTORS:  # each made by its name, as the class it registered, named as registered
        made = make_executor(entry.name)
        assert type(made) is entry.value and made.name == entry.name
    assert isinstance(make_executor(), LocalExecutor) and isinstance(make_executor("local", {"address": "x"}),
                                                                     LocalExecutor)
    ray = make_executor("ray", {"address": "head:6379", "cpus_per_cell": 2})
    assert isinstance(ray, RayExecutor) and (ray.options.address, ray.options.cpus_per_cell) == ("head:6379", 2)
    assert make_executor(ray) is ray  # an Executor object is taken as it is
    with pytest.raises(UserError, match=rf"^--executor should be one of {', '.join(EXECUTORS.names)}, got 'dask'$"):
        make_executor("dask")
    with pytest.raises(UserError, match=r"^ray: gpus is no field of RayOptions"):
        make_executor("ray", {"gpus": 1})


class Inline(Executor):
    """A backend of its own, as a Dask or Slurm one would be: its cells go through the one in-flight loop, each
    group a handle computed when it is asked for; `refuse`: its worker cannot see the run directory."""

    name, where, remote = "inline", " inline", True

    def __init__(self, refuse: bool = False):
        self.refuse, self.submitted = refuse, []

    def cell_threads(self, device, threads, *, workers_per_cell=1, cell_processes=1):
        self.threads = threads or 3
        return self.threads

    def run_cells(self, trainer, pending, claims, *, group_size, workers_per_cell, cell_processes, threads):
        assert threads == self.threads  # what its cell_threads decided

        def outcome(cells):
            if self.refuse:
                raise NotShared("node n1 cannot see the run directory /runs/a as the driver does")
            return trainer.train_cells(list(cells))

        execute_elsewhere(trainer, pending, claims, group_size, capacity=lambda: 2,
                          submit=lambda cells: self.submitted.append(cells) or tuple(cells),
                          ready=lambda handles: handles[:1], outcome=outcome)


def test_a_new_backend_is_an_executor_object_given_to_the_stages(tmp_path):
    trainer, inline = StandInTrainer(fail={CELLS[2]}), Inline()
    with ResultsDB(tmp_path / "r.sqlite") as db:
        with pytest.raises(UserError, match=r"^1 cell\(s\) failed inline, e.g. random roar 0.5 seed 2"):
            execute(trainer, [(cell, None) for cell in CELLS], db, executor=inline)
        statuses = {(r["seed"], r["mode"]): r["status"] for r in db.rows()}
    assert [len(group) for group in inline.submitted] == [1, 1, 1, 1] and trainer.trained == CELLS
    assert statuses == {(0, "roar"): "done", (1, "roar"): "done", (2, "roar"): "failed", (0, "roar-mask"): "done"}
    with ResultsDB(tmp_path / "r.sqlite") as db:  # what it cannot do is refused before a cell is claimed
        with pytest.raises(UserError, match="2 cell processes train one cell each on the CPU with the local executor, "
                                            "not with --executor inline"):
            execute(SimpleNamespace(device="cpu"), [(CELLS[2], None)], db, executor=inline, cell_processes=2)


def test_a_worker_that_cannot_see_the_run_directory_ends_the_run_and_gives_the_claims_back(tmp_path):
    """Any other error of a worker fails its cells (test_a_new_backend_is_...); this one could only fail them all,
    each with the same line: the run ends in it instead."""
    trainer = StandInTrainer()
    with ResultsDB(tmp_path / "r.sqlite") as db:
        with pytest.raises(UserError, match=r"^node n1 cannot see the run directory /runs/a as the driver does$"):
            execute(trainer, [(cell, None) for cell in CELLS], db, executor=Inline(refuse=True))
        assert db.rows() == []  # no cell marked failed, none left claimed: the same command, once fixed, runs all
    assert trainer.trained == []


# --------------------------------------------------------------------- names resolved once per command


@pytest.fixture
def lookups(monkeypatch) -> list:
    """Every estimator name looked up in the registry from now on."""
    from roarfast.methods import registry

    found, real = [], registry.get
    monkeypatch.setattr(registry, "get", lambda spec: found.append(spec) or real(spec))
    return found


def test_an_extraction_given_a_selection_looks_no_name_up(tmp_path, lookups):
    """The sweep hands extract the Selection it resolved (narrowed to the methods whose ranks are missing):
    extract takes it as it is, names and values, and never reads options.methods."""
    from roarfast.data import load_dataset
    from roarfast.methods.selection import Selection
    from roarfast.rundir.directory import RunDir
    from roarfast.stages.extract import ExtractOptions, run_extract

    selection = Selection.resolve("random,sobel", ExtractOptions(), seed=0).only(["sobel"])
    lookups.clear()
    run_extract(tmp_path, ExtractOptions(methods="sg-sq"), dataset_obj=load_dataset("embedded", num_train=10,
                num_test=20), device="cpu", progress=False, selection=selection)
    assert lookups == []
    assert sorted(RunDir(tmp_path).head().ranks) == ["sobel"]


def test_retrain_looks_each_name_up_once(tmp_path, lookups, monkeypatch):
    """Retrain resolves its methods once and hands the model-free ones it extracts to extract as records, where
    it used to join them back into text that extract looked up again."""
    from roarfast.data import load_dataset
    from roarfast.rundir.directory import RunDir
    from roarfast.orchestration import retrain
    from tests.test_cluster_paths import untrained_base

    ds = load_dataset("embedded", num_train=10, num_test=20)
    untrained_base(tmp_path, ds)
    handed = []  # the cells are not trained here: what retrain hands its executor is enough
    monkeypatch.setattr(retrain, "execute", lambda trainer, cells, db, **options: handed.extend(cells))
    retrain.run_retrain(tmp_path, retrain.RetrainOptions(methods="random,sobel", fractions=(0.5,), epochs=1),
                        dataset_obj=ds, device="cpu", progress=False)
    assert sorted(lookups) == ["random", "sobel"]
    assert [cell.method for cell, _ in handed] == ["random", "sobel"]
    assert sorted(RunDir(tmp_path).head().ranks) == ["random", "sobel"]  # extracted with the records resolved


def test_a_study_hands_the_sweep_its_selection_and_its_executor(tmp_path, lookups, monkeypatch):
    """A Study resolves its methods and chooses its executor once, when it is made; run() hands both on."""
    from roarfast import study as study_module
    from roarfast.execution.backends.ray import RayExecutor

    handed = {}
    monkeypatch.setattr(study_module, "run_sweep",  # returns what run_sweep returns: no cells, no configuration
                        lambda run_dir, grid, **options: handed.update(options) or {"rows": [], "configuration": None})
    monkeypatch.setattr(study_module.Study, "results", lambda self, kind="retrain", config=None: [])  # nothing was measured
    study = study_module.Study(tmp_path / "run", dataset="embedded", dataset_options={"num_train": 10, "num_test": 20},
                               methods=["random", "sobel"], progress=False, executor="ray",
                               ray={"address": "head:6379"})
    looked_up = list(lookups)
    study.run()
    assert sorted(looked_up) == ["random", "sobel"] and lookups == looked_up  # none looked up again by run()
    assert handed["selection"] is study.selection and handed["selection"].names == ["random", "sobel"]
    assert isinstance(handed["executor"], RayExecutor) and handed["executor"].options.address == "head:6379"


def test_a_cell_trains_with_the_threads_asked_for_and_its_row_records_them(tmp_path):
    before = torch.get_num_threads()
    trainer = StandInTrainer()
    with ResultsDB(tmp_path / "r.sqlite") as db:
        execute(trainer, [(CELLS[0], None)], db, threads=1)
        execute(trainer, [(CELLS[1], None)], db)  # the local executor's default: this process's threads
        threads = {r["seed"]: r["threads"] for r in db.rows()}
    assert threads == {0: 1, 1: before}
    assert torch.get_num_threads() == before  # this process's count restored


def test_each_executor_decides_a_cells_threads_whatever_the_nodes_hold(monkeypatch):
    monkeypatch.setattr("roarfast.execution.backends.ray.local_threads", lambda: 4)
    monkeypatch.setattr("roarfast.execution.backends.local.local_threads", lambda: 4)
    local, ray = LocalExecutor(), RayExecutor()
    assert local.cell_threads("cpu", None) == 4 and ray.cell_threads("cpu", None) == 4
    assert local.cell_threads("cpu", 3) == 3 and ray.cell_threads("cpu", 3) == 3
    # a data-parallel cell's workers share them; `roarfast run`'s cell processes (one per core) take one each
    assert local.cell_threads("cpu", None, workers_per_cell=2) == ray.cell_threads("cpu", None, workers_per_cell=2) == 2
    assert local.cell_threads("cpu", None, cell_processes=4) == 1
    assert RayExecutor(RayOptions(cpus_per_cell=2)).cell_threads("cpu", None) == 2


def test_on_nodes_smaller_than_a_cells_threads_it_reserves_what_they_hold_and_says_so(monkeypatch):
    """A cell of 4 threads on a cluster of 1-CPU nodes reserves 1 and still trains with 4: its rows equal the local
    executor's; one line says so. Asked for its CPUs, a cell reserves those and computes with as many threads."""
    nodes = SimpleNamespace(nodes=lambda: [{"Alive": True, "Resources": {"CPU": 1.0}}])
    cpus, gpus, threads, note = task_resources(nodes, None, 0.0, threads=4)
    assert (cpus, gpus, threads) == (1, 0.0, 4)
    assert note == ("Ray: a cell computes with 4 threads (this process's count, so that its results equal the local "
                    "executor's) and reserves 1, all the largest node has for it: such a node runs more threads than "
                    "it has CPUs (--threads-per-cell fewer changes the rows)")
    assert task_resources(nodes, 1.0, 0.0, unit="task")[1:] == (0.0, 1, None)
    roomy = SimpleNamespace(nodes=lambda: [{"Alive": True, "Resources": {"CPU": 8.0}}])
    assert task_resources(roomy, None, 0.0, threads=4) == (4, 0.0, 4, None)
    # no CPU asked for (a GPU task's default) is refused without GPUs: nothing would bound how many run on a node
    with pytest.raises(UserError, match=r"--cpus-per-task 0 without --gpus-per-task: .*--cpus-per-task 1 or more"):
        task_resources(roomy, 0.0, 0.0, unit="task")


def test_done_cells_of_other_thread_counts_are_said_in_one_line():
    rows = [{"status": "done", "threads": 1}, {"status": "done", "threads": 1}, {"status": "done", "threads": 2},
            {"status": "done", "threads": None}, {"status": "failed", "threads": 4}, None]
    assert thread_note(rows, 2) == (
        "2 done cell(s) of this configuration trained with other CPU thread counts (2 with 1 thread) than those left "
        "will (2): CPU accuracies depend on it, and the report says so; --threads-per-cell sets it")
    assert thread_note(rows, 1) is not None and thread_note(rows[2:4], 2) is None
