"""One retraining cell (DESIGN.md section 10): which cell it is, its key in results.sqlite, and how it is
trained. A cell is (method, mode, fraction, seed) under one configuration; its control (`control=True`)
is the same cell trained and tested on the removal pattern alone (mode "<mode>-mask").

`CellTrainer` holds what every cell of a run directory shares (the dataset, the recipe, the rank
records) so that a sweep loads them once; the retrain and sweep stages and the Ray workers all train
cells through it, so a cell's configuration and its training are written in one place.
"""

import json
import time
from dataclasses import dataclass
from pathlib import Path

from roarfast.errors import UserError

#: modes a grid may hold: roar removes the top fraction, kar keeps it
GRID_MODES = ("roar", "kar")
#: per-channel ImageNet mean in [0,1] pixel space, for --fill imagenet-mean
IMAGENET_MEAN = (0.485, 0.456, 0.406)
#: constant fills, and "road": ROAD's noisy linear imputation (roarfast.fill), done by the loaders
FILLS = ("dataset-mean", "imagenet-mean", "zero", "road")


@dataclass(frozen=True)
class CellSpec:
    """One retraining of a grid: `method`'s ranks, `mode` roar/kar at `fraction`, training seed `seed`;
    `control`: the mask-only control of that cell."""

    method: str
    mode: str
    fraction: float
    seed: int
    control: bool = False

    @property
    def result_mode(self) -> str:
        """The mode of its row in results.sqlite: roar, kar, roar-mask or kar-mask."""
        return self.mode + ("-mask" if self.control else "")

    def describe(self) -> str:
        return f"{self.method} {self.result_mode} {self.fraction:g} seed {self.seed}"


def fill_values(fill: str, mean, std) -> tuple | str:
    """The replacement value per channel in the normalized space the model sees, or "road" (the loaders
    impute the removed pixels instead)."""
    from roarfast.fill import ROAD_FILL

    if fill == ROAD_FILL:
        return ROAD_FILL
    if fill == "dataset-mean":
        return tuple(0.0 for _ in mean)
    if fill == "zero":
        return tuple(-m / s for m, s in zip(mean, std))
    if fill == "imagenet-mean":
        if len(mean) != 3:
            raise UserError(f"--fill imagenet-mean needs 3-channel images, the dataset has {len(mean)}")
        return tuple((im - m) / s for im, m, s in zip(IMAGENET_MEAN, mean, std))
    raise UserError(f"--fill should be one of {', '.join(FILLS)}, got {fill!r}")


def base_meta(run_dir) -> dict:
    """The base model's meta.json in run_dir, or {} when there is none."""
    path = Path(run_dir) / "checkpoints" / "base" / "meta.json"
    return json.loads(path.read_text()) if path.exists() else {}


def cell_recipe(run_dir, ds, device, *, model=None, epochs=None, amp="auto"):
    """(model name, Recipe) of the retraining cells: the base model's architecture unless `model` names
    another, its tuned recipe on `device`, with `amp` and `epochs` applied."""
    from roarfast.recipe import default_model, default_recipe, resolve_amp

    model_name = model or base_meta(run_dir).get("model") or default_model(ds, device)
    recipe = default_recipe(model_name, device, train_images=len(ds.train_index)).replace(
        amp=resolve_amp(amp, device))
    if epochs is not None:
        if isinstance(epochs, bool) or not isinstance(epochs, int) or epochs < 1:
            raise UserError(f"--epochs should be a positive int, got {epochs!r}")
        recipe = recipe.replace(epochs=epochs)
    return model_name, recipe


class CellTrainer:
    """Trains the cells of one run directory on one device.

    Args:
        run_dir: the run directory (rank store, results).
        ds: the dataset (roarfast.data.load_dataset), the one the ranks were computed on.
        model_name, recipe: what every cell trains (cell_recipe).
        fill: name of the replacement of removed pixels (FILLS); part of each cell's configuration.
    """

    def __init__(self, run_dir, ds, model_name: str, recipe, fill: str, device, progress: bool = False):
        from roarfast.store import RankStore

        self.run_dir = Path(run_dir)
        self.ds = ds
        self.model_name = model_name
        self.recipe = recipe
        self.fill = fill
        self.fill_values = fill_values(fill, ds.mean, ds.std)
        self.device = device
        self.progress = progress
        self.store = RankStore(run_dir)
        self._records = {}  # method -> (train RankRecord, test RankRecord, train ranks, test ranks)

    def _ranks(self, method: str):
        if method not in self._records:
            train = self.store.read(method, "train", dataset_fingerprint=self.ds.fingerprint)
            test = self.store.read(method, "test", dataset_fingerprint=self.ds.fingerprint)
            # a streamed dataset reads rank rows from the memory maps as batches need them; else all at once
            loaded = (train, test) if self.ds.streamed else (train.tensor(), test.tensor())
            self._records[method] = (train, test, *loaded)
        return self._records[method]

    def check_fill(self, methods) -> None:
        """Refuses, before any cell is written, ranks the fill cannot use: the imputation fills whole
        pixels, so it needs pixel ranks, not --granularity value."""
        from roarfast.fill import ROAD_FILL

        if self.fill != ROAD_FILL:
            return
        for method in methods:
            shape = self.store.read(method, "train", dataset_fingerprint=self.ds.fingerprint).ranks.shape
            if len(shape) != 3:
                raise UserError(f"--fill {ROAD_FILL} imputes whole pixels and needs pixel ranks, but {method}'s are "
                                f"{tuple(shape)} (extract with --granularity pixel)")

    def ranks_params(self, method: str):
        """The parameters the method's stored ranks were made with, or None when the store lacks them."""
        manifest_path = self.store.path(method, "train") / "manifest.json"
        if not manifest_path.exists():
            return None
        return json.loads(manifest_path.read_text()).get("params")

    def cell(self, spec: CellSpec, ranks_params=None):
        """The results.sqlite key of `spec` (ranks_params: the stored ranks' parameters, read when None)."""
        from roarfast.results import cell_key

        params = ranks_params if ranks_params is not None else self.ranks_params(spec.method)
        # the control sees no pixel values, so the fill is not part of its configuration
        config = {"recipe": self.recipe.to_dict(), "dataset": self.ds.fingerprint, "ranks": params,
                  **({} if spec.control else {"fill": self.fill})}
        return cell_key(dataset=self.ds.name, model=self.model_name, method=spec.method, mode=spec.result_mode,
                        fraction=spec.fraction, seed=spec.seed, config=config)

    def train(self, spec: CellSpec) -> dict:
        """Trains `spec` from scratch; returns its metrics row (test_acc, val_acc, epochs, seconds, fill)."""
        from roarfast.train import Masking, train_classifier

        _, _, train_ranks, test_ranks = self._ranks(spec.method)
        masking = Masking(train_ranks=train_ranks, test_ranks=test_ranks, fraction=spec.fraction,
                          keep=(spec.mode == "kar"), fill=self.fill_values, mask_only=spec.control)
        started = time.perf_counter()
        result = train_classifier(self.ds, self.model_name, self.recipe, self.device, seed=spec.seed,
                                  progress=self.progress, masking=masking)
        metrics = {"test_acc": result.test_acc, "val_acc": result.val_acc, "epochs": result.epochs,
                   "seconds": time.perf_counter() - started, "test_images": len(self.ds.test)}
        if not spec.control:
            metrics["fill"] = self.fill
        return metrics
