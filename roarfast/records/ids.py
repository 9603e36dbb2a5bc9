"""The identities of a run directory's artifacts: each is the first ID_CHARS hex of the sha256 of the canonical
JSON of what made it (`digest_id`, the one digest; what goes into it is each kind's record type:
roarfast.records), so an artifact made again from the same things has the same id (it is reused), and one
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
