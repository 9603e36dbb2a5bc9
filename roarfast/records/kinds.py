"""One record type per artifact kind of a run directory, and the one way they are written and read back.

A record type holds the fields that define its artifact and nothing else; it yields the artifact's id (`.id`:
roarfast.records.ids.digest_id of those fields, the one digest) and the part of the stored record that says
them (`.to_record()`), and reads them back from a stored record (`from_record`), so what is written and what
is read back are one definition:

- `ModelRecord`: a base model (models/<id>/meta.json): its data's fingerprint, the model and its source hash,
  the effective recipe and seed; or, adopted (`train --weights`), the digest of its weights instead.
- `RankStoreRecord`: a rank store (ranks/<method>/<id>/<split>/manifest.json, written chunk by chunk by the
  store's one writer): the method, its ranks' provenance, the base checkpoint's sha256 and the data's.
- `ConfigurationRecord`: a configuration of cells (configurations/<id>.json): the settings its cells share
  (configurations.settings_of) and the rank id of each of its methods.
- `CellRecord`: a retraining cell's configuration, the `config` of its results row (results.sqlite): the recipe,
  the data, its ranks' provenance and id, the base model, the fill, a plug-in model's source. Its id is the row's
  `config_hash` (the full sha256 of the same canonical JSON), which the rows have carried since results schema v5.

They are written and read back, verified, by roarfast.records.access.Records (RunDir.records). This module
stays light (no numpy): the CLI's --help imports it through the grid.
"""

from dataclasses import dataclass

from roarfast.common.fingerprint import config_hash
from roarfast.records.ids import digest_id


@dataclass(frozen=True)
class ModelRecord:
    """A base model: trained on the data of `dataset_fingerprint` as `model` (its source hash `model_source`:
    None for a built-in) with the effective `recipe` (Recipe.to_dict) and `seed`; or adopted (`adopted`) from
    weights whose checkpoint digest is `weights_sha256` (nothing trained: no recipe, no seed)."""

    dataset_fingerprint: object
    model: object
    model_source: object = None
    recipe: object = None
    seed: object = None
    adopted: bool = False
    weights_sha256: object = None

    kind = "model"
    what = "base model"

    @classmethod
    def trained(cls, spec, ds, recipe, seed) -> "ModelRecord":
        """The base model `spec` (a ModelSpec) trained on ds (its fingerprint) with `recipe` (a Recipe) and `seed`."""
        return cls(ds.fingerprint, spec.name, spec.source_sha256, recipe.to_dict(), seed)

    @classmethod
    def of_weights(cls, spec, ds, weights_sha256: str) -> "ModelRecord":
        """The base model `spec` adopted for ds with the weights of checkpoint digest `weights_sha256`."""
        return cls(ds.fingerprint, spec.name, spec.source_sha256, adopted=True, weights_sha256=weights_sha256)

    @property
    def id(self) -> str:
        made = {"dataset": self.dataset_fingerprint, "model": self.model, "model_source": self.model_source}
        if self.adopted:
            return digest_id({**made, "weights": self.weights_sha256})
        return digest_id({**made, "recipe": self.recipe, "seed": self.seed})

    def to_record(self) -> dict:
        """What a base model's meta.json says of what made it (the meta's other keys describe it)."""
        record = {"model": self.model, "model_source_sha256": self.model_source,
                  "dataset_fingerprint": self.dataset_fingerprint, "seed": self.seed, "recipe": self.recipe}
        if self.adopted:
            record["adopted"] = {"weights_sha256": self.weights_sha256}
        return record

    @classmethod
    def from_record(cls, meta: dict) -> "ModelRecord":
        adopted = meta.get("adopted")
        common = (meta.get("dataset_fingerprint"), meta.get("model"), meta.get("model_source_sha256"))
        if isinstance(adopted, dict):
            return cls(*common, adopted=True, weights_sha256=adopted.get("weights_sha256"))
        return cls(*common, recipe=meta.get("recipe"), seed=meta.get("seed"))


@dataclass(frozen=True)
class RankStoreRecord:
    """The ranks of `method` with provenance `params` (Selection.ranks_identity), made from the base checkpoint of
    sha256 `checkpoint_sha256` (None: a model-free method) on the data of `dataset_fingerprint`."""

    method: str
    params: object
    checkpoint_sha256: object
    dataset_fingerprint: object

    kind = "ranks"
    what = "ranks"

    @property
    def id(self) -> str:
        return digest_id({"method": self.method, "params": self.params, "checkpoint": self.checkpoint_sha256,
                          "dataset": self.dataset_fingerprint})

    def to_record(self) -> dict:
        """What a rank store's manifest (any split's) says of what made it."""
        return {"method": self.method, "params": self.params, "checkpoint_sha256": self.checkpoint_sha256,
                "dataset_fingerprint": self.dataset_fingerprint}

    @classmethod
    def from_record(cls, manifest: dict) -> "RankStoreRecord":
        return cls(manifest["method"], manifest["params"], manifest["checkpoint_sha256"],
                   manifest["dataset_fingerprint"])


@dataclass(frozen=True)
class ConfigurationRecord:
    """The configuration of the cells sharing `settings` whose methods use the ranks `ranks` ({method: rank id})."""

    settings: dict
    ranks: dict

    kind = "configuration"
    what = "configuration"

    @property
    def id(self) -> str:
        return digest_id({"settings": self.settings, "ranks": self.ranks})

    def to_record(self) -> dict:
        """What a configuration's record says of what made it (its grids, names and times besides)."""
        return {"id": self.id, "settings": self.settings, "ranks": dict(sorted(self.ranks.items()))}

    @classmethod
    def from_record(cls, record: dict) -> "ConfigurationRecord":
        return cls(record["settings"], record["ranks"])

    @staticmethod
    def unrecorded_id(settings: dict | None) -> str:
        """The id the report gives the cells of `settings` that no record claims (made before run-directory format
        2): the digest of their settings ("unrecorded" for rows without settings, before results schema v5)."""
        return "unrecorded" if settings is None else digest_id(settings)


@dataclass(frozen=True)
class CellRecord:
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

    @property
    def id(self) -> str:
        return config_hash(self.to_record())

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


#: the record type of each kind stored in a file of its own (a cell's is a column of its results row)
KINDS = {kind.kind: kind for kind in (ModelRecord, RankStoreRecord, ConfigurationRecord)}
