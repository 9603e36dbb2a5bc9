"""The base-model stage (`roarfast train`): the classifier trained on the unmodified dataset, saved in the run
directory under its id (roarfast.records.ids: its data's fingerprint, model, effective recipe and seed) with
the meta that later stages check it by (dataset fingerprint, model source, recipe, accuracies). A base model of
that id already there is reused, and one of another id is trained beside the others: none is ever replaced.

Or weights trained elsewhere are adopted (`train --weights FILE`): loaded strictly into the chosen model for this
data, evaluated (validation and test accuracy) and saved as the base model of their id (the data, the model and
the weights' digest); nothing is trained, and extraction, the no-retrain evaluations and the cells go on from it."""

import hashlib
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import ClassVar

import torch

from roarfast.records.checkpoint import META, WEIGHTS, fit_state_dict, read_state_dict, weights_bytes
from roarfast.data.loader import split_loader
from roarfast.common.device import resolve_device
from roarfast.errors import UserError
from roarfast.common.fingerprint import sha256_file
from roarfast.records.model import ModelRecord, adopted_text
from roarfast.records.ranks import RankStoreRecord
from roarfast.common.options import check_choice, check_positive
from roarfast.models.probe import checked_model, checkpoint_bytes
from roarfast.recipe import AMP_CHOICES, BASE_MODEL, check_overrides, default_model, effective_recipe
from roarfast.rundir.writing import open_for_writing
from roarfast.stages.step_times import remember_training
from roarfast.train import accuracy, train_classifier
from roarfast.train.parallel import distributed, join_torchrun
from roarfast.version import __version__


@dataclass(frozen=True)
class TrainOptions:
    """The base model: `model` (what roarfast.models.resolve_model takes; None: the dataset's default on the
    device), `epochs` and `batch_size` (None: its recipe's), `amp`, and `recipe`: Recipe fields that override
    the rest ({field: value}); or `weights`, a state-dict file adopted instead of training (then no epochs, batch
    size or recipe: nothing is trained). Each value is checked here, once (the model when it is resolved).
    roarfast.recipe.effective_recipe reads them for the base model (`stage`)."""

    stage: ClassVar[str] = BASE_MODEL
    model: object = None
    epochs: int | None = None
    batch_size: int | None = None
    amp: str = "auto"
    recipe: dict | None = None
    weights: str | Path | None = None

    def __post_init__(self):
        check_positive("--epochs", self.epochs, optional=True)
        check_positive("--batch-size", self.batch_size, optional=True)
        check_choice("--amp", self.amp, AMP_CHOICES)
        object.__setattr__(self, "recipe", check_overrides(self.recipe))
        training = [flag for flag, value in (("--epochs", self.epochs), ("--batch-size", self.batch_size),
                                             ("--recipe", self.recipe)) if value]
        if self.weights is not None and training:
            raise UserError(f"--weights adopts trained weights and trains nothing: drop {', '.join(training)} (the "
                            f"cells' training is set on retrain and sweep)")


def run_train(run_dir, options: TrainOptions, *, dataset=None, data_dir=None, dataset_options=None, device=None,
              seed=0, progress=True, dataset_obj=None, echo=print) -> dict:
    """The `roarfast train` command: loads the dataset (or takes `dataset_obj`; default: HEAD's), then reuses
    the base model of the id these settings make when the run directory holds it, else trains it on the
    unmodified images (or adopts options.weights) beside the others (under the run directory's claim on it, so
    that of several processes one makes it); records it as HEAD's base model. Returns a summary dict (model, id,
    reused, trained, made: made_text, val_acc, test_acc, best_epoch, epochs, seconds, checkpoint, adopted: the
    meta's record of adopted weights or None)."""
    run = open_for_writing(run_dir)
    device = join_torchrun(resolve_device(device))
    ds = dataset_obj if dataset_obj is not None else run.open_dataset(dataset, data_dir, dataset_options)
    spec = base_spec(options.model, ds, device)
    adopted = None
    if options.weights is not None:
        adopted = adopted_model(spec, ds, options.weights)
        model_id = adopted.id
    else:
        recipe = effective_recipe(spec, device, ds, options)
        model_id = ModelRecord.trained(spec, ds, recipe, seed).id
    reused = model_id in run.models()
    if not reused:
        run.check_writable()  # before the claim's lock file is written; the estimate is checked before training
        with run.claim(f"base-{model_id}", waiting=lambda holder: echo(f"base model: waiting for {holder}, which "
                                                                       f"makes it")):
            reused = model_id in run.models()  # made by another process while this one waited
            if adopted is not None and not reused:
                _adopt(run, adopted, spec, ds, device, echo)
            elif not reused:
                _train(run, model_id, spec, ds, recipe, device, seed, progress, echo)
    meta = run.model_meta(model_id)
    if distributed()[0] == 0:
        run.update_head("roarfast.stages.basemodel.run_train()", dataset=run.remember_dataset(ds), base=model_id,
                        **head_after(run, model_id, ds.fingerprint))
    return {"model": spec.name, "id": model_id, "reused": reused, "trained": trained_at(run, model_id),
            "made": made_text(run, model_id, meta),
            "val_acc": meta["val_acc"], "test_acc": meta["test_acc"], "best_epoch": meta["best_epoch"],
            "epochs": meta["epochs"], "seconds": meta["seconds"], "checkpoint": str(run.model_path(model_id)),
            "adopted": meta.get("adopted")}


def base_spec(model, ds, device):
    """The ModelSpec of the base model `model` (a name, a factory, ...; None: the dataset's default on `device`)
    for ds, checked against its data."""
    return checked_model(model or default_model(ds, device), ds)


def _train(run, model_id: str, spec, ds, recipe, device, seed, progress, echo) -> None:
    """Trains the base model `spec` and saves it under its id `model_id`, beside the base models kept."""
    kept = len(run.models())
    where = run.model_dir(model_id)  # checked before the training, not after it
    run.check_writable(checkpoint_bytes(spec, ds), places=(where / WEIGHTS, where / META))
    if kept:
        echo(f"base model: training a new one beside the {kept} kept (other data, model, recipe or seed)")
    result = train_classifier(ds, spec, recipe, device, seed=seed, progress=progress)
    if distributed()[0] == 0:
        record = ModelRecord.trained(spec, ds, recipe, seed)
        run.records.put(record, base_meta(spec, ds, record, device, result), model=result.model)
    if distributed()[1] == 1:  # what later dry runs estimate from (a data-parallel run's seconds are several devices')
        remember_training(device, spec, ds, recipe, result.seconds)
    if distributed()[1] > 1:
        torch.distributed.barrier()  # no rank returns before the checkpoint exists


@dataclass(frozen=True)
class Adopted:
    """Weights adopted as a base model: the model holding them (a network of `spec`), the file they came from
    (absolute) and its sha256, and the base model's record (the digest of the weights as the checkpoint stores
    them)."""

    model: torch.nn.Module
    file: str
    file_sha256: str
    record: ModelRecord
    spec: object

    @property
    def id(self) -> str:
        return self.record.id


def adopted_model(spec, ds, path) -> Adopted:
    """The weights of the state-dict file `path` in a network of `spec` for ds (its classes, channels and canvas),
    loaded strictly (a mismatch is one line naming the first missing or unexpected key and shape:
    checkpoint.fit_state_dict), and the id of the base model they make."""
    state = read_state_dict(path)
    model = spec.build(ds.num_classes, ds.image_size, ds.channels)
    fit_state_dict(model, state, path, f"--model {spec.name} on this data ({ds.num_classes} classes, "
                                       f"{ds.channels}x{ds.image_size}x{ds.image_size} images)")
    digest = hashlib.sha256(weights_bytes(model, spec.name)).hexdigest()
    return Adopted(model, str(Path(path).expanduser().resolve()), sha256_file(Path(path).expanduser()),
                   ModelRecord.of_weights(spec, ds, digest), spec)


def _adopt(run, adopted: Adopted, spec, ds, device, echo) -> None:
    """Saves the adopted weights as the base model of their id, beside the base models kept, with their accuracy
    on the validation and test splits (evaluated as the model's recipe evaluates: its batch and precision, no
    test-time views)."""
    kept = len(run.models())
    where = run.model_dir(adopted.id)
    run.check_writable(checkpoint_bytes(spec, ds), places=(where / WEIGHTS, where / META))
    if kept:
        echo(f"base model: adopting the weights of {adopted.file} beside the {kept} kept")
    started = time.perf_counter()
    model = adopted.model.to(device).eval()
    recipe = effective_recipe(spec, device, ds)
    val_acc = accuracy(model, split_loader(ds, "train", device), ds.val_index, recipe)
    test_acc = accuracy(model, split_loader(ds, "test", device), torch.arange(len(ds.test)), recipe)
    meta = adopted_meta(spec, ds, adopted, device, val_acc, test_acc, time.perf_counter() - started)
    run.records.put(adopted.record, meta, model=model)


def head_after(run, model_id: str, fingerprint: str) -> dict:
    """HEAD's changes when its base model becomes `model_id` (on the data of `fingerprint`): each method's
    latest ranks carried over to that base model (the same provenance: the ids they would have; extract makes
    those missing), and no configuration where the base model changed."""
    head = run.head()
    if head.base == model_id:
        return {}
    checkpoint = run.base_checkpoint_sha256(model_id)
    ranks = {}
    for method, rid in head.ranks.items():
        store = run.ranks_for({method: rid})
        manifest = store.manifest(method, "train") or store.manifest(method, "test")
        if manifest is not None:
            stamp = None if manifest["checkpoint_sha256"] is None else checkpoint
            ranks[method] = RankStoreRecord(method, manifest["params"], stamp, fingerprint).id
    return {"ranks": ranks, "configuration": None}


def trained_at(run, model_id: str) -> str:
    """When the base model `model_id` was saved (its meta.json's time), UTC, to the minute."""
    stamp = (run.model_path(model_id) / META).stat().st_mtime
    return datetime.fromtimestamp(stamp, timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def made_text(run, model_id: str, meta: dict) -> str:
    """How the kept base model `model_id` (its meta `meta`) was made, as `train` and the sweep say when they reuse
    it: "trained WHEN", or its adopted weights by file and digest (nothing trained) and when they were adopted."""
    when = trained_at(run, model_id)
    adopted = meta.get("adopted")
    return f"{adopted_text(adopted, 12)}; adopted {when}" if adopted else f"trained {when}"


def base_meta(spec, ds, record: ModelRecord, device, result) -> dict:
    """The meta saved beside the base checkpoint: what the network is and the data it is for (_model_meta), what
    made it (`record`: ModelRecord.trained, its seed and recipe) and what it reached (TrainResult's accuracies,
    epochs, time and history)."""
    return {**_model_meta(spec, ds, device), **record.to_record(), "val_acc": result.val_acc,
            "test_acc": result.test_acc, "best_epoch": result.best_epoch, "epochs": result.epochs,
            "seconds": result.seconds, "history": result.history}


def adopted_meta(spec, ds, adopted: Adopted, device, val_acc: float, test_acc: float, seconds: float) -> dict:
    """The meta saved beside adopted weights: what the network is and the data it is for (_model_meta), where the
    weights came from (`adopted`: the file, its sha256, the weights' digest that makes the id), what they reach
    on this data, the normalization they are used with (every stage feeds them images normalized with this
    dataset's mean and std: a model trained with other statistics sees shifted inputs), and that nothing was
    trained (no seed, no recipe, 0 epochs)."""
    made = adopted.record.to_record()
    return {**_model_meta(spec, ds, device), **made,
            "adopted": {"file": adopted.file, "file_sha256": adopted.file_sha256, **made["adopted"]},
            "normalization": {"mean": list(ds.mean), "std": list(ds.std),
                              "source": f"{ds.name}'s training split, as every stage normalizes the images"},
            "val_acc": val_acc, "test_acc": test_acc, "best_epoch": None, "epochs": 0, "seconds": seconds,
            "history": []}


def _model_meta(spec, ds, device) -> dict:
    """What every base model's meta says: the network (model, its source hash, shapes), the data it is for
    (dataset, its options, the folder it was read from, its fingerprint and normalization, classes), the device
    and the versions."""
    return {"model": spec.name, "model_source_sha256": spec.source_sha256, "num_classes": ds.num_classes,
            "image_size": ds.image_size, "in_channels": ds.channels, "dataset": ds.name, "dataset_options": ds.options,
            "data_dir": ds.data_dir,
            "dataset_fingerprint": ds.fingerprint, "mean": list(ds.mean), "std": list(ds.std),
            "classes": ds.train.classes, "device": str(device),
            "versions": {"torch": torch.__version__, "roarfast": __version__}}
