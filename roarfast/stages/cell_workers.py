"""Cells trained in processes other than the one that planned them: a Ray task's, and the ranks of a cell
trained data-parallel. Each first checks that it sees the planner's run directory (roarfast.stages.worker_view),
then rebuilds the cells' CellTrainer from it (a shared filesystem across nodes) and the planner's settings
(`worker_settings`), so it trains exactly the cells the planner keyed and claimed; the planner alone writes
results.sqlite.

A data-parallel cell (`train_data_parallel`, --workers-per-cell N) is trained by N processes on one machine
(one per GPU; gloo on CPU), joined in a torch process group: each takes its share of every batch under
DistributedDataParallel (roarfast.train.parallel), so the cell's recipe, batch and seed are unchanged and its
row means what one worker's would; how many workers trained it is recorded beside it, like a group's size.
"""

import ctypes
import json
import os
import signal
import socket

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from roarfast.stages.cells import CellTrainer, cell_model
from roarfast.stages.worker_view import check_view, driver_data, driver_view, this_node
from roarfast.errors import UserError
from roarfast.models.spec import check_source
from roarfast.common.plugins import named_imports, user_named
from roarfast.recipe import Recipe
from roarfast.train import Grouping
from roarfast.train.parallel import join_torchrun

#: per process: the CellTrainer of the last settings it served, so that a Ray worker loads the dataset and
#: the ranks once for all the cells it trains
_TRAINERS = {}


def worker_settings(trainer: CellTrainer, device: str, threads: int, workers: int = 1) -> dict:
    """What another process needs to train `trainer`'s cells as it would (JSON-able): the device type, the
    model and its source hash, the fill, the recipe field by field, the CPU threads (of each worker), the
    grouping, the workers per cell, the import paths the user named, the base model and the ranks' ids of
    the cells' configuration, and what the driver sees of the run directory (worker_view.driver_view: its
    absolute path, which the executors hand the workers as `run_dir`, the data's and the base model's records)."""
    grouping = trainer.grouping
    return {"device": device, "model": trainer.model_name, "model_source": trainer.model.source_sha256,
            "fill": trainer.fill, "recipe": trainer.recipe.to_dict(), "threads": threads,
            "grouping": {"size": grouping.size, "how": grouping.how, "compile": grouping.compile},
            "workers": workers, "imports": named_imports(), "base": trainer.base, "ranks": trainer.rank_ids,
            "view": driver_view(trainer.run, trainer.ds, trainer.base)}


def worker_trainer(run_dir: str, settings: dict, device=None, node: str | None = None) -> CellTrainer:
    """The CellTrainer of `settings` (worker_settings) on the run directory `run_dir`, on `device` (default:
    settings' device), built once per process and settings, once this process (on `node`: this_node's) was
    seen to see the driver's run directory and data (worker_view.check_view)."""
    device = device or settings["device"]
    key = (run_dir, json.dumps(settings, sort_keys=True), str(device))
    if key not in _TRAINERS:
        node = node or this_node()
        run = check_view(run_dir, settings["view"], node)  # before any work: what the driver sees, or one line
        torch.set_num_threads(settings["threads"])
        with user_named(settings["imports"]):  # what the planner's user named: the records may name it here too
            ds = driver_data(run, settings["view"], node)
        model = cell_model(run, ds, device, settings["model"], base=settings["base"])
        check_source(model, settings["model_source"], "the sweep's driver")
        # the planner's recipe as it recorded it: a worker on another device or version trains the same cells
        recipe = Recipe.from_dict(settings["recipe"])
        _TRAINERS.clear()
        _TRAINERS[key] = CellTrainer(run, ds, model, recipe, settings["fill"], device,
                                     grouping=Grouping(**settings["grouping"]), base=settings["base"],
                                     ranks=settings["ranks"])
    return _TRAINERS[key]


def train_cells(run_dir: str, settings: dict, cells: list, node: str | None = None) -> list:
    """Per cell of `cells` its metrics or the exception that failed it, trained here (one alone, or several
    together) or, with settings' workers > 1, data-parallel by that many local processes; `node`: how a
    refusal names this machine (this_node's)."""
    if settings["workers"] > 1:
        check_view(run_dir, settings["view"], node or this_node())  # before the ranks are spawned
        return train_data_parallel(run_dir, settings, cells)
    return worker_trainer(run_dir, settings, node=node).train_cells(cells)


def _free_port() -> int:
    """A TCP port free on this machine now, for the ranks' rendezvous."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def train_data_parallel(run_dir: str, settings: dict, cells: list) -> list:
    """Trains each of `cells` in turn over settings' `workers` processes (spawned here, one per GPU on CUDA, the
    settings' threads each on CPU) joined in one process group; returns rank 0's outcome per cell (metrics with
    `workers`, or the exception that failed it). A UserError in any rank is raised here; a rank that dies ends
    the others and fails the cells."""
    world = settings["workers"]
    context = mp.get_context("spawn")
    outcomes = context.SimpleQueue()
    env = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(_free_port()), "WORLD_SIZE": str(world)}
    try:
        mp.start_processes(_rank, args=(env, run_dir, settings, cells, outcomes), nprocs=world, join=True,
                           start_method="spawn")
    except mp.ProcessException as err:
        reported = []
        while not outcomes.empty():
            reported.append(outcomes.get())
        for error in reported:  # a rank's own account beats the process's exit
            if isinstance(error, UserError):
                raise error from None
        cause = next((e for e in reported if isinstance(e, BaseException)),
                     RuntimeError(f"a data-parallel worker of {world} ended: {str(err).splitlines()[0]}"))
        return [cause] * len(cells)
    return outcomes.get()


def die_with_parent() -> None:
    """Has Linux kill this process when the one that spawned it dies (a Ray worker killed with its node or
    its driver, a sweep's cell process with its sweep), so that no rank or cell trains on alone, holding a
    device or a core; elsewhere nothing."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # 1: PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _rank(rank: int, env: dict, run_dir: str, settings: dict, cells: list, outcomes) -> None:
    """One rank of train_data_parallel: joins the group (NCCL on GPUs, gloo on CPU), trains the cells under
    DDP, waits for the others, and (rank 0) reports the outcomes; an exception is reported and raised."""
    os.environ.update(env, RANK=str(rank), LOCAL_RANK=str(rank))
    die_with_parent()
    try:
        device = join_torchrun(torch.device(settings["device"]))
        results = worker_trainer(run_dir, settings, device).train_cells(cells)
        dist.barrier()  # no rank tears the group down while another's gloo threads still talk to it
        if rank == 0:
            outcomes.put([r if isinstance(r, BaseException) else {**r, "workers": settings["workers"]}
                          for r in results])
    except BaseException as err:
        outcomes.put(err)
        raise
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
