"""One record type per artifact kind of a run directory, and the one way they are written and read back.

A record type holds the fields that define its artifact and nothing else; it yields the artifact's id (`.id`:
roarfast.rundir.ids.digest_id of those fields, the one digest) and the part of the stored record that says
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

`Records` (RunDir.records) is the one `put` and the one verifying `get` of these stored records: `get` checks
the id's form, that it is the file's name, and that the record digests to it, and says what is wrong in one
line naming the file (a UserError) otherwise.
"""

from dataclasses import dataclass
from pathlib import Path

from roarfast.common.atomic import refuse_link, write_record
from roarfast.common.fingerprint import config_hash, read_record
from roarfast.errors import UserError
from roarfast.rundir.checkpoint import META, read_meta, save_checkpoint
from roarfast.rundir.head import FORMAT
from roarfast.rundir.ids import check_id, digest_id, is_id
from roarfast.store.layout import MANIFEST, read_manifest


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
#: the repair of a damaged configuration record
CONFIGURATION_REPAIR = "restore it, or remove it: its cells stay in results.sqlite and the next request records it again"


class Records:
    """The stored records of RunDir `run`: the one `put`, the one verifying `get`."""

    def __init__(self, run):
        self.run = run

    def path(self, kind: str, record_id: str, method: str | None = None, split: str = "train") -> Path:
        """Where the record of `kind` with id `record_id` is stored (a rank store's: `method`'s, of `split`)."""
        if kind == ModelRecord.kind:
            return self.run.model_path(record_id) / META
        if kind == RankStoreRecord.kind:
            return self.run.rank_path(method, record_id) / split / MANIFEST
        if kind == ConfigurationRecord.kind:
            return self.run.configuration_path(record_id)
        raise ValueError(f"no record kind {kind!r}: one of {', '.join(KINDS)}")

    def put(self, record, stored: dict, model=None) -> str:
        """Writes `stored`, the record of the artifact `record` (a record type of KINDS) says, in its place,
        atomically (a base model's with its weights, `model`); returns the id. `stored` must say what `record`
        holds: what is written is what a `get` reads back."""
        kind = type(record)
        if kind.from_record(stored) != record or stored.get("id", record.id) != record.id:
            raise ValueError(f"the {kind.what} record to write does not say what made {record.id}")
        if kind is ModelRecord:
            save_checkpoint(self.run.model_dir(record.id), model, stored)
        elif kind is ConfigurationRecord:
            self.run.configurations_root.mkdir(parents=True, exist_ok=True)
            write_record(self.run.configuration_path(record.id), {**stored, "format": FORMAT})
        else:  # a rank store's manifest is written chunk by chunk by the store's one writer (roarfast.store)
            raise ValueError(f"{kind.what} are written by their store's writer")
        return record.id

    def get(self, kind: str, record_id: str, method: str | None = None, split: str = "train",
            path: Path | None = None, repair: str | None = None) -> dict | None:
        """The stored record of `kind` with id `record_id` (a rank store's: `method`'s manifest of `split`; `path`:
        where it was found, else its place), verified: the id of an id's form, its file's name (its folder's for a
        base model or a rank store), and the digest of what the record says; None when there is none. A UserError
        naming the file, and `repair`, when the record is damaged or not the one its name gives."""
        record_type = KINDS[kind]
        if path is None:  # made only from an id of an id's form (rundir.ids.check_id: never "../x")
            path = self.path(kind, record_id, method, split)
        named = path.stem if kind == ConfigurationRecord.kind else (
            path.parent.parent if kind == RankStoreRecord.kind else path.parent).name
        stored = self._read(kind, path, repair)
        if stored is None:
            return None
        try:
            found = record_type.from_record(stored)
        except (KeyError, TypeError, AttributeError):  # a record without the fields that make its id
            found = None
        # its name, where it is one of the id's form (format 1's checkpoints/base is not), the id it says it has
        # (a configuration's), and the digest of what made it: all the one id asked for
        said = {named} if is_id(named) else set()
        said |= {stored["id"]} if kind == ConfigurationRecord.kind else set()
        if found is None or found.id != record_id or said - {record_id}:
            raise UserError(self._mismatch(kind, path, record_id, found, repair))
        return stored

    def _read(self, kind: str, path: Path, repair: str | None) -> dict | None:
        """The sealed record at `path` as its kind reads it (its digest checked), or None when there is none."""
        if kind == ModelRecord.kind:
            return read_meta(path.parent, repair or self.run.train_again) or None
        if kind == RankStoreRecord.kind:
            return read_manifest(path.parent, self.run.root)
        if path.is_symlink():
            raise UserError(f"{path} is a symbolic link; a configuration record is a file of its own: remove it")
        refuse_link(path.parent)  # a link there would make its records another directory's
        record = read_record(path, repair or CONFIGURATION_REPAIR)
        if record is None:
            return None
        if not (isinstance(record, dict) and isinstance(record.get("settings"), dict)
                and isinstance(record.get("ranks"), dict) and isinstance(record.get("grids"), list)):
            raise UserError(f"{path} is not a configuration record; {repair or CONFIGURATION_REPAIR}")
        record.pop("format", None)
        # every id it holds is of an id's form before anything is made of it (a path, a prune)
        check_id(record.get("id"), "configuration", path)
        for method, rid in record["ranks"].items():
            check_id(rid, f"ranks of {method}", path)
        base = (record["settings"].get("config") or {}).get("base")
        if base is not None:
            check_id(base, "base model", path)
        return record

    def _mismatch(self, kind: str, path: Path, record_id: str, found, repair: str | None) -> str:
        """The one line of a record that is not the one its name gives."""
        gives = found.id if found is not None else "none"
        if kind == ModelRecord.kind:
            return (f"{path} does not describe the base model {record_id} (its record gives the id {gives}): the "
                    f"directory was renamed or the record edited; {repair or self.run.train_again}")
        if kind == RankStoreRecord.kind:
            return (f"{path.parent} does not hold the ranks {record_id} its place names (its manifest gives {gives}): "
                    f"moved or edited; {repair or 'extract them again (roarfast extract --force)'}")
        return f"{path} does not describe the configuration its name gives; {repair or CONFIGURATION_REPAIR}"
