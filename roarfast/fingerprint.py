"""Stable identities: sha256 of a file's bytes and of a configuration's canonical JSON.

The rank store and the results database both key their records on these, so a value must not
depend on dict order, on the Python version, or on whether a sequence was a tuple or a list.
"""

import hashlib
import json
import math
from pathlib import Path

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
