"""What one row of results.sqlite holds: the key that identifies a measurement (MeasurementKey: its kind and
the columns that name it) and the metrics of a finished one, checked into column values."""

import math
import platform
from dataclasses import dataclass, field

from roarfast.fills import FILLS
from roarfast.modes import DETECT, NO_RETRAIN_MODES, RETRAIN_MODES, is_control
from roarfast.records.paths import is_name
from roarfast.records.rows import RowConfig, RowRecord
from roarfast.version import __version__

RETRAIN, NO_RETRAIN, FILL_LEAKAGE = "retrain", "no-retrain", "fill-leakage"
#: the kinds of measurement, each with the modes it takes
KIND_MODES = {RETRAIN: RETRAIN_MODES, NO_RETRAIN: NO_RETRAIN_MODES, FILL_LEAKAGE: (DETECT,)}
KINDS = tuple(KIND_MODES)
#: the model column of a fill-leakage measurement: the network trained there is the hole detector
DETECTOR = "detector"
FRACTION_DECIMALS = 9  # fractions computed as i/10 and typed as 0.7 must name the same measurement

KEY_COLUMNS = ("kind", "dataset", "model", "method", "mode", "fill", "fraction", "seed", "config_hash")
METRIC_COLUMNS = ("test_acc", "val_acc", "epochs", "seconds")


def _nonempty_str(name: str, value) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError(f"{name} must be a non-empty str, got {value!r}")
    return value


@dataclass(frozen=True)
class MeasurementKey:
    """What identifies one measurement in results.sqlite: its `kind` (retrain, no-retrain, fill-leakage),
    `method`'s ranks, `mode` and `fraction`, the `fill` of the removed pixels (None where no pixel value
    is seen: a mask-only control), the `seed` (None where nothing is drawn), on `dataset` with `model`,
    and the rest of its configuration hashed as `config_hash`. `MeasurementKey.of` keeps the record of what made
    it (`record`, a roarfast.records.rows record: its id is the hash, its stored form the row's `config` column,
    so every number says what made it; not part of the key's identity: the hash is)."""

    kind: str
    dataset: str
    model: str
    method: str
    mode: str
    fill: str | None
    fraction: float
    seed: int | None
    config_hash: str
    record: RowRecord | None = field(default=None, compare=False, hash=False, repr=False)

    def __post_init__(self):
        if self.kind not in KIND_MODES:
            raise ValueError(f"kind must be one of {KINDS}, got {self.kind!r}")
        for name in ("dataset", "model", "method", "config_hash"):
            _nonempty_str(name, getattr(self, name))
        if not is_name(self.method):  # a method names its ranks' folder: one name (roarfast.records.paths)
            raise ValueError(f"method must be one name (no separator nor control character, not '.' or '..'), "
                             f"got {self.method[:60]!r}")
        if self.mode not in KIND_MODES[self.kind]:
            raise ValueError(f"mode of a {self.kind} measurement must be one of {KIND_MODES[self.kind]}, "
                             f"got {self.mode!r}")
        without_fill = self.kind == RETRAIN and is_control(self.mode)
        if (self.fill is None) != without_fill or (self.fill is not None and self.fill not in FILLS):
            expected = "None for a mask-only control" if without_fill else f"one of {', '.join(FILLS.names)}"
            raise ValueError(f"fill must be {expected}, "
                             f"got {self.fill!r}")
        if isinstance(self.fraction, bool) or not isinstance(self.fraction, (int, float)):
            raise ValueError(f"fraction must be a number in [0, 1], got {self.fraction!r}")
        if not (math.isfinite(self.fraction) and 0.0 <= self.fraction <= 1.0):
            raise ValueError(f"fraction must be in [0, 1], got {self.fraction!r}")
        if self.seed is None:
            if self.kind == RETRAIN:  # fill leakage imported from leakage.json never recorded its seed
                raise ValueError("seed must be a non-negative int for a retraining, got None")
        elif self.kind == NO_RETRAIN:
            raise ValueError(f"a no-retrain measurement draws nothing: seed must be None, got {self.seed!r}")
        elif isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise ValueError(f"seed must be a non-negative int, got {self.seed!r}")
        object.__setattr__(self, "fraction", round(float(self.fraction), FRACTION_DECIMALS))

    @property
    def config(self) -> dict | None:
        """What made it, as its row's `config` column holds it (None for a key made from a hash alone)."""
        return None if self.record is None else self.record.to_record()

    @classmethod
    def of(cls, *, config, **fields) -> "MeasurementKey":
        """The key of the measurement `config` made: a record of roarfast.records.rows (a cell's, ...), or a config
        as a row holds it (a dict: recipe, fill, ranks' params, ...); its id is the key's hash, it is kept."""
        record = config if isinstance(config, RowRecord) else RowConfig(config)
        return cls(**fields, config_hash=record.id, record=record)


def check_key(key) -> MeasurementKey:
    if not isinstance(key, MeasurementKey):
        raise ValueError(f"key must be a roarfast.results.MeasurementKey, got {type(key).__name__}")
    return key


def key_values(key: MeasurementKey) -> list:
    """The key's values in the order of KEY_COLUMNS."""
    return [getattr(key, c) for c in KEY_COLUMNS]


def runtime_versions() -> dict:
    """Versions of what produced a result: python, roarfast, torch, numpy."""
    # late: loads torch, and `roarfast ls` / `prune --dry-run` read results without it (the recorder has it loaded)
    import numpy
    import torch

    return {
        "python": platform.python_version(),
        "roarfast": __version__,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "numpy": numpy.__version__,
    }


def metric_values(metrics: dict) -> dict:
    """The columns a finished measurement's `metrics` fill (see ResultsDB.record), each checked: a ValueError
    names the first that is missing or out of range."""
    if not isinstance(metrics, dict):
        raise ValueError(f"metrics must be a dict, got {type(metrics).__name__}")
    missing = [name for name in METRIC_COLUMNS if name not in metrics]
    if missing:
        raise ValueError(f"metrics lack {missing}; expected keys {list(METRIC_COLUMNS)} (+ versions, extras)")
    values = {}
    for name in ("test_acc", "val_acc"):
        value = metrics[name]
        if name == "val_acc" and value is None:
            values[name] = None
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
            raise ValueError(f"metrics[{name!r}] must be an accuracy in [0, 1], got {value!r}")
        values[name] = float(value)
    epochs = metrics["epochs"]
    if epochs is not None and (isinstance(epochs, bool) or not isinstance(epochs, int) or epochs < 0):
        raise ValueError(f"metrics['epochs'] must be a non-negative int or None, got {epochs!r}")
    seconds = metrics["seconds"]
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not seconds >= 0:
        raise ValueError(f"metrics['seconds'] must be a non-negative number, got {seconds!r}")
    threads = metrics.get("threads")
    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or threads < 1):
        raise ValueError(f"metrics['threads'] must be a positive int or None, got {threads!r}")
    versions = metrics.get("versions")
    versions = runtime_versions() if versions is None else versions
    extra = {k: v for k, v in metrics.items() if k not in (*METRIC_COLUMNS, "versions", "threads")}
    values.update(epochs=epochs, seconds=float(seconds), threads=threads, versions=versions, extra=extra)
    return values
