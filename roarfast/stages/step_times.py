"""Seconds per image measured on this machine, kept between commands beside the data caches
(roarfast.data.cache: $ROARFAST_CACHE_DIR, else $XDG_CACHE_HOME/roarfast, else ~/.cache/roarfast), so that a
dry run estimates from what was measured here before instead of measuring a step again.

Three kinds of measurement (`key`), each sealed with its digest (a damaged one is measured again, with a note):
- training: seconds per image of a training step and of an evaluation pass of a model on a canvas with a
  recipe's batch, precision and augmentation; written by every base model and every cell trained alone in this
  process (`remember_training`: the run's own seconds, evaluation included) and by a dry run's measured step
  (roarfast.planning.estimate), which never replaces a training's.
- gradient: the FLOP/s of a pass that takes the gradient of a model's input (what every gradient estimator's
  passes are), measured by a dry run.
- extraction: seconds per image of extracting a set of estimators together (one pass shares their work) with
  their parameters, batch and precision; written by a sweep's extraction (the whole stage's seconds).
Besides, what a dry run counts of a model on the meta device, which no device changes (the step's shape, an
estimator's FLOPs, an evaluation's live bytes): counting loads torch's compiler (seconds), so it is done once.

A key names the device (a GPU's name, or the CPU's model and the threads torch computes with) and torch's version
(its kernels set a step's time, its operators what a trace counts), so records of another machine, another thread
count or another torch are never read.
"""

import platform
from functools import lru_cache

from roarfast.data import cache
from roarfast.common.fingerprint import config_hash

KIND = "step-times"
#: bump when what a record holds, how it is keyed or how a shape is counted changes: earlier records are keyed apart
FORMAT = 3
#: the Recipe fields that change what a training step or an evaluation computes (the rest, such as the learning
#: rate or the epochs, change numbers, not work)
STEP_FIELDS = ("batch_size", "amp", "channels_last", "flip", "translate", "alternate_flips", "ema_decay",
               "lookahead", "tta", "eval_batch_size")
#: a training's or an extraction's weight against the real ones kept before it (as a sweep folds a cell's seconds
#: into its rates, roarfast.planning.grid.Plan.finished): one run slowed by the machine's load moves the estimate a fifth
RECENT_WEIGHT = 0.2
#: a training run's seconds are split between its steps and its evaluations at this ratio of an evaluated image's
#: cost to a trained one's where no measured step says it (a forward pass of the three a step makes)
EVAL_SHARE = 1 / 3


@lru_cache(maxsize=None)
def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def device_label(device) -> str:
    """What a record's key says of the device: a GPU's name, or the CPU's model and torch's thread count."""
    # late: loads torch, and --help imports this module
    import torch

    device = torch.device(device)
    if device.type == "cuda":
        return f"cuda: {torch.cuda.get_device_name(device)}"
    return f"{device.type}: {_cpu_name()}, {torch.get_num_threads()} threads"


def key(kind: str, device, spec, data, settings: dict) -> str:
    """The key of a record of `kind` ("training", "gradient", "extraction"; "shape", "flops" and "evaluation",
    counted on no device: `device` None) of `spec` (a ModelSpec; None for an extraction of model-free estimators)
    on data's canvas and classes on `device`, measured with `settings` (training_settings, extraction_settings, or
    a gradient pass's rows, compute batch and precision)."""
    # late: loads torch, and --help imports this module
    import torch

    model = {} if spec is None else {"model": spec.name, "source": spec.source_sha256}
    where = None if device is None else device_label(device)
    return config_hash({"format": FORMAT, "torch": torch.__version__, "kind": kind, "device": where, **model,
                        "canvas": list(data.train.shape), "classes": data.num_classes, "settings": settings})


def training_settings(recipe) -> dict:
    """What a training record is keyed by of `recipe`: its STEP_FIELDS."""
    return {name: getattr(recipe, name) for name in STEP_FIELDS}


def extraction_settings(selection, batch_size: int, amp: str | None) -> dict:
    """What an extraction record is keyed by: the estimators of `selection` (a Selection) with their ranks'
    identity but the seed, the batch and --amp."""
    methods = {name: {k: v for k, v in selection.ranks_identity(name).items() if k != "seed"}
               for name in selection.names}
    return {"methods": methods, "batch": batch_size, "amp": amp}


def read(where: str) -> dict | None:
    """The record under the key `where` (its seconds, and "real": whether a training or an extraction measured them), or
    None where none was kept (or it is damaged)."""
    return cache.read(KIND, where)


def remember(where: str, record: dict, real: bool) -> None:
    """Keeps `record` under the key `where`, measured by a real training or extraction (`real`) or by a dry run's
    step; a step's never replaces a real one's."""
    kept = read(where)
    if real or kept is None or not kept.get("real"):
        cache.write(KIND, where, {**record, "real": real})


def remember_training(device, spec, data, recipe, seconds: float) -> None:
    """Keeps the per-image seconds of a training run of `recipe` on `data` (a Dataset) that took `seconds`: its
    steps (the last partial batch dropped, as the loop does) and its evaluations (the validation split each epoch,
    the test split once), split at the measured ratio where a measured step gave one, else at EVAL_SHARE."""
    where = key("training", device, spec, data, training_settings(recipe))
    kept = read(where) or {}
    share = kept["eval_image"] / kept["train_image"] if kept.get("train_image") else EVAL_SHARE
    train_images = len(data.train_index)
    stepped = train_images // min(recipe.batch_size, train_images) * min(recipe.batch_size, train_images)
    evaluated = recipe.epochs * (len(data.train) - train_images) + len(data.test)
    train_image = seconds / (recipe.epochs * stepped + share * evaluated)
    remember(where, _folded(kept, {"train_image": train_image, "eval_image": share * train_image}), real=True)


def remember_extraction(device, spec, data, selection, batch_size: int, amp: str, seconds: float, images: int) -> None:
    """Keeps the per-image seconds of an extraction of the estimators of `selection` together (`images` images of
    every split in `seconds`)."""
    where = key("extraction", device, spec if selection.explained else None, data,
                extraction_settings(selection, batch_size, amp))
    remember(where, _folded(read(where) or {}, {"image": seconds / images}), real=True)


def _folded(kept: dict, measured: dict) -> dict:
    """`measured` folded into the real measurements `kept` before it (RECENT_WEIGHT); alone after a dry run's."""
    if not kept.get("real"):
        return measured
    return {name: (1 - RECENT_WEIGHT) * kept[name] + RECENT_WEIGHT * value for name, value in measured.items()}
