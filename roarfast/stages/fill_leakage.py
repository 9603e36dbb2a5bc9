"""Fill leakage: how visible is the hole a fill leaves? A small per-pixel
network (the ROAD paper's imputation predictor) learns to find the removed pixels of filled train
images and is scored on filled test images. Its pixel accuracy against the base rate (always
guessing the majority, max(f, 1 - f)) says how much the fill gives the removal pattern away: one
fill-leakage measurement per method x fill x fraction in results.sqlite.

Not to be confused with mask leakage, which the mask-only control of a cell measures (roarfast.stages.cells):
how much the removal pattern alone tells about the class.
"""

import time
from dataclasses import dataclass

import torch

from roarfast.common.device import resolve_device
from roarfast.errors import UserError
from roarfast.fills import DEFAULT_FILL, FILLS, ROAD_FILL, removed_pixels, resolve_fill
from roarfast.methods import parse_methods
from roarfast.modes import DETECT
from roarfast.common.options import check_fractions, check_positive, check_subset
from roarfast.measurements.row import DETECTOR, FILL_LEAKAGE, MeasurementKey
from roarfast.records.rows import FillLeakageRecord
from roarfast.rundir.results import open_results
from roarfast.rundir.writing import open_for_writing

#: the detector: three 3x3 convolutions (a 7x7 view of each pixel), this many channels wide
DETECTOR_WIDTH = 16
DETECTOR_STEPS = 300  # Adam steps; enough for the 3-layer detector to find a constant hole
DETECTOR_BATCH = 64
DETECTOR_LR = 3e-3


@dataclass(frozen=True)
class FillLeakageOptions:
    """The detector per fill in `fills` and fraction in `fractions`, on the removal patterns of `method`'s
    stored ranks, over the first `max_images` train and test images. Each value is checked here, once."""

    fills: tuple = (DEFAULT_FILL, ROAD_FILL)
    fractions: tuple = (0.3, 0.5, 0.7)
    method: str = "random"
    max_images: int = 5000

    def __post_init__(self):
        object.__setattr__(self, "fills", check_subset("--fill", self.fills, FILLS.names))
        object.__setattr__(self, "fractions", check_fractions(self.fractions))
        check_positive("--max-images", self.max_images)


def detector(channels: int) -> torch.nn.Module:
    """Per-pixel removed/kept logits (Tensor[B, 1, H, W]) of images (Tensor[B, C, H, W])."""
    width = DETECTOR_WIDTH
    return torch.nn.Sequential(
        torch.nn.Conv2d(channels, width, 3, padding=1), torch.nn.ReLU(),
        torch.nn.Conv2d(width, width, 3, padding=1), torch.nn.ReLU(),
        torch.nn.Conv2d(width, 1, 3, padding=1))


def filled(images: torch.Tensor, ranks: torch.Tensor, fraction: float, fill, mean, std, ids: torch.Tensor):
    """(normalized float32 images with the ROAR fraction of pixel ranks replaced by `fill` (a Fill or its
    name), bool removed [B, H, W]); ids: each image's index in its split."""
    removed = removed_pixels(ranks, fraction, keep=False)
    return resolve_fill(fill).apply(images, ranks, fraction, False, mean=mean, std=std, ids=ids), removed


def detector_accuracy(train_x, train_removed, test_x, test_removed, *, seed: int = 0,
                      steps: int = DETECTOR_STEPS) -> float:
    """Pixel accuracy on the test images of a detector trained on the train images (BCE, Adam)."""
    generator = torch.Generator(device=train_x.device).manual_seed(seed)
    torch.manual_seed(seed)
    model = detector(train_x.shape[1]).to(train_x.device)
    optimizer = torch.optim.Adam(model.parameters(), lr=DETECTOR_LR)
    target = train_removed.float().unsqueeze(1)
    for _ in range(steps):
        rows = torch.randint(0, train_x.shape[0], (DETECTOR_BATCH,), generator=generator, device=train_x.device)
        loss = torch.nn.functional.binary_cross_entropy_with_logits(model(train_x[rows]), target[rows])
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    model.eval()
    with torch.no_grad():
        correct = sum(int(((model(test_x[i:i + 256])[:, 0] > 0) == test_removed[i:i + 256]).sum())
                      for i in range(0, test_x.shape[0], 256))
    return correct / test_removed.numel()


def measure(train, test, fills, fractions, mean, std, *, seed: int = 0, steps: int = DETECTOR_STEPS) -> list:
    """Rows {fill, fraction, accuracy, base_rate, seconds} for (images uint8, ranks) pairs `train` and `test`."""
    rows = []
    for fraction in fractions:
        for fill in fills:
            started = time.perf_counter()
            sets = []
            for images, ranks in (train, test):
                ids = torch.arange(images.shape[0], device=images.device)
                sets.extend(filled(images, ranks, fraction, fill, mean, std, ids))
            removed_share = float(sets[3].float().mean())
            rows.append({"fill": fill, "fraction": fraction,
                         "accuracy": detector_accuracy(*sets, seed=seed, steps=steps),
                         "base_rate": max(removed_share, 1.0 - removed_share),
                         "seconds": time.perf_counter() - started})
    return rows


def run_fill_leakage(run_dir, options: FillLeakageOptions, *, dataset=None, data_dir=None, dataset_options=None,
                     device="auto", seed: int = 0, dataset_obj=None) -> list:
    """Measures the detector for every fill and fraction of `options` (again, when measured before) and
    records each in results.sqlite; returns their rows."""
    try:
        (method,) = parse_methods(options.method)  # its stored name: sg-sq is stored as sg-sq-grad
    except ValueError as err:
        raise UserError(f"--method names one estimator: {err}") from None
    run = open_for_writing(run_dir)
    device = resolve_device(device)
    ds = dataset_obj if dataset_obj is not None else run.open_dataset(dataset, data_dir, dataset_options)
    if ds.streamed:
        raise UserError("leakage needs a dataset held in memory (not a streamed JPEG tree)")
    store = run.rank_store
    missing = [s for s in ("train", "test") if method not in store.methods(s)]
    if missing:
        raise UserError(f"no complete {' and '.join(missing)} ranks of {method!r} in {run.root}: run "
                        f"`roarfast extract --method {method} --run-dir {run.root}` first")
    run.check_writable()
    pairs, params = [], {}
    for split in ("train", "test"):
        record = run.read_ranks(method, split, ds.fingerprint)
        params[split] = record.manifest.get("params")
        pairs.append((ds.split(split).images[:options.max_images].to(device),
                      record.tensor()[:options.max_images].to(device)))
    made = FillLeakageRecord(ds.fingerprint, params, options.max_images,
                             {"width": DETECTOR_WIDTH, "steps": DETECTOR_STEPS, "batch": DETECTOR_BATCH,
                              "lr": DETECTOR_LR})
    rows = []
    with open_results(run) as db:
        for row in measure(*pairs, options.fills, options.fractions, ds.mean, ds.std, seed=seed):
            key = MeasurementKey.of(kind=FILL_LEAKAGE, dataset=ds.name, model=DETECTOR, method=method, mode=DETECT,
                                    fill=row["fill"], fraction=row["fraction"], seed=seed, config=made)
            db.record(key, {"test_acc": row["accuracy"], "val_acc": None, "epochs": None, "seconds": row["seconds"],
                            "threads": torch.get_num_threads(), "base_rate": row["base_rate"]})
            rows.append(db.get(key))
    return rows
