"""The record kind of a dataset a run directory used: `datasets/<fp>.json` (fp: the first DATASET_CHARS hex of its
fingerprint), what later commands load it from and a dry run shows without loading it (its name, absolute
data_dir, options, fingerprint, canvas, image counts: RunDir.remember_dataset), sealed with its digest. Its id is
the data's fingerprint, which the data digested as it was loaded; read back only when it records that data."""

import re
from dataclasses import dataclass

from roarfast.errors import UserError
from roarfast.records.kind import Record

#: the format of a dataset record and of stages.json: 2 since they are sealed with their digest (1: before)
RECORD_FORMAT = 2
#: the characters of a dataset fingerprint that name its record in datasets/
DATASET_CHARS = 16


@dataclass(frozen=True)
class DatasetRecord(Record):
    """The data of `fingerprint` (its record's other fields describe how to load it)."""

    fingerprint: str

    kind = "dataset"
    what = "data"
    format = RECORD_FORMAT
    repair = "restore it, or name the dataset again (--dataset, --data-dir, --data-option)"
    #: the folder of the dataset records
    folder = "datasets"

    @property
    def id(self) -> str:
        return self.fingerprint

    def to_record(self) -> dict:
        return {"fingerprint": self.fingerprint}

    @classmethod
    def from_record(cls, stored: dict) -> "DatasetRecord":
        return cls(stored["fingerprint"])

    @classmethod
    def place(cls, record_id=None, where=None) -> tuple:
        # a fingerprint read from a record names a file only when it is hex (never "../x")
        if not (isinstance(record_id, str) and re.fullmatch(r"[0-9a-f]{16,128}", record_id)):
            raise UserError(f"{where}: the dataset fingerprint {str(record_id)[:40]!r} a record gives is not a "
                            f"digest: the record was edited or damaged; restore it, or remove it")
        return cls.folder, f"{record_id[:DATASET_CHARS]}.json"

    @classmethod
    def names_it(cls, path, stored: dict, record_id: str) -> bool:
        return path.stem == record_id[:DATASET_CHARS]

    @staticmethod
    def older(stored: dict) -> bool:
        return "format" not in stored
