"""The embedded demo run, `roarfast run`: the whole benchmark on the embedded dataset in one command —
the quick sweep (base model, ranks, ROAR and KAR over fractions and seeds, each cell beside its mask-only
control), then the report; prints the verdicts, the dataset's own checks (README, "The embedded dataset")
and where the report is. Every stage resumes: a rerun reuses the base model, the complete rank stores and the
finished cells.
"""

import time
from contextlib import contextmanager

import torch

from roarfast.data import load_dataset
from roarfast.common.device import resolve_device
from roarfast.planning.grid import preset_grid
from roarfast.modes import KAR, ROAR, control_mode
from roarfast.execution.ray_cluster import local_threads
from roarfast.report import write_report
from roarfast.rundir.directory import RunDir
from roarfast.stats import accuracy_over_seeds
from roarfast.stats.levels import margin_of
from roarfast.orchestration.sweep import run_sweep

#: the embedded dataset's checks: oracle ROAR near chance, random far above, oracle KAR near unmodified
CHANCE_MARGIN = 0.10
RANDOM_MARGIN = 0.40
#: the fraction at which random's ROAR accuracy is checked (half the pixels gone, the object mostly not)
RANDOM_CHECK_FRACTION = 0.5
#: the quick grid's fractions after the one covering the object
LATER_FRACTIONS = (0.25, RANDOM_CHECK_FRACTION)
#: the run's data and net, sized so that it takes minutes on 2 CPU cores in fp32 too (README, "Quickstart";
#: benchmarks/RESULTS.md, "The first run"): 1,500 training images, the test split as large as by default (the
#: verdicts' and the controls' tests count its images), and fastnet at half width, tuned for short trainings
RUN_DATA = {"num_train": 1500, "num_test": 1000}
RUN_MODEL = "fastnet-small"


def object_fraction(ds) -> float:
    """Smallest fraction of pixels that covers the object in every training image."""
    masks = ds.train.masks
    units = masks.shape[1] * masks.shape[2]
    return float(masks.flatten(1).sum(1).max()) / units


def run_demo(run_dir, *, device="auto", seed=0, progress=True, fractions=None, methods=None, seeds=None, epochs=None,
             dataset_options=None, echo=print, name: str | None = None, margin: float | None = None) -> dict:
    """The quick preset with RUN_MODEL on the embedded dataset of RUN_DATA (`dataset_options` override it key by
    key), then the report (its verdicts within `margin` points: None, roarfast.stats.MARGIN's); `name`: what the
    user calls the configuration (--name). Returns {"rows", "checks", "report"}."""
    started = time.perf_counter()
    device = resolve_device(device)
    ds = load_dataset("embedded", **{**RUN_DATA, **(dataset_options or {})})
    processes = cell_processes(device)
    echo(f"[run] embedded dataset: {len(ds.train)} train / {len(ds.test)} test images, {ds.num_classes} classes, "
         f"device {device}" + (f", cells in {processes} single-thread processes side by side" if processes > 1 else ""))
    covering = round(object_fraction(ds), 4)
    # the smallest fraction that removes (ROAR) or keeps (KAR) the whole object is where the checks bite
    fractions = tuple(fractions) if fractions else (covering, *LATER_FRACTIONS)
    grid = preset_grid("quick", methods=methods, fractions=fractions, seeds=seeds, epochs=epochs, first_seed=seed,
                       model=RUN_MODEL)
    with single_threaded(processes > 1):
        result = run_sweep(run_dir, grid, dataset_obj=ds, device=device, seed=seed, progress=progress, echo=echo,
                           cell_processes=processes, name=name,
                           reading=None if margin is None else {"margin": margin_of(margin)})
    meta = RunDir(run_dir).base_meta()
    report = write_report(run_dir, dataset=ds, margin=margin)  # the dataset held here: not generated again
    echo("")
    for line in report.verdict_lines():
        echo(line)
    checks = embedded_checks(result["rows"], meta["test_acc"], 1 / ds.num_classes, covering)
    echo("")
    for text, ok, acc in checks:
        echo(f"check: {text}: {'ok' if ok else 'FAILED'} ({acc:.1%})")
    echo(f"\n[run] done in {time.perf_counter() - started:.0f} s; report: {report.index_html}")
    return {"rows": result["rows"], "checks": checks, "report": report}


def cell_processes(device) -> int:
    """On a CPU, a single-thread process per core (torch's thread count) trains the cells side by side, and this
    process trains the base model and extracts in one thread (single_threaded): RUN_MODEL's steps are too small
    for two threads to share (its base model: 2.6 s in one thread, 3.7-23 s in two; benchmarks/RESULTS.md, "The
    first run"), and a core taken by another program stalls two threads of one training far more than it slows
    two processes."""
    return local_threads() if torch.device(device).type == "cpu" else 1


@contextmanager
def single_threaded(enabled: bool):
    """torch at one thread in this process for the duration (when `enabled`), its count restored after."""
    threads = torch.get_num_threads()
    if enabled:
        torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def embedded_checks(rows, unmodified: float, chance: float, covering: float) -> list[tuple]:
    """The embedded dataset's sanity checks on the mean accuracy over seeds: (text, passed, accuracy) each,
    for the cells the rows hold."""
    mean = {key: value[0] for key, value in accuracy_over_seeds(rows).items()}
    wanted = [
        (("oracle", ROAR, covering), f"oracle ROAR at {covering:g} within {CHANCE_MARGIN:.0%} of chance",
         lambda acc: abs(acc - chance) <= CHANCE_MARGIN),
        (("random", ROAR, RANDOM_CHECK_FRACTION),
         f"random ROAR at {RANDOM_CHECK_FRACTION:g} at least {RANDOM_MARGIN:.0%} above chance",
         lambda acc: acc - chance >= RANDOM_MARGIN),
        (("oracle", KAR, covering), f"oracle KAR at {covering:g} within {CHANCE_MARGIN:.0%} of unmodified",
         lambda acc: abs(acc - unmodified) <= CHANCE_MARGIN),
        (("oracle", control_mode(ROAR), covering),
         f"oracle mask-only control at {covering:g} within {CHANCE_MARGIN:.0%} of chance (no mask-shape leakage)",
         lambda acc: abs(acc - chance) <= CHANCE_MARGIN),
    ]
    return [(text, bool(test(mean[key])), mean[key]) for key, text, test in wanted if key in mean]
