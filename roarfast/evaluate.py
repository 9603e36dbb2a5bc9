"""The no-retrain evaluations (DESIGN.md section 11): the base model on test images whose most-
(MoRF) or least-relevant-first (LeRF) fraction of pixels is replaced (Samek et al. 2017); `road` is
both with ROAD's imputation fill (Rong et al. 2022) instead of the dataset mean. One row per method
x mode x fraction in results.sqlite (seed 0, no epochs, no validation accuracy): test accuracy, and
the mean probability of the class the model predicted on the unmodified image in the row's extras.
`rank_agreement` gives the Kendall tau between the estimator rankings of ROAR, KAR, MoRF, LeRF, ROAD.
"""

import math
import time
from dataclasses import dataclass
from pathlib import Path

from roarfast.errors import UserError

METRICS = ("morf", "lerf", "road")
DEFAULT_FRACTIONS = (0.1, 0.3, 0.5, 0.7, 0.9)
#: the results-database modes a metric writes: (mode, least relevant first?, fill)
METRIC_MODES = {
    "morf": (("morf", False, "dataset-mean"),),
    "lerf": (("lerf", True, "dataset-mean"),),
    "road": (("road-morf", False, "road"), ("road-lerf", True, "road")),
}
#: the benchmarks rank_agreement compares, each scoring an estimator from its rows (higher = better)
BENCHMARKS = ("roar", "kar", "morf", "lerf", "road")


@dataclass(frozen=True)
class EvaluateOptions:
    metrics: tuple = METRICS
    fractions: tuple = DEFAULT_FRACTIONS
    methods: str | None = None  # comma-separated; default every method with test ranks
    batch_size: int | None = None


def parse_metrics(text: str) -> tuple:
    """'morf,road' -> ('morf', 'road'); an unknown name is a UserError naming the known ones."""
    metrics = tuple(m.strip() for m in str(text).split(",") if m.strip())
    unknown = [m for m in metrics if m not in METRICS]
    if unknown or not metrics:
        raise UserError(f"--metric should be a comma-separated subset of {','.join(METRICS)}, got {text!r}")
    return metrics


def check_fractions(fractions) -> tuple:
    """Fractions as floats in (0, 1]; anything else is a UserError."""
    for f in fractions:
        if isinstance(f, bool) or not isinstance(f, (int, float)) or not 0.0 < f <= 1.0:
            raise UserError(f"--fraction should be numbers in (0, 1], got {f!r}")
    return tuple(float(f) for f in fractions)


def run_evaluate(run_dir, options: EvaluateOptions, *, dataset=None, data_dir=None, dataset_options=None,
                 device="auto", progress=True, dataset_obj=None) -> list:
    """Evaluates every (method, metric mode, fraction) not yet in results.sqlite; returns their rows.
    Every argument is checked before anything is written."""
    import torch

    from roarfast.checkpoint import checkpoint_sha256, load_checkpoint
    from roarfast.device import resolve_device
    from roarfast.extract import default_batch_size
    from roarfast.results import ResultsDB, cell_key
    from roarfast.retrain import fill_values
    from roarfast.rundir import open_dataset
    from roarfast.store import RankStore

    metrics = parse_metrics(",".join(options.metrics))
    fractions = check_fractions(options.fractions)
    run_dir = Path(run_dir)
    ckpt_dir = run_dir / "checkpoints" / "base"
    if not (ckpt_dir / "meta.json").exists():
        raise UserError(f"no base model in {ckpt_dir}: run `roarfast train --run-dir {run_dir}` first")
    device = resolve_device(device)
    ds = dataset_obj if dataset_obj is not None else open_dataset(run_dir, dataset, data_dir, dataset_options)
    store = RankStore(run_dir)
    stored = store.methods("test")
    methods = [m.strip() for m in options.methods.split(",") if m.strip()] if options.methods else sorted(stored)
    missing = [m for m in methods if m not in stored]
    if not methods or missing:
        raise UserError(f"no complete test ranks in {run_dir} for {', '.join(missing) or 'any method'}: run "
                        f"`roarfast extract --run-dir {run_dir}` first")
    model, meta = load_checkpoint(ckpt_dir, device=device)
    if meta.get("dataset_fingerprint") != ds.fingerprint:
        raise UserError(f"the base model in {ckpt_dir} was trained on dataset {meta.get('dataset_fingerprint')} "
                        f"but this dataset is {ds.fingerprint}; pick the matching --dataset")
    ckpt_sha = checkpoint_sha256(ckpt_dir)
    batch_size = options.batch_size or default_batch_size(device, ds.image_size)
    index = torch.arange(len(ds.split("test")))
    predicted = _predictions(model, ds, device, index, batch_size)

    db = ResultsDB(run_dir / "results.sqlite")
    rows = []
    for method in methods:
        record = store.read(method, "test", dataset_fingerprint=ds.fingerprint)
        ranks = record if ds.streamed else record.tensor()
        for metric in metrics:
            for mode, least_first, fill in METRIC_MODES[metric]:
                for fraction in fractions:
                    config = {"base": ckpt_sha, "dataset": ds.fingerprint, "ranks": record.manifest.get("params"),
                              "fill": fill}
                    cell = cell_key(dataset=ds.name, model=meta["model"], method=method, mode=mode,
                                    fraction=fraction, seed=0, config=config)
                    if not db.is_done(cell):
                        started = time.perf_counter()
                        accuracy, probability = _score(model, ds, device, index, predicted, batch_size, ranks,
                                                       fraction, least_first, fill_values(fill, ds.mean, ds.std))
                        db.record(cell, {"test_acc": accuracy, "val_acc": None, "epochs": 0,
                                         "seconds": time.perf_counter() - started,
                                         "mean_probability": probability})
                    rows.append(db.get(cell))
    db.close()
    return rows


def _batches(model, loader, index, batch_size):
    """(softmax probabilities, labels, sample indices) of each batch, eval mode, no gradients."""
    import torch

    model.eval()
    with torch.no_grad():
        for x, y, rows in loader.batches(index, batch_size, with_index=True):
            yield torch.softmax(model(x).float(), dim=1), y, rows


def _predictions(model, ds, device, index, batch_size):
    """int64 Tensor[N] on the device: the class the model predicts on each unmodified test image."""
    import torch

    from roarfast.data.loader import split_loader

    predicted = torch.empty(index.shape[0], dtype=torch.int64, device=device)
    for p, _, rows in _batches(model, split_loader(ds, "test", device), index, batch_size):
        predicted[rows] = p.argmax(1)
    return predicted


def _score(model, ds, device, index, predicted, batch_size, ranks, fraction, least_first, fill):
    """(accuracy, mean probability of the originally predicted class) with `fraction` of each test
    image's pixels replaced: the most relevant, or the least relevant (keeping the top 1 - fraction)."""
    import torch

    from roarfast.data.loader import split_loader

    kept = max(0.0, 1.0 - fraction)
    loader = split_loader(ds, "test", device, ranks=ranks, fraction=kept if least_first else fraction,
                          keep=least_first, fill=fill)
    correct = torch.zeros((), dtype=torch.int64, device=device)
    probability = torch.zeros((), dtype=torch.float64, device=device)
    for p, y, rows in _batches(model, loader, index, batch_size):
        correct += (p.argmax(1) == y).sum()
        probability += p.gather(1, predicted[rows].view(-1, 1)).double().sum()
    n = max(1, index.shape[0])
    return float(correct) / n, float(probability) / n


def estimator_scores(rows) -> dict:
    """{benchmark: {method: score}} from results rows, higher = better estimator: ROAR and MoRF the
    accuracy lost (minus the mean accuracy over fractions and seeds), KAR and LeRF the accuracy kept,
    ROAD its LeRF mean minus its MoRF mean. A benchmark or method without rows is absent. Rows of
    several configurations of a mode (fills, models) are averaged together: filter them first."""
    means = {}
    for row in rows:
        if row.get("status", "done") == "done" and row.get("test_acc") is not None:
            means.setdefault((row["mode"], row["method"]), []).append(row["test_acc"])
    mean = {key: sum(v) / len(v) for key, v in means.items()}
    signs = {"roar": ("roar", -1), "kar": ("kar", 1), "morf": ("morf", -1), "lerf": ("lerf", 1)}
    scores = {}
    for benchmark, (mode, sign) in signs.items():
        found = {method: sign * acc for (m, method), acc in mean.items() if m == mode}
        if found:
            scores[benchmark] = found
    road = {method: acc - mean[("road-morf", method)] for (m, method), acc in mean.items()
            if m == "road-lerf" and ("road-morf", method) in mean}
    if road:
        scores["road"] = road
    return scores


def kendall_tau(a: dict, b: dict) -> float:
    """Kendall's tau-b between two scorings of the same items (dicts item -> score); NaN below 2 items
    or when either scoring is all ties."""
    items = sorted(set(a) & set(b))
    concordant = discordant = ties_a = ties_b = 0
    for i, x in enumerate(items):
        for y in items[i + 1:]:
            da, db = a[x] - a[y], b[x] - b[y]
            if da == 0 and db == 0:
                continue
            if da == 0:
                ties_a += 1
            elif db == 0:
                ties_b += 1
            elif (da > 0) == (db > 0):
                concordant += 1
            else:
                discordant += 1
    denominator = math.sqrt((concordant + discordant + ties_a) * (concordant + discordant + ties_b))
    return (concordant - discordant) / denominator if denominator else math.nan


def rank_agreement(rows) -> dict:
    """{(benchmark a, benchmark b): Kendall tau} between the estimator rankings of every pair of the
    BENCHMARKS present in the rows (ROAR, KAR, MoRF, LeRF, ROAD), over the methods both scored."""
    scores = estimator_scores(rows)
    present = [b for b in BENCHMARKS if b in scores]
    return {(a, b): kendall_tau(scores[a], scores[b]) for i, a in enumerate(present) for b in present[i + 1:]}


def format_table(rows) -> str:
    """One line per row: method, mode, fraction, accuracy and mean probability of the predicted class."""
    lines = [f"{'method':16s} {'mode':10s} {'fraction':>8s} {'test_acc':>8s} {'p(pred)':>8s}"]
    for r in sorted(rows, key=lambda r: (r["method"], r["mode"], r["fraction"])):
        lines.append(f"{r['method']:16s} {r['mode']:10s} {r['fraction']:8.2f} {r['test_acc']:8.3f} "
                     f"{(r.get('extra') or {}).get('mean_probability', math.nan):8.3f}")
    return "\n".join(lines)
