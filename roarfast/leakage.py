"""Fill leakage (DESIGN.md section 11): how visible is the hole a fill leaves? A small per-pixel
network (the ROAD paper's imputation predictor) learns to find the removed pixels of filled train
images and is scored on filled test images. Its pixel accuracy against the base rate (always
guessing the majority, max(f, 1 - f)) says how much the fill gives the removal pattern away.
"""

import json
from pathlib import Path

import torch

from roarfast.atomic import write_json
from roarfast.errors import UserError

FILLS = ("dataset-mean", "imagenet-mean", "zero", "road")
#: the detector: three 3x3 convolutions (a 7x7 view of each pixel), this many channels wide
DETECTOR_WIDTH = 16
DETECTOR_STEPS = 300  # Adam steps; enough for the 3-layer detector to find a constant hole
DETECTOR_BATCH = 64
DETECTOR_LR = 3e-3


def parse_fills(text: str) -> tuple:
    """'dataset-mean,road' -> ('dataset-mean', 'road'); an unknown name is a UserError."""
    fills = tuple(f.strip() for f in str(text).split(",") if f.strip())
    if not fills or any(f not in FILLS for f in fills):
        raise UserError(f"--fill should be a comma-separated subset of {','.join(FILLS)}, got {text!r}")
    return fills


def detector(channels: int) -> torch.nn.Module:
    """Per-pixel removed/kept logits (Tensor[B, 1, H, W]) of images (Tensor[B, C, H, W])."""
    width = DETECTOR_WIDTH
    return torch.nn.Sequential(
        torch.nn.Conv2d(channels, width, 3, padding=1), torch.nn.ReLU(),
        torch.nn.Conv2d(width, width, 3, padding=1), torch.nn.ReLU(),
        torch.nn.Conv2d(width, 1, 3, padding=1))


def filled(images: torch.Tensor, ranks: torch.Tensor, fraction: float, fill: str, mean, std, ids: torch.Tensor):
    """(normalized float32 images with the ROAR fraction replaced by `fill`, bool removed [B, H, W])."""
    from roarfast import ops
    from roarfast.fill import ROAD_FILL, removed_pixels, road_normalize
    from roarfast.retrain import fill_values

    mean_t = torch.tensor(mean, dtype=torch.float32, device=images.device)
    std_t = torch.tensor(std, dtype=torch.float32, device=images.device)
    removed = removed_pixels(ranks, fraction, keep=False)
    if fill == ROAD_FILL:
        return road_normalize(images, ranks, fraction, False, mean=mean_t, std=std_t, ids=ids), removed
    x = ops.mask_normalize(images, ranks, fraction, fill_values(fill, mean, std), False, mean=mean_t, std=std_t)
    return x, removed


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
    """Rows {fill, fraction, accuracy, base_rate} for (images uint8, ranks) pairs `train` and `test`."""
    rows = []
    for fraction in fractions:
        for fill in fills:
            sets = []
            for images, ranks in (train, test):
                ids = torch.arange(images.shape[0], device=images.device)
                sets.extend(filled(images, ranks, fraction, fill, mean, std, ids))
            removed_share = float(sets[3].float().mean())
            rows.append({"fill": fill, "fraction": fraction,
                         "accuracy": detector_accuracy(*sets, seed=seed, steps=steps),
                         "base_rate": max(removed_share, 1.0 - removed_share)})
    return rows


def run_leakage(run_dir, fills, fractions, *, method: str = "random", dataset=None, data_dir=None,
                dataset_options=None, device="auto", seed: int = 0, max_images: int = 5000) -> list:
    """The detector per fill and fraction on `method`'s removal patterns (its stored ranks) of the
    first `max_images` train and test images; writes <run_dir>/leakage.json and returns its rows."""
    from roarfast.device import resolve_device
    from roarfast.methods import parse_methods
    from roarfast.rundir import open_dataset
    from roarfast.store import RankStore

    fills = parse_fills(",".join(fills))
    try:
        (method,) = parse_methods(method)  # its stored name: sg-sq is stored as sg-sq-grad
    except ValueError as err:
        raise UserError(f"--method names one estimator: {err}") from None
    if not fractions or any(isinstance(f, bool) or not 0.0 < f <= 1.0 for f in fractions):
        raise UserError(f"--fraction should be numbers in (0, 1], got {fractions!r}")
    run_dir = Path(run_dir)
    device = resolve_device(device)
    ds = open_dataset(run_dir, dataset, data_dir, dataset_options)
    if ds.streamed:
        raise UserError("leakage needs a dataset held in memory (not a streamed JPEG tree)")
    store = RankStore(run_dir)
    missing = [s for s in ("train", "test") if method not in store.methods(s)]
    if missing:
        raise UserError(f"no complete {' and '.join(missing)} ranks of {method!r} in {run_dir}: run "
                        f"`roarfast extract --method {method} --run-dir {run_dir}` first")
    pairs = []
    for split in ("train", "test"):
        ranks = store.read(method, split, dataset_fingerprint=ds.fingerprint).tensor()[:max_images]
        pairs.append((ds.split(split).images[:max_images].to(device), ranks.to(device)))
    rows = [{"method": method, **row} for row in measure(*pairs, fills, fractions, ds.mean, ds.std, seed=seed)]
    # leakage.json keeps what earlier runs measured for other methods, fills and fractions
    path = run_dir / "leakage.json"
    fresh = {(r["method"], r["fill"], r["fraction"]) for r in rows}
    kept = [r for r in (json.loads(path.read_text()) if path.exists() else [])
            if (r["method"], r["fill"], r["fraction"]) not in fresh]
    write_json(path, kept + rows)
    return rows


def format_table(rows) -> str:
    lines = [f"{'method':12s} {'fill':14s} {'fraction':>8s} {'detector':>8s} {'base':>6s}"]
    for r in rows:
        lines.append(f"{r['method']:12s} {r['fill']:14s} {r['fraction']:8.2f} {r['accuracy']:8.3f} "
                     f"{r['base_rate']:6.3f}")
    return "\n".join(lines)
