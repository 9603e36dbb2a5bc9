"""The retrain stage: for every cell (method x mode x fraction x seed) retrain a classifier from
scratch on masked train images and evaluate it on masked test images; one row per cell in
runs/<name>/results.sqlite. Finished cells are skipped on a rerun.
"""

import statistics
import time
from dataclasses import dataclass
from pathlib import Path

from roarfast.errors import UserError

#: per-channel ImageNet mean in [0,1] pixel space, for --fill imagenet-mean
IMAGENET_MEAN = (0.485, 0.456, 0.406)


@dataclass(frozen=True)
class RetrainOptions:
    fractions: tuple = (0.7,)
    methods: str | None = None
    modes: tuple = ("roar",)
    seeds: int = 1
    model: str | None = None
    epochs: int | None = None
    fill: str = "dataset-mean"
    amp: str = "auto"
    mask_only: bool = False  # also the mask-only control of every cell (mode "<mode>-mask")


def fill_values(fill: str, mean, std) -> tuple:
    """The replacement value per channel in the normalized space the model sees."""
    if fill == "dataset-mean":
        return tuple(0.0 for _ in mean)
    if fill == "zero":
        return tuple(-m / s for m, s in zip(mean, std))
    if fill == "imagenet-mean":
        if len(mean) != 3:
            raise UserError(f"--fill imagenet-mean needs 3-channel images, the dataset has {len(mean)}")
        return tuple((im - m) / s for im, m, s in zip(IMAGENET_MEAN, mean, std))
    raise UserError(f"--fill should be dataset-mean, imagenet-mean or zero, got {fill!r}")


def _methods_to_run(store, options, ds):
    """Requested methods, or every complete method of both splits; random is always included."""
    if options.methods:
        from roarfast.methods import parse_methods

        try:
            methods = parse_methods(options.methods)
        except ValueError as err:
            raise UserError(str(err)) from None
    else:
        methods = sorted(set(store.methods("train")) & set(store.methods("test")))
    if "random" not in methods:
        methods = ["random", *methods]
    return methods


def run_retrain(run_dir, options: RetrainOptions, *, dataset=None, data_dir=None, dataset_options=None, device="auto",
                seed=0, progress=True, dataset_obj=None):
    """Runs every cell not yet in results.sqlite; returns all rows of the requested cells."""
    import json

    from roarfast.device import resolve_device
    from roarfast.extract import ExtractOptions, model_free, run_extract
    from roarfast.memory import keep_freed_memory
    from roarfast.results import ResultsDB, cell_key
    from roarfast.rundir import open_dataset
    from roarfast.store import RankStore
    from roarfast.train import Masking, default_recipe, mask_mode, resolve_amp, train_classifier

    keep_freed_memory()
    run_dir = Path(run_dir)
    device = resolve_device(device)
    ds = dataset_obj if dataset_obj is not None else open_dataset(run_dir, dataset, data_dir, dataset_options)
    base_meta_path = run_dir / "checkpoints" / "base" / "meta.json"
    base_meta = json.loads(base_meta_path.read_text()) if base_meta_path.exists() else {}
    model_name = options.model or base_meta.get("model")
    recipe = default_recipe(model_name, device) if model_name else None
    if recipe is None:
        from roarfast.train import default_model

        model_name = default_model(ds, device)
        recipe = default_recipe(model_name, device)
    recipe = recipe.replace(amp=resolve_amp(options.amp, device))
    if options.epochs:
        recipe = recipe.replace(epochs=options.epochs)

    store = RankStore(run_dir)
    methods = _methods_to_run(store, options, ds)
    missing = [m for m in methods if m not in store.methods("train") or m not in store.methods("test")]
    cheap = [m for m in missing if model_free(m)]
    if cheap:  # model-free ranks take seconds: make them here rather than send the user back to extract
        run_extract(run_dir, ExtractOptions(methods=",".join(cheap)), dataset_obj=ds, device=device, seed=seed,
                    progress=progress)
        missing = [m for m in missing if m not in cheap]
    if missing:
        raise UserError(f"no complete ranks in {run_dir} for {', '.join(missing)}: run "
                        f"`roarfast extract --method {','.join(missing)} --run-dir {run_dir}` first")

    db = ResultsDB(run_dir / "results.sqlite")
    fill = fill_values(options.fill, ds.mean, ds.std)
    rows = []
    for method in methods:
        train_rec = store.read(method, "train", dataset_fingerprint=ds.fingerprint)
        test_rec = store.read(method, "test", dataset_fingerprint=ds.fingerprint)
        # a streamed dataset reads rank rows from the memory maps as batches need them; else all at once
        train_ranks, test_ranks = (train_rec, test_rec) if ds.streamed else (train_rec.tensor(), test_rec.tensor())
        for mode in options.modes:
            for fraction in options.fractions:
                for cell_seed in range(seed, seed + options.seeds):
                    for mask_only in (False, True) if options.mask_only else (False,):
                        masking = Masking(train_ranks=train_ranks, test_ranks=test_ranks, fraction=fraction,
                                          keep=(mode == "kar"), fill=fill, mask_only=mask_only)
                        # the control sees no pixel values, so the fill is not part of its configuration
                        config = {"recipe": recipe.to_dict(), "dataset": ds.fingerprint,
                                  "ranks": train_rec.manifest.get("params"),
                                  **({} if mask_only else {"fill": options.fill})}
                        cell = cell_key(dataset=ds.name, model=model_name, method=method, mode=mask_mode(masking),
                                        fraction=fraction, seed=cell_seed, config=config)
                        if not db.is_done(cell):
                            started = time.perf_counter()
                            result = train_classifier(ds, model_name, recipe, device, seed=cell_seed,
                                                      progress=progress, masking=masking)
                            db.record(cell, {"test_acc": result.test_acc, "val_acc": result.val_acc,
                                             "epochs": result.epochs, "seconds": time.perf_counter() - started})
                        rows.append(db.get(cell))
    return rows


def summarize(rows) -> dict:
    """{(method, mode, fraction): (mean test accuracy, std over seeds, seeds)}."""
    groups = {}
    for row in rows:
        groups.setdefault((row["method"], row["mode"], row["fraction"]), []).append(row["test_acc"])
    return {key: (statistics.fmean(v), statistics.pstdev(v) if len(v) > 1 else 0.0, len(v))
            for key, v in groups.items()}


def format_table(rows) -> str:
    """Test accuracy per method (rows) and mode x fraction (columns), mean +- std over seeds."""
    summary = summarize(rows)
    if not summary:
        return "no cells"
    columns = sorted({(mode, fraction) for _, mode, fraction in summary})
    methods = sorted({m for m, _, _ in summary}, key=lambda m: (m != "random", m))
    header = ["method"] + [f"{mode} {fraction:g}" for mode, fraction in columns]
    lines = [header]
    for method in methods:
        line = [method]
        for mode, fraction in columns:
            cell = summary.get((method, mode, fraction))
            if cell is None:
                line.append("-")
            else:
                mean, std, n = cell
                line.append(f"{mean:.1%}" + (f" ±{std:.1%}" if n > 1 else ""))
        lines.append(line)
    widths = [max(len(row[i]) for row in lines) for i in range(len(header))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths)) for row in lines)
