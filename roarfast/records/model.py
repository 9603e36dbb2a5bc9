"""The record kind of a base model: `models/<id>/meta.json`, written beside its weights (roarfast.records.checkpoint:
model.safetensors, the meta sealed with its digest and the weights'), read back verified. Its id is the digest of
what made it: its data's fingerprint, the model and its source hash, the effective recipe and seed; or, adopted
(`train --weights`), the digest of its weights instead (roarfast.records.ids).
"""

from dataclasses import dataclass

from roarfast.records.checkpoint import META, read_meta, save_checkpoint
from roarfast.records.ids import check_id, digest_id, is_id
from roarfast.records.kind import Record


@dataclass(frozen=True)
class ModelRecord(Record):
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
    repair = "retrain the base model (`roarfast train --run-dir {run_dir}`) or restore the file"
    #: the folder of the base models, each in `<id>/`
    folder = "models"

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

    @classmethod
    def place(cls, record_id=None, where=None) -> tuple:
        return cls.folder, check_id(record_id, cls.what, where), META

    @classmethod
    def names_it(cls, path, stored: dict, record_id: str) -> bool:
        # its folder's name (format 1's checkpoints/base names none)
        return not is_id(path.parent.name) or path.parent.name == record_id

    @classmethod
    def write(cls, path, stored: dict, model=None) -> None:
        """The weights of `model` and the meta `stored` (with their digest) into the folder of `path`."""
        save_checkpoint(path.parent, model, stored)

    @classmethod
    def read(cls, path, repair: str, run_dir) -> dict | None:
        return read_meta(path.parent, repair) or None

    @classmethod
    def mismatch(cls, path, record_id, gives, repair: str) -> str:
        if record_id is None:
            return super().mismatch(path, record_id, gives, repair)
        return (f"{path} does not describe the base model {record_id} (its record gives the id {gives}): the "
                f"directory was renamed or the record edited; {repair}")


def adopted_text(adopted: dict, digits: int | None = None) -> str:
    """"adopted weights FILE (sha256 DIGEST), not trained here": a base model of weights trained elsewhere (its meta's
    `adopted` record), as every listing, plan and report names it; `digits`: the digest's first digits (None: all)."""
    return f"adopted weights {adopted['file']} (sha256 {adopted['file_sha256'][:digits]}), not trained here"
