"""The local executor: cells trained in this process, `group_size` at a time (or each data-parallel over
processes of this machine), or on a CPU side by side in cell processes (one thread each by default); an
extraction's chunks computed in this process."""

import multiprocessing
import socket
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

from roarfast.errors import UserError
from roarfast.stages.executor import Executor
from roarfast.execution.ray_cluster import local_threads
from roarfast.execution.registry import register_executor


@register_executor("local", "in this process (or, on a CPU, cells side by side in single-thread processes)",
                   order=0)
class LocalExecutor(Executor):
    """--executor local: everything on this machine; it has no options of its own."""

    def check_processes(self, cell_processes: int, device, *, group_size: int, workers_per_cell: int) -> None:
        # late: loads torch, and every --help lists this backend
        from roarfast.execution.executors import device_type

        if (group_size, workers_per_cell, device_type(device)) != (1, 1, "cpu"):
            super().check_processes(cell_processes, device, group_size=group_size, workers_per_cell=workers_per_cell)

    def check_workers(self, workers: int, device) -> None:
        # late: loads torch, and every --help lists this backend
        import torch

        from roarfast.execution.executors import device_type

        if device_type(device) == "cuda" and workers > torch.cuda.device_count():
            raise UserError(f"--workers-per-cell {workers}: this machine has {torch.cuda.device_count()} GPU(s); use "
                            f"at most that many, or --executor ray on a node with more")

    def cell_threads(self, device, threads: int | None, *, workers_per_cell: int = 1, cell_processes: int = 1) -> int:
        """`threads`, else on a CPU one a cell process (they are one per core), this process's threads shared by a
        data-parallel cell's workers, or this process's threads (torch's count: one per core, or OMP_NUM_THREADS)."""
        # late: loads torch, and every --help lists this backend
        from roarfast.execution.executors import device_type

        if threads is not None:
            return threads
        if device_type(device) == "cpu" and cell_processes > 1:
            return 1
        if device_type(device) == "cpu":
            return max(1, local_threads() // workers_per_cell)
        return local_threads()

    def run_cells(self, trainer, pending: list, claims, *, group_size: int, workers_per_cell: int,
                  cell_processes: int, threads: int) -> None:
        # late: loads torch, and every --help lists this backend
        from roarfast.execution.executors import torch_threads
        if cell_processes > 1:
            _execute_processes(trainer, pending, claims, cell_processes, threads)
        elif workers_per_cell > 1:
            _execute_here(_DataParallel(trainer, workers_per_cell, threads), pending, claims, group_size)
        else:
            with torch_threads(threads):
                _execute_here(trainer, pending, claims, group_size)


class _DataParallel:
    """The local executor's trainer of data-parallel cells: keys them as `trainer`, trains each claimed cell
    over `workers` processes of this machine (cell_workers.train_data_parallel), each with `threads` CPU
    threads."""

    def __init__(self, trainer, workers: int, threads: int):
        # late: loads torch and the cell trainer, and every --help lists this backend
        from roarfast.execution.executors import device_type
        from roarfast.stages.cell_workers import worker_settings
        self.key = trainer.key
        self.settings = worker_settings(trainer, device_type(trainer.device), threads, workers)
        self.run_dir = self.settings["view"]["run_dir"]

    def train_cells(self, cells: list) -> list:
        # late: loads torch and the cell trainer, and every --help lists this backend
        from roarfast.stages.cell_workers import train_data_parallel

        return train_data_parallel(self.run_dir, self.settings, cells)


def _execute_here(trainer, pending: list, claims, group_size: int = 1) -> None:
    """The cells trained in this process (a CellTrainer's, or a _DataParallel's), `group_size` at a time."""
    # late: loads torch and the cell trainer, and every --help lists this backend
    from roarfast.execution.executors import POLL_S, claim_group, finish_group, train_claimed

    with claims.heartbeat():
        while pending:
            group = claim_group(trainer, pending, claims, group_size)
            if not group:
                time.sleep(POLL_S)  # the rest is held by live processes: wait for them (or their end)
                continue
            try:
                outcomes = train_claimed(trainer, group)
            except (KeyboardInterrupt, UserError):
                for _, key in group:
                    claims.release(key)
                raise
            finish_group(claims, group, outcomes, pending)
    claims.raise_failures()


def _execute_processes(trainer, pending: list, claims, processes: int, threads: int) -> None:
    """The cells trained side by side, one at a time in each of `processes` processes of this machine with
    `threads` threads each (spawned once; each rebuilds the trainer from the run directory:
    cell_workers.train_cells)."""
    # late: loads torch and the cell trainer, and every --help lists this backend
    from roarfast.execution.executors import POLL_S, execute_elsewhere
    from roarfast.stages.cell_workers import die_with_parent, train_cells, worker_settings

    settings = worker_settings(trainer, "cpu", threads)
    run_dir, node = settings["view"]["run_dir"], f"a cell process on {socket.gethostname()}"
    pool = ProcessPoolExecutor(processes, mp_context=multiprocessing.get_context("spawn"), initializer=die_with_parent)
    try:
        execute_elsewhere(trainer, pending, claims, 1, capacity=lambda: processes,
                          submit=lambda cells: pool.submit(train_cells, run_dir, settings, cells, node),
                          ready=lambda futures: wait(futures, timeout=POLL_S, return_when=FIRST_COMPLETED).done,
                          outcome=lambda future: future.result())
    finally:
        pool.shutdown(cancel_futures=True)
