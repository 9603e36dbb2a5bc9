"""The executor interface: where a stage's work runs. Extract, the sweep and retrain receive an `Executor` (made
from the user's --executor by roarfast.execution.registry, the one place a name is read) and ask it, never its
name: whether it refuses a way of training cells, to train the cells claimed by the one in-flight loop
(roarfast.execution.executors), and who computes an extraction's chunks.

It sits with the stages, below the backends: a backend is one module of roarfast.execution.backends (`local`,
`ray`) with a subclass, registered with its own options (roarfast.execution.registry.register_executor). Light on
purpose (no torch): the CLI builds --executor from the registry.
"""

from roarfast.errors import UserError


class Executor:
    """Where cells and chunks are computed. A subclass is registered under its `name` (as --executor names it;
    register_executor sets it), is made with its options object where it declares one (`cls(options)`, else
    `cls()`), and implements `run_cells`; one whose work runs in other processes that rebuild it from the run directory sets `remote`
    (what they cannot rebuild, a Python object without an import path, is refused before any work) and returns
    its chunk runner from `chunk_runner`."""

    name: str = ""
    #: said after "failed" in a failed cell's line: where it was trained
    where: str = ""
    #: its work runs in processes that load the data, the model and the estimators by name from the run directory
    remote: bool = False

    def prepare(self) -> None:
        """Fails, in one line and before any work, where this executor cannot run at all (a missing library)."""

    def check_processes(self, cell_processes: int, device, *, group_size: int, workers_per_cell: int) -> None:
        """Refuses (UserError), before any cell is claimed, `cell_processes` (above 1) where this executor cannot
        train cells side by side in them: they are the local executor's, one cell each on a CPU."""
        raise UserError(f"{cell_processes} cell processes train one cell each on the CPU with the local executor, "
                        f"not with --executor {self.name}, --group-size {group_size}, --workers-per-cell "
                        f"{workers_per_cell} on {device}")

    def check_workers(self, workers: int, device) -> None:
        """Refuses (UserError) a --workers-per-cell above 1 that this executor cannot give each cell."""

    def cell_threads(self, device, threads: int | None, *, workers_per_cell: int = 1, cell_processes: int = 1) -> int:
        """The CPU threads a cell (each worker of a data-parallel cell) trains with on `device`: `threads`
        (--threads-per-cell) where given, else this executor's default. CPU accuracies depend on it, so every
        backend trains with it wherever the cell runs, and each row records it (`threads`)."""
        raise NotImplementedError(f"executor {self.name!r} should implement cell_threads")

    def run_cells(self, trainer, pending: list, claims, *, group_size: int, workers_per_cell: int,
                  cell_processes: int, threads: int) -> None:
        """Trains the cells `pending` ([(Cell, key or None)]) through `claims` (executors.Claims: each claimed
        by this process, recorded or marked failed there), with `threads` CPU threads each, until none is left."""
        raise NotImplementedError(f"executor {self.name!r} should implement run_cells")

    def chunk_runner(self):
        """Who computes an extraction's chunks: None, this process; else an object with `device` (a
        torch.device), `threads`, `note` (a line to say before the chunks are computed, or None) and
        `results(run_dir, settings, chunks)`, which yields (chunk, ranks, node) as each chunk comes back
        (roarfast.stages.extract_tasks.task_settings says what `settings` holds)."""
        return None

    def __repr__(self) -> str:
        return f"<executor {self.name}>"
