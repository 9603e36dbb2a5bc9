"""The no-retrain evaluation: the base model on test images whose most- (MoRF)
or least-relevant-first (LeRF) fraction of pixels is replaced (Samek et al. 2017); `road` is both with
ROAD's imputation fill (Rong et al. 2022) instead of the dataset mean. One no-retrain measurement per
method x mode x fraction in results.sqlite (no seed, no epochs, no validation accuracy): test accuracy,
and the mean probability of the class the model predicted on the unmodified image in its extras. Random is
evaluated beside the methods asked for (an estimator's MoRF or LeRF curve is read against random's); its test
ranks are extracted first where they are missing (no model, seconds).
"""

import logging
import math
import time
from dataclasses import dataclass

import torch

from roarfast import ops
from roarfast.data.loader import split_loader
from roarfast.common.device import default_batch_size, resolve_device
from roarfast.errors import UserError
from roarfast.fills import resolve_fill
from roarfast.modes import NO_RETRAIN_METRICS
from roarfast.common.options import check_fractions, check_positive, check_subset, parse_list
from roarfast.measurements.row import NO_RETRAIN, MeasurementKey
from roarfast.records.rows import NoRetrainRecord
from roarfast.rundir.results import open_results
from roarfast.rundir.writing import open_for_writing
from roarfast.methods.selection import Selection
from roarfast.stages.cells import cell_estimators
from roarfast.stages.extract import ExtractOptions, run_extract

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class NoRetrainOptions:
    """`metrics` (morf, lerf, road) at `fractions` for `methods` (comma-separated; default every method
    with test ranks; random is added, the baseline), `batch_size` images a pass (default: by
    device). Each value is checked here, once."""

    metrics: tuple = tuple(NO_RETRAIN_METRICS)
    fractions: tuple = (0.1, 0.3, 0.5, 0.7, 0.9)
    methods: str | None = None
    batch_size: int | None = None

    def __post_init__(self):
        object.__setattr__(self, "metrics", check_subset("--metric", self.metrics, tuple(NO_RETRAIN_METRICS)))
        object.__setattr__(self, "fractions", check_fractions(self.fractions))
        check_positive("--batch-size", self.batch_size, optional=True)


#: the baseline every no-retrain evaluation carries
RANDOM = "random"


def missing_ranks(root, missing: list) -> str:
    """The one line of an evaluation whose test ranks are missing, with the extract command that makes exactly
    them (random's among them: the baseline); with no ranks at all, the estimators must be named."""
    if not missing:
        return (f"no complete test ranks in {root}: run `roarfast extract --run-dir {root} --method "
                f"ESTIMATORS,{RANDOM} --split test` first, naming the estimators to evaluate ({RANDOM} is the "
                f"baseline MoRF and LeRF are read against)")
    baseline = f" ({RANDOM} is the baseline MoRF and LeRF are read against)" if RANDOM in missing else ""
    return (f"no complete test ranks in {root} for {', '.join(missing)}{baseline}: run `roarfast extract --run-dir "
            f"{root} --method {','.join(missing)} --split test` first")


def run_noretrain(run_dir, options: NoRetrainOptions, *, dataset=None, data_dir=None, dataset_options=None,
                  device="auto", progress=True, dataset_obj=None, seed=0) -> list:
    """Measures every (method, metric mode, fraction) not yet in results.sqlite; returns their rows. Random's test
    ranks, the baseline, are made here (of `seed`) when the estimators are named without them.
    Every argument is checked before anything is written."""
    run = open_for_writing(run_dir)
    run.check_base_model()
    device = resolve_device(device)
    ds = dataset_obj if dataset_obj is not None else run.open_dataset(dataset, data_dir, dataset_options)
    store = run.rank_store
    stored = store.methods("test")
    methods = list(parse_list(options.methods)) if options.methods else sorted(stored)
    if methods and RANDOM not in methods:  # MoRF/LeRF of an estimator mean something only beside random's
        if RANDOM not in stored:  # model-free, seconds: made here rather than leaving the estimators unanchored
            log.warning("note: %s's test ranks (the baseline MoRF and LeRF are read against) are extracted first",
                        RANDOM)
            extract = ExtractOptions(splits=("test",))
            run_extract(run.root, extract, dataset_obj=ds, device=device, seed=seed, progress=progress,
                        selection=Selection.of(cell_estimators(RANDOM), extract, seed))
            store = run.rank_store  # HEAD's ranks now name random's
            stored = store.methods("test")
        methods.append(RANDOM)
    missing = [m for m in methods if m not in stored]
    if not methods or missing:
        raise UserError(missing_ranks(run.root, missing))
    model, meta = run.load_base_model(ds, device)
    ckpt_sha = run.base_checkpoint_sha256()
    run.check_writable()
    batch_size = options.batch_size or default_batch_size(device, ds.image_size)
    index = torch.arange(len(ds.split("test")))
    predicted = _predictions(model, ds, device, index, batch_size)

    rows = []
    with open_results(run) as db:
        for method in methods:
            record = run.read_ranks(method, "test", ds.fingerprint)
            ranks = record if ds.streamed else record.tensor()
            units = math.prod(record.manifest["shape"][1:])
            for metric in options.metrics:
                for mode, least_first, fill in NO_RETRAIN_METRICS[metric]:
                    for fraction in options.fractions:
                        made = NoRetrainRecord(ckpt_sha, ds.fingerprint, record.manifest.get("params"), fill)
                        key = MeasurementKey.of(kind=NO_RETRAIN, dataset=ds.name, model=meta["model"], method=method,
                                                mode=mode, fill=fill, fraction=fraction, seed=None, config=made)
                        if not db.is_done(key):
                            started = time.perf_counter()
                            accuracy, probability = _score(model, ds, device, index, predicted, batch_size, ranks,
                                                           units, fraction, least_first,
                                                           resolve_fill(fill))
                            db.record(key, {"test_acc": accuracy, "val_acc": None, "epochs": None,
                                            "seconds": time.perf_counter() - started,
                                            "threads": torch.get_num_threads(), "mean_probability": probability})
                        rows.append(db.get(key))
    return rows


def _batches(model, loader, index, batch_size):
    """(softmax probabilities, labels, sample indices) of each batch, eval mode, no gradients."""
    model.eval()
    with torch.no_grad():
        for x, y, rows in loader.batches(index, batch_size, with_index=True):
            yield torch.softmax(model(x).float(), dim=1), y, rows


def _predictions(model, ds, device, index, batch_size):
    """int64 Tensor[N] on the device: the class the model predicts on each unmodified test image."""
    predicted = torch.empty(index.shape[0], dtype=torch.int64, device=device)
    for p, _, rows in _batches(model, split_loader(ds, "test", device), index, batch_size):
        predicted[rows] = p.argmax(1)
    return predicted


def _score(model, ds, device, index, predicted, batch_size, ranks, units, fraction, least_first, fill):
    """(accuracy, mean probability of the originally predicted class) with k = floor(fraction x units) of
    each test image's `units` ranked units replaced: the k most relevant, or the k least relevant (keeping
    the top units - k)."""
    # the loaders floor a fraction into a count: (units - k) / units floors back to exactly units - k kept,
    # where 1 - fraction would keep floor((1 - fraction) x units) and so replace one unit more than MoRF
    kept = (units - ops.units_for_fraction(fraction, units)) / units
    loader = split_loader(ds, "test", device, ranks=ranks, fraction=kept if least_first else fraction,
                          keep=least_first, fill=fill)
    correct = torch.zeros((), dtype=torch.int64, device=device)
    probability = torch.zeros((), dtype=torch.float64, device=device)
    for p, y, rows in _batches(model, loader, index, batch_size):
        correct += (p.argmax(1) == y).sum()
        probability += p.gather(1, predicted[rows].view(-1, 1)).double().sum()
    n = max(1, index.shape[0])
    return float(correct) / n, float(probability) / n
