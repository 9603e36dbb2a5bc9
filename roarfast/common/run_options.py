"""The options every stage runs with, grouped once for the command line and roarfast.Study alike: where the work
is kept and how it runs (`RunOptions`: --run-dir, --device, --seed, --progress), and how retraining cells are laid
out on the devices (`CellLayout`: --group-size, --workers-per-cell, --threads-per-cell). Each field declares its flag
(roarfast.common.options.flag), from which the CLI builds its options; the checks run whoever builds them.

Light on purpose (no torch): every --help builds its options from here.
"""

from dataclasses import dataclass
from pathlib import Path

from roarfast.common.options import MAX_SEED, check_positive, check_seed, flag

DEFAULT_RUN_DIR = "runs/default"


@dataclass(frozen=True)
class RunOptions:
    """The run directory (a Path), the device ("auto", "cpu", "cuda", "cuda:N": resolved by the stage that uses
    it), the seed of the run and whether to show progress bars."""

    run_dir: Path = flag("--run-dir", default=Path(DEFAULT_RUN_DIR), kind=Path, directory=True, show_default=True,
                         help="where checkpoints, the rank store and results live")
    device: str = flag("--device", default="auto", show_default=True, help="auto | cpu | cuda | cuda:N")
    seed: int = flag("--seed", default=0, kind=int, low=0, high=MAX_SEED, show_default=True, help="seed of the run")
    progress: bool = flag("--progress/--no-progress", default=True, show_default=True, help="progress bars")

    def __post_init__(self):
        object.__setattr__(self, "run_dir", Path(self.run_dir))
        check_seed("--seed", self.seed)

    def stage_arguments(self) -> dict:
        """The keyword arguments every stage takes from these: device, seed, progress."""
        return {"device": self.device, "seed": self.seed, "progress": self.progress}


@dataclass(frozen=True)
class CellLayout:
    """How retraining cells train, not what: `group_size` cells together by one loop (None: the device's
    default), or each over `workers_per_cell` processes (data-parallel), recorded beside a cell's row, which
    means the same either way; and with `threads_per_cell` CPU threads each, which its row records (a CPU's
    accuracies depend on it)."""

    group_size: int | None = flag(
        "--group-size", kind=int, low=1,
        help="cells trained together by one loop, each with its own seed, masks and row (default: the device's, "
             "from benchmarks/RESULTS.md: 1 on CPU and GPU)")
    workers_per_cell: int = flag(
        "--workers-per-cell", default=1, kind=int, low=1, show_default=True,
        help="processes that train each cell data-parallel (one per GPU; gloo on CPUs), on one machine or Ray node: "
             "for a model larger than one device; the cell's batch is split between them, its row means the same")
    # CPU accuracies depend on it: each row records it (None: the executor's default, Executor.cell_threads)
    threads_per_cell: int | None = flag(
        "--threads-per-cell", kind=int, low=1,
        help="CPU threads each cell (each worker of one) trains with, on any node; its row records it  [default: this "
             "process's threads (torch's count: one per core, or OMP_NUM_THREADS), shared by a cell's workers; 1 in "
             "`roarfast run`'s cell processes; Ray: --cpus-per-cell where given]")

    def __post_init__(self):
        check_positive("--group-size", self.group_size, optional=True)
        check_positive("--workers-per-cell", self.workers_per_cell)
        check_positive("--threads-per-cell", self.threads_per_cell, optional=True)
