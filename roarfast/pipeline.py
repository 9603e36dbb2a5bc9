"""`roarfast run`: the whole benchmark on the embedded dataset in one command — train the base model,
extract the estimators, retrain ROAR and KAR over fractions (and the oracle's mask-only control), print
which estimators beat random and whether the benchmark's own checks (DESIGN.md section 3) hold. Each
stage resumes: a rerun reuses the base model, the complete rank stores and the finished cells.
"""

import json
import time
from pathlib import Path

#: quick default set: the ground truth, the baselines, and the SmoothGrad family of gradients
DEFAULT_METHODS = "oracle,random,sobel,grad,sg-sq,var"
#: fractions besides the one that just covers the object
EXTRA_FRACTIONS = (0.5,)
#: the embedded dataset's checks: oracle ROAR near chance, random far above, oracle KAR near unmodified
CHANCE_MARGIN = 0.10
RANDOM_MARGIN = 0.40
#: a method "beats random" when its ROAR accuracy is lower by more than this: one seed per cell,
#: so smaller differences are within retraining noise
BEAT_MARGIN = 0.01


def object_fraction(ds) -> float:
    """Smallest fraction of pixels that covers the object in every training image."""
    masks = ds.train.masks
    units = masks.shape[1] * masks.shape[2]
    return float(masks.flatten(1).sum(1).max()) / units


def _base_model(run_dir, ds, device, seed, progress):
    """Reuses run_dir's base model when it was trained on this dataset, else trains one."""
    from roarfast.train import run_train

    meta_path = Path(run_dir) / "checkpoints" / "base" / "meta.json"
    if meta_path.exists():
        meta = json.loads(meta_path.read_text())
        if meta.get("dataset_fingerprint") == ds.fingerprint:
            print(f"[run] base model: reusing {meta_path.parent} (test {meta.get('test_acc', float('nan')):.1%})")
            return meta
    summary = run_train(run_dir, dataset_obj=ds, seed=seed, device=device, progress=progress)
    print(f"[run] base model: val {summary['val_acc']:.1%}, test {summary['test_acc']:.1%}")
    return json.loads(meta_path.read_text())


def run_all(run_dir, *, device="auto", seed=0, progress=True, fractions=None, methods=None):
    from roarfast.data import load_dataset
    from roarfast.device import resolve_device
    from roarfast.extract import ExtractOptions, run_extract
    from roarfast.retrain import RetrainOptions, format_table, run_retrain

    started = time.perf_counter()
    device = resolve_device(device)
    ds = load_dataset("embedded")
    print(f"[run] embedded dataset: {len(ds.train)} train / {len(ds.test)} test images, "
          f"{ds.num_classes} classes, device {device}")
    base = _base_model(run_dir, ds, device, seed, progress)
    methods = methods or DEFAULT_METHODS
    t0 = time.perf_counter()
    run_extract(run_dir, ExtractOptions(methods=methods), dataset_obj=ds, device=device, seed=seed, progress=progress)
    print(f"[run] extract: {time.perf_counter() - t0:.0f} s")
    covering = round(object_fraction(ds), 4)
    fractions = tuple(fractions) if fractions else (covering, *EXTRA_FRACTIONS)
    t0 = time.perf_counter()
    # ROAR over every fraction; KAR where it tells most: keeping just the object (or the first fraction)
    rows = run_retrain(run_dir, RetrainOptions(fractions=fractions, methods=methods, modes=("roar",)),
                       dataset_obj=ds, device=device, seed=seed, progress=progress)
    rows += run_retrain(run_dir, RetrainOptions(fractions=fractions[:1], methods=methods, modes=("kar",)),
                        dataset_obj=ds, device=device, seed=seed, progress=progress)
    if "oracle" in methods.split(","):
        # the dataset's promise of no mask-shape leakage: the oracle's removal pattern alone must not
        # tell the class (its ROAR cell is done above; keep only the control's row)
        control = run_retrain(run_dir, RetrainOptions(fractions=fractions[:1], methods="oracle", modes=("roar",),
                                                      mask_only=True),
                              dataset_obj=ds, device=device, seed=seed, progress=progress)
        rows += [row for row in control if row["mode"] == "roar-mask"]
    print(f"[run] retrain: {len(rows)} cells, {time.perf_counter() - t0:.0f} s")
    print()
    print(f"test accuracy after removing (roar) or keeping (kar) each fraction of pixels; "
          f"unmodified: {base['test_acc']:.1%}, chance: {1 / ds.num_classes:.1%}")
    print(format_table(rows))
    print()
    for line in verdict(rows, base["test_acc"], 1 / ds.num_classes, covering):
        print(line)
    print(f"\n[run] done in {time.perf_counter() - started:.0f} s; results in {Path(run_dir) / 'results.sqlite'}")


def verdict(rows, unmodified: float, chance: float, covering: float) -> list[str]:
    """Which estimators beat random under ROAR, and the embedded dataset's own sanity checks."""
    from roarfast.retrain import summarize

    summary = summarize(rows)
    lines = []
    fractions = sorted({f for (_, mode, f) in summary if mode == "roar"})
    for fraction in fractions:
        random_acc = summary.get(("random", "roar", fraction), (None,))[0]
        if random_acc is None:
            continue
        deltas = sorted((acc - random_acc, m) for (m, mode, f), (acc, _, _) in summary.items()
                        if mode == "roar" and f == fraction and m != "random")
        better = [f"{m} ({delta * 100:+.1f})" for delta, m in deltas if delta < -BEAT_MARGIN]
        lines.append(f"ROAR {fraction:g}: beat random ({random_acc:.1%}) by > {BEAT_MARGIN * 100:g} point: "
                     f"{', '.join(better) or 'none'}")
    checks = []
    oracle = summary.get(("oracle", "roar", covering))
    random_roar = summary.get(("random", "roar", 0.5))
    oracle_kar = summary.get(("oracle", "kar", covering))
    oracle_pattern = summary.get(("oracle", "roar-mask", covering))
    if oracle:
        checks.append((f"oracle ROAR at {covering:g} within {CHANCE_MARGIN:.0%} of chance",
                       abs(oracle[0] - chance) <= CHANCE_MARGIN, oracle[0]))
    if random_roar:
        checks.append((f"random ROAR at 0.5 at least {RANDOM_MARGIN:.0%} above chance",
                       random_roar[0] - chance >= RANDOM_MARGIN, random_roar[0]))
    if oracle_kar:
        checks.append((f"oracle KAR at {covering:g} within {CHANCE_MARGIN:.0%} of unmodified",
                       abs(oracle_kar[0] - unmodified) <= CHANCE_MARGIN, oracle_kar[0]))
    if oracle_pattern:
        checks.append((f"oracle mask-only control at {covering:g} within {CHANCE_MARGIN:.0%} of chance (no "
                       f"mask-shape leakage)", abs(oracle_pattern[0] - chance) <= CHANCE_MARGIN, oracle_pattern[0]))
    for text, ok, acc in checks:
        lines.append(f"check: {text}: {'ok' if ok else 'FAILED'} ({acc:.1%})")
    return lines
