"""The identities of a run directory's artifacts: each is the first ID_CHARS hex of the sha256 of the canonical
JSON of what made it, so an artifact made again from the same things has the same id (it is reused), and one
made from anything else has another (it is kept beside the first, never over it).

- a base model: its dataset's fingerprint (a subset included), the model's name and source hash, the effective
  recipe as recorded, the seed: all in its meta.json, so the id of a checkpoint is read off its meta. A base model
  adopted from trained weights (`train --weights`): its data, model and the digest of its weights, no recipe.
- a rank store: the method, its ranks' provenance (parameters and arguments, code, seed and the keying of its
  draws where it draws random numbers, granularity, reduction), the sha256 of the base checkpoint it explained (None for a model-free
  method), the dataset's fingerprint: all in its manifest.
- a configuration: its cells' shared settings (roarfast.rundir.configurations.settings_of) and the rank id of
  each of its methods.
"""

import hashlib
import re

from roarfast.common.fingerprint import canonical_json
from roarfast.errors import UserError

#: hex characters of an id: 64 bits, ample for the artifacts of one run directory
ID_CHARS = 16
#: the hex characters of an id that a label or a line shows
SHOWN_CHARS = 8
#: the form of every id: a path made from a record's text is made only from this (never "../x")
_ID_FORM = re.compile(rf"[0-9a-f]{{{ID_CHARS}}}")


def is_id(text) -> bool:
    """Whether `text` has the form of an id (ID_CHARS lowercase hex)."""
    return isinstance(text, str) and _ID_FORM.fullmatch(text) is not None


def check_id(text, what: str, where) -> str:
    """`text` when it has the form of an id; a UserError naming `what` it should be and the record `where` it
    was read otherwise (a record edited: no path is ever made from it)."""
    if not is_id(text):
        raise UserError(f"{where}: the id of its {what}, {str(text)[:40]!r}, is not an id ({ID_CHARS} hex "
                        f"characters): the record was edited or damaged; restore it, or remove it")
    return text


def digest_id(record) -> str:
    """The id of `record` (JSON-able): ID_CHARS hex of the sha256 of its canonical JSON."""
    return hashlib.sha256(canonical_json(record).encode()).hexdigest()[:ID_CHARS]


def model_id(*, dataset_fingerprint, model, model_source, recipe: dict | None, seed) -> str:
    """The id of the base model trained on the data of `dataset_fingerprint` as `model` (its source hash
    `model_source`: None for a built-in) with the effective `recipe` (Recipe.to_dict) and `seed`."""
    return digest_id({"dataset": dataset_fingerprint, "model": model, "model_source": model_source,
                      "recipe": recipe, "seed": seed})


def adopted_model_id(*, dataset_fingerprint, model, model_source, weights_sha256: str) -> str:
    """The id of the base model `model` (its source hash `model_source`) adopted for the data of
    `dataset_fingerprint` with the weights whose checkpoint file has sha256 `weights_sha256`: nothing was trained,
    so no recipe or seed made it."""
    return digest_id({"dataset": dataset_fingerprint, "model": model, "model_source": model_source,
                      "weights": weights_sha256})


def model_id_of(meta: dict) -> str:
    """The id of the base model whose checkpoint meta is `meta` (roarfast.stages.basemodel.base_meta, or adopted_meta)."""
    adopted = meta.get("adopted")
    if isinstance(adopted, dict):
        return adopted_model_id(dataset_fingerprint=meta.get("dataset_fingerprint"), model=meta.get("model"),
                                model_source=meta.get("model_source_sha256"),
                                weights_sha256=adopted.get("weights_sha256"))
    return model_id(dataset_fingerprint=meta.get("dataset_fingerprint"), model=meta.get("model"),
                    model_source=meta.get("model_source_sha256"), recipe=meta.get("recipe"), seed=meta.get("seed"))


def rank_id(method: str, params: dict, checkpoint_sha256: str | None, dataset_fingerprint: str) -> str:
    """The id of `method`'s ranks with provenance `params` (Selection.ranks_identity), made from the base checkpoint
    of sha256 `checkpoint_sha256` (None: model-free) on the data of `dataset_fingerprint`."""
    return digest_id({"method": method, "params": params, "checkpoint": checkpoint_sha256,
                      "dataset": dataset_fingerprint})


def rank_id_of(manifest: dict) -> str:
    """The id of the rank store whose manifest (any split's) is `manifest`."""
    return rank_id(manifest["method"], manifest["params"], manifest["checkpoint_sha256"],
                   manifest["dataset_fingerprint"])


def configuration_id(settings: dict, ranks: dict) -> str:
    """The id of the configuration of cells sharing `settings` whose methods use the ranks {method: rank id}."""
    return digest_id({"settings": settings, "ranks": ranks})
