"""Stable identities: sha256 of a file's bytes and of a configuration's canonical JSON; sealed JSON records.

The rank store and the results database both key their records on these, so a value must not
depend on dict order, on the Python version, or on whether a sequence was a tuple or a list. A sealed
record carries the sha256 of the rest of itself (`seal`), which every reader checks (`unseal`,
`read_record`): one flipped byte is refused, never read as data.
"""

import hashlib
import json
import logging
import math
from pathlib import Path

from roarfast.errors import UserError

log = logging.getLogger(__name__)

_READ_BLOCK = 1 << 20  # 1 MiB reads: large enough to be I/O-bound, small enough to stay cheap in memory


def _canonical(value, where: str):
    """A JSON-ready copy of `value` with tuples as lists; refuses what JSON cannot say exactly."""
    if value is None or isinstance(value, (bool, str, int)):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"config: {where} must be a finite number, got {value!r}")
        return value
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise TypeError(f"config: keys must be str, got {type(key).__name__} {key!r} at {where}")
            out[key] = _canonical(item, f"{where}.{key}")
        return out
    if isinstance(value, (list, tuple)):
        return [_canonical(item, f"{where}[{i}]") for i, item in enumerate(value)]
    raise TypeError(
        f"config: {where} must be None, bool, int, float, str, list, tuple or dict, got {type(value).__name__}"
    )


def canonical_json(config) -> str:
    """`config` as JSON with sorted keys and no whitespace: equal configurations give equal text."""
    return json.dumps(_canonical(config, "config"), sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def config_hash(config: dict) -> str:
    """sha256 hex digest of `canonical_json(config)`."""
    return hashlib.sha256(canonical_json(config).encode("ascii")).hexdigest()


def sha256_file(path) -> str:
    """sha256 hex digest of the bytes of the file at `path`."""
    digest = hashlib.sha256()
    with open(Path(path), "rb") as f:
        for block in iter(lambda: f.read(_READ_BLOCK), b""):
            digest.update(block)
    return digest.hexdigest()


# ------------------------------------------------------------------------------------------ sealed records

#: the field of a JSON record (meta.json, dataset.json, stages.json, a rank store's manifest, a cache record)
#: holding the sha256 of the rest of it, checked by every reader
RECORD_DIGEST = "record_sha256"

#: records read unverified in this process (written before records carried digests; the note is said once)
_NOTED_UNSEALED = set()


def _record_text(record: dict) -> bytes:
    """The canonical text of a JSON record without its digest: sorted keys, no whitespace, floats as Python
    writes them (which read back to the same float), so the writer and every reader hash the same bytes."""
    rest = {key: value for key, value in record.items() if key != RECORD_DIGEST}
    return json.dumps(rest, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode("ascii")


def seal(record: dict) -> dict:
    """`record` as JSON will store it (tuples as lists, other non-JSON values as their str) with RECORD_DIGEST:
    the sha256 of the rest, which `unseal` checks."""
    plain = json.loads(json.dumps(record, default=str))
    plain[RECORD_DIGEST] = hashlib.sha256(_record_text(plain)).hexdigest()
    return plain


def unseal(record: dict, path, repair: str, *, older=None) -> dict:
    """`record` (read from `path`) without its digest, after checking it: a UserError naming the file and the
    `repair` when the digest does not match, or when it is missing from a record that `older(record)` does not
    call one written before digests (None: no record is; the test must use fields only such records lack or
    hold, so that one flipped byte in the digest's name cannot pass a record off as an older one). An older
    record is returned unverified, with a note said once per file."""
    if not isinstance(record, dict):
        raise UserError(f"{path} holds no JSON record (got {type(record).__name__}); {repair}")
    stored = record.get(RECORD_DIGEST)
    if stored is None:
        if older is None or not older(record):
            raise UserError(f"{path} lacks the {RECORD_DIGEST} it was written with (the file changed on disk); "
                            f"{repair}")
        if str(path) not in _NOTED_UNSEALED:
            _NOTED_UNSEALED.add(str(path))
            log.warning("note: %s was written before roarfast recorded digests: it is read unverified", path)
        return dict(record)
    if not isinstance(stored, str) or hashlib.sha256(_record_text(record)).hexdigest() != stored:
        raise UserError(f"{path} does not match the sha256 recorded in it when it was written (the file changed "
                        f"on disk); {repair}")
    return {key: value for key, value in record.items() if key != RECORD_DIGEST}


def read_record(path, repair: str, *, older=None) -> dict | None:
    """The JSON record at `path` checked by `unseal`, or None when there is none; a UserError naming the file
    and the `repair` when it is not JSON."""
    path = Path(path)
    if not path.is_file():
        return None
    try:
        record = json.loads(path.read_bytes())
    except ValueError as err:
        raise UserError(f"{path} is not valid JSON ({err}); {repair}") from None
    return unseal(record, path, repair, older=older)
