"""The record kind of a rank store: its manifest (`ranks/<method>/<id>/<split>/manifest.json`), what the ranks are
(method, params, checkpoint sha256, dataset fingerprint, shape, dtype), how far writing got (chunk size, chunks
done as [start, stop) ranges, complete flag) and the checksum of each chunk's rank bytes, sealed with the sha256
of itself (`record_sha256`, roarfast.common.fingerprint.seal), checked whenever it is read. Its id is the digest of
what made the ranks: the method and their provenance, the base checkpoint's sha256 and the data's. It is written
chunk by chunk by the store's one writer and read by the store's reader (roarfast.store), through the one put
and get; the bounded directory name of a method (`dir_name`) is every place of a store's. The store's other
files are roarfast.store's.
"""

import hashlib
import json
import re
from dataclasses import dataclass

from roarfast.common.atomic import write_record
from roarfast.common.fingerprint import unseal
from roarfast.errors import UserError
from roarfast.records.ids import ID_CHARS, check_id, digest_id, is_id
from roarfast.records.kind import Record
from roarfast.records.paths import check_record_name

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


def repair_command(method: str, run_dir, does: str = "repairs it") -> str:
    """The command that writes `method`'s ranks anew, and what it `does`."""
    where = f" --run-dir {run_dir}" if run_dir is not None else ""
    return f"`roarfast extract --force --method {method}{where}` {does}"


@dataclass(frozen=True)
class RankStoreRecord(Record):
    """The ranks of `method` with provenance `params` (Selection.ranks_identity), made from the base checkpoint of
    sha256 `checkpoint_sha256` (None: a model-free method) on the data of `dataset_fingerprint`."""

    method: str
    params: object
    checkpoint_sha256: object
    dataset_fingerprint: object

    kind = "ranks"
    what = "ranks"
    repair = "extract them again (roarfast extract --force)"
    #: the folder of the rank stores, each in `<method>/<id>/<split>/`
    folder = "ranks"

    @property
    def id(self) -> str:
        return digest_id({"method": self.method, "params": self.params, "checkpoint": self.checkpoint_sha256,
                          "dataset": self.dataset_fingerprint})

    def place_keys(self) -> dict:
        return {"method": self.method}

    def to_record(self) -> dict:
        """What a rank store's manifest (any split's) says of what made it."""
        return {"method": self.method, "params": self.params, "checkpoint_sha256": self.checkpoint_sha256,
                "dataset_fingerprint": self.dataset_fingerprint}

    @classmethod
    def from_record(cls, manifest: dict) -> "RankStoreRecord":
        return cls(manifest["method"], manifest["params"], manifest["checkpoint_sha256"],
                   manifest["dataset_fingerprint"])

    @classmethod
    def place(cls, record_id=None, where=None, method=None, split="train") -> tuple:
        return cls.folder, dir_name(method), check_id(record_id, f"ranks of {method}", where), split, MANIFEST

    @classmethod
    def names_it(cls, path, stored: dict, record_id: str) -> bool:
        # its store's folder, `<id>/` above its split (format 1's attributions/<method>/<split> names none)
        return not is_id(path.parent.parent.name) or path.parent.parent.name == record_id

    @classmethod
    def write(cls, path, stored: dict, **payload) -> None:
        """Replaces the manifest at `path` by `stored` (in FORMAT, set in it: the writer keeps it), atomically."""
        stored["format"] = FORMAT
        write_record(path, stored)

    @classmethod
    def read(cls, path, repair: str, run_dir) -> dict | None:
        """The manifest at `path` (`<method>/<split>`, or in a run directory `<method>/<rank id>/<split>`), or None
        when there is none; a UserError naming it and the repair (`extract --force`, its run directory `run_dir`)
        when it is not JSON, does not match its digest, or is of another format. A manifest of UNSEALED_FORMAT
        (written before digests) is read unverified, with a note."""
        try:
            text = path.read_text()
        except FileNotFoundError:
            return None
        store = path.parent.parent
        method_dir = store.parent if re.fullmatch(rf"[0-9a-f]{{{ID_CHARS}}}", store.name) else store
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
        # a store's method is its folder's (the place every reader, listing and prune takes it from), one name
        check_record_name(method, "method", path, repair)
        if dir_name(method) != method_dir.name or manifest.get("split", path.parent.name) != path.parent.name:
            raise UserError(f"{path} names the ranks of {method[:60]!r} (split {manifest.get('split')!r}), not those "
                            f"its place names ({method_dir.name}, split {path.parent.name!r}): moved or edited; {repair}")
        return manifest

    @classmethod
    def mismatch(cls, path, record_id, gives, repair: str) -> str:
        if record_id is None:
            return super().mismatch(path, record_id, gives, repair)
        return (f"{path.parent} does not hold the ranks {record_id} its place names (its manifest gives {gives}): "
                f"moved or edited; {repair}")
