"""A rank store's record: its manifest (`<store>/<split>/manifest.json`), what the ranks are (method, params,
checkpoint sha256, dataset fingerprint, shape, dtype), how far writing got (chunk size, chunks done as
[start, stop) ranges, complete flag) and the checksum of each chunk's rank bytes, sealed with the sha256 of itself
(`record_sha256`, roarfast.common.fingerprint.seal), checked whenever it is read; and the bounded directory name
of a method (`dir_name`), which every place of a store is built from. The store's files are roarfast.store's.
"""

import hashlib
import json
import re
from pathlib import Path

from roarfast.common.atomic import write_record
from roarfast.common.fingerprint import unseal
from roarfast.errors import UserError

MANIFEST = "manifest.json"
FORMAT = 2  # manifest format version; bump when its meaning changes (2: sealed with its digest)
#: manifests of this format were written before digests: read unverified, with a note
UNSEALED_FORMAT = 1
#: the longest name (UTF-8 bytes) kept as its own directory name; file systems allow 255
LONGEST_DIR_NAME = 100
#: a longer name's directory: this many of its first characters, "-", HASHED_CHARS hex of its sha256
PREFIX_CHARS, HASHED_CHARS = 60, 16


def dir_name(name: str) -> str:
    """The directory (or file) name of a method, bounded: the name itself up to LONGEST_DIR_NAME bytes, else
    its first PREFIX_CHARS characters and a hash of the whole name (readable, unique, never too long)."""
    if len(name.encode()) <= LONGEST_DIR_NAME:
        return name
    return f"{name[:PREFIX_CHARS]}-{hashlib.sha256(name.encode()).hexdigest()[:HASHED_CHARS]}"


def read_manifest(directory: Path, run_dir=None) -> dict | None:
    """The verified manifest of the store in `directory` (`<root>/<method>/<split>`), or None when there is
    none; a UserError naming it and the repair (`extract --force`, its run directory `run_dir`) when it is not
    JSON, does not match its digest, or is of another format. A manifest of UNSEALED_FORMAT (written before
    digests) is read unverified, with a note."""
    path = directory / MANIFEST
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    # `<method>/<split>`, or in a run directory `<method>/<rank id>/<split>`
    method_dir = directory.parent.parent if re.fullmatch(r"[0-9a-f]{16}", directory.parent.name) else directory.parent
    try:
        manifest = json.loads(text)
    except ValueError as e:
        raise UserError(f"{path} is not valid JSON ({e}); {repair_command(method_dir.name, run_dir)}") from None
    method = manifest.get("method") if isinstance(manifest, dict) else None
    # a long name's directory is bounded (dir_name): the repair names the method the manifest says it holds
    repair = repair_command(method if isinstance(method, str) and dir_name(method) == method_dir.name
                            else method_dir.name, run_dir)
    manifest = unseal(manifest, path, repair, older=lambda record: record.get("format") == UNSEALED_FORMAT)
    if manifest.get("format") not in (UNSEALED_FORMAT, FORMAT):
        raise UserError(f"{path} has format {manifest.get('format')!r}, this roarfast reads formats "
                        f"{UNSEALED_FORMAT} and {FORMAT}")
    return manifest


def write_manifest(directory: Path, manifest: dict) -> None:
    """Replaces the manifest of the store in `directory` by `manifest` (in FORMAT, sealed with its digest),
    atomically (roarfast.common.atomic)."""
    manifest["format"] = FORMAT
    write_record(directory / MANIFEST, manifest)


def repair_command(method: str, run_dir, does: str = "repairs it") -> str:
    """The command that writes `method`'s ranks anew, and what it `does`."""
    where = f" --run-dir {run_dir}" if run_dir is not None else ""
    return f"`roarfast extract --force --method {method}{where}` {does}"
