"""The base-model stage (`roarfast train`): the classifier trained on the unmodified dataset, saved as the
run directory's base checkpoint with the meta that later stages check it by (dataset fingerprint, model
source, recipe, accuracies)."""

from dataclasses import dataclass

import torch

from roarfast.options import check_choice, check_positive
from roarfast.recipe import AMP_CHOICES, check_overrides, default_model, effective_recipe
from roarfast.version import __version__


@dataclass(frozen=True)
class TrainOptions:
    """The base model: `model` (what roarfast.models.resolve_model takes; None: the dataset's default on the
    device), `epochs` and `batch_size` (None: its recipe's), `amp`, and `recipe`: Recipe fields that override
    the rest ({field: value}). Each value is checked here, once (the model when it is resolved)."""

    model: object = None
    epochs: int | None = None
    batch_size: int | None = None
    amp: str = "auto"
    recipe: dict | None = None

    def __post_init__(self):
        check_positive("--epochs", self.epochs, optional=True)
        check_positive("--batch-size", self.batch_size, optional=True)
        check_choice("--amp", self.amp, AMP_CHOICES)
        object.__setattr__(self, "recipe", check_overrides(self.recipe))


def run_train(run_dir, options: TrainOptions, *, dataset=None, data_dir=None, dataset_options=None, device=None,
              seed=0, progress=True, dataset_obj=None) -> dict:
    """The `roarfast train` command: loads the dataset (or takes `dataset_obj`), trains the base model on
    the unmodified images and saves it as the run directory's base checkpoint. Returns a summary dict
    (model, val_acc, test_acc, best_epoch, epochs, seconds, checkpoint)."""
    from roarfast.device import resolve_device
    from roarfast.memory import keep_freed_memory
    from roarfast.probe import checked_model, checkpoint_bytes
    from roarfast.rundir import RunDir
    from roarfast.train import train_classifier
    from roarfast.train.parallel import distributed, join_torchrun

    keep_freed_memory()
    run = RunDir(run_dir)
    device = join_torchrun(resolve_device(device))
    ds = dataset_obj if dataset_obj is not None else run.open_dataset(dataset, data_dir, dataset_options)
    spec = checked_model(options.model or default_model(ds, device), ds)
    recipe = base_recipe(spec, ds, device, options)
    run.check_writable(checkpoint_bytes(spec, ds))  # before the training, not after it
    result = train_classifier(ds, spec, recipe, device, seed=seed, progress=progress)
    if distributed()[0] == 0:
        run.save_base_model(result.model, base_meta(spec, ds, recipe, device, seed, result))
        run.remember_dataset(ds)
    if distributed()[1] > 1:
        torch.distributed.barrier()  # no rank returns before the checkpoint exists
    return {"model": spec.name, "val_acc": result.val_acc, "test_acc": result.test_acc,
            "best_epoch": result.best_epoch, "epochs": result.epochs, "seconds": result.seconds,
            "checkpoint": str(run.base_checkpoint)}


def base_recipe(spec, ds, device, options: TrainOptions):
    """The Recipe the base model `spec` trains with on ds (a Dataset, or anything with its image_size and
    train_index) on `device`: effective_recipe of its model with options' epochs, batch size, AMP and overrides."""
    return effective_recipe(spec.name, device, train_images=len(ds.train_index), image_size=ds.image_size,
                            epochs=options.epochs, batch_size=options.batch_size, amp=options.amp,
                            overrides=options.recipe)


def base_meta(spec, ds, recipe, device, seed: int, result) -> dict:
    """The meta saved beside the base checkpoint: what the network is (model, its source hash, shapes), what
    it was trained on (dataset, its fingerprint and normalization, classes), how (seed, recipe, device,
    versions) and what it reached (TrainResult's accuracies, epochs, time and history)."""
    return {"model": spec.name, "model_source_sha256": spec.source_sha256, "num_classes": ds.num_classes,
            "image_size": ds.image_size, "in_channels": ds.channels, "dataset": ds.name, "dataset_options": ds.options,
            "dataset_fingerprint": ds.fingerprint, "mean": list(ds.mean), "std": list(ds.std),
            "classes": ds.train.classes, "seed": seed, "recipe": recipe.to_dict(), "device": str(device),
            "val_acc": result.val_acc, "test_acc": result.test_acc, "best_epoch": result.best_epoch,
            "epochs": result.epochs, "seconds": result.seconds, "history": result.history,
            "versions": {"torch": torch.__version__, "roarfast": __version__}}
