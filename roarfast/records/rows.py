"""The record kinds of a results row's `config` (results.sqlite, roarfast.measurements): what made a measurement,
written into its row's `config` column as canonical JSON by the results database through the one put, and read
back through the one get, verified: its id is the row's `config_hash`, the full sha256 of that JSON (the one
digest of a row's id, `RowRecord.id`), which the rows have carried since results schema v5.

- `CellRecord`: a retraining cell or its mask-only control (roarfast.stages.cells).
- `NoRetrainRecord`: the base model scored on modified test images (roarfast.stages.noretrain).
- `FillLeakageRecord`: the hole detector on filled images (roarfast.stages.fill_leakage).
- `RowConfig`: a config as a row holds it, whatever made it (a row read back, one imported or written before
  these records, a key made from a dict: MeasurementKey.of).
"""

import json
from dataclasses import dataclass

from roarfast.common.fingerprint import canonical_json, config_hash
from roarfast.errors import UserError
from roarfast.records.kind import Record

#: the columns that say which row a message is about
_NAMED_BY = ("kind", "method", "mode", "fill", "fraction", "seed")


class RowRecord(Record):
    """What made a measurement, stored in its results row: the place of its stored form is the row's columns (a
    dict the database writes, or one it read), its id the row's config_hash."""

    what = "row's config"
    repair = "restore it from a copy, or move it aside to measure again from scratch"

    @property
    def id(self) -> str:
        return config_hash(self.to_record())

    @classmethod
    def place(cls, record_id=None, where=None, **keys) -> tuple:
        raise TypeError(f"a {cls.what} is stored in its results row (roarfast.measurements.db), not in a file")

    @classmethod
    def names_it(cls, path, stored: dict, record_id: str) -> bool:
        return True  # a row is found by its config_hash: the id is all its place says

    @classmethod
    def write(cls, path, stored: dict, **payload) -> None:
        """Sets the `config` column of the row whose columns are `path` (a dict) to `stored` as canonical JSON."""
        path["config"] = canonical_json(stored)

    @classmethod
    def read(cls, path, repair: str, run_dir) -> dict | None:
        """The config of the row `path` (its columns), or None where it holds none (before results schema v5)."""
        if not path.get("config"):
            return None
        try:
            return json.loads(path["config"])
        except ValueError:
            raise UserError(f"{_row(path)}: its config is not JSON; {repair}") from None

    @classmethod
    def mismatch(cls, path, record_id, gives, repair: str) -> str:
        return f"{_row(path)}: its config gives the config_hash {gives}, not the row's {record_id}; {repair}"


def _row(columns: dict) -> str:
    return "the row (" + " ".join(f"{c}={columns.get(c)}" for c in _NAMED_BY) + ")"


@dataclass(frozen=True)
class RowConfig(RowRecord):
    """A row's `config` as it is (JSON-able)."""

    config: dict

    kind = "row config"

    def to_record(self) -> dict:
        return self.config

    @classmethod
    def from_record(cls, config: dict) -> "RowConfig":
        if not isinstance(config, dict):
            raise TypeError(f"a row's config is a JSON object, not {type(config).__name__}")
        return cls(config)


@dataclass(frozen=True)
class CellRecord(RowRecord):
    """A retraining cell of `recipe` (Recipe.to_dict) on the data of `dataset_fingerprint`, masked by the ranks
    `rank_id` of provenance `ranks` made from the base model `base`, filled with `fill` (None: a mask-only control,
    which sees no pixel values), of a plug-in model of source hash `model_source` (None: a built-in)."""

    recipe: dict
    dataset_fingerprint: object
    ranks: object
    base: object
    rank_id: object
    fill: object = None
    model_source: object = None

    kind = "cell"
    what = "cell"

    def to_record(self) -> dict:
        """The `config` of its results row."""
        record = {"recipe": self.recipe, "dataset": self.dataset_fingerprint, "ranks": self.ranks, "base": self.base,
                  "rank_id": self.rank_id}
        if self.fill is not None:
            record["fill"] = self.fill
        if self.model_source is not None:
            record["model_source"] = self.model_source
        return record

    @classmethod
    def from_record(cls, config: dict) -> "CellRecord":
        return cls(config["recipe"], config["dataset"], config["ranks"], config.get("base"), config.get("rank_id"),
                   config.get("fill"), config.get("model_source"))


@dataclass(frozen=True)
class NoRetrainRecord(RowRecord):
    """The base model of checkpoint sha256 `base` scored on the test images of the data of `dataset_fingerprint`,
    modified by the ranks of provenance `ranks` and filled with `fill`."""

    base: str
    dataset_fingerprint: str
    ranks: object
    fill: str

    kind = "no-retrain"
    what = "no-retrain measurement"

    def to_record(self) -> dict:
        return {"base": self.base, "dataset": self.dataset_fingerprint, "ranks": self.ranks, "fill": self.fill}

    @classmethod
    def from_record(cls, config: dict) -> "NoRetrainRecord":
        return cls(config["base"], config["dataset"], config["ranks"], config["fill"])


@dataclass(frozen=True)
class FillLeakageRecord(RowRecord):
    """The hole detector (its settings `detector`) trained on the first `max_images` images of each split of the
    data of `dataset_fingerprint`, filled where the ranks of provenance `ranks` ({split: params}) remove pixels."""

    dataset_fingerprint: str
    ranks: dict
    max_images: int
    detector: dict

    kind = "fill-leakage"
    what = "fill-leakage measurement"

    def to_record(self) -> dict:
        return {"dataset": self.dataset_fingerprint, "ranks": self.ranks, "max_images": self.max_images,
                "detector": self.detector}

    @classmethod
    def from_record(cls, config: dict) -> "FillLeakageRecord":
        return cls(config["dataset"], config["ranks"], config["max_images"], config["detector"])
