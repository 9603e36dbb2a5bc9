"""Rank store: per-method, per-split attribution ranks on disk, written chunk by chunk, resumable, verified
as they are read.

The package by job: .layout (the files of a store, its manifest, the chunk checksum), .writer
(RankWriter: chunk by chunk, durable, resumable), .record (RankRecord: a complete store read back, every
chunk checked as it is read), .index (RankStore: the stores under one root; a run directory's is
RunDir.rank_store).
"""

import importlib

from roarfast.records.ranks import FORMAT, MANIFEST
from roarfast.store.layout import CHECKSUM, MAPS, MAPS_DTYPE, RANK_DTYPES, RANKS, SPLITS

#: the classes that read and write ranks, each imported when first asked for: they load torch, and the run
#: directory's records (`roarfast ls`, `prune`) read the layout's manifests without it
_LAZY = {"RankRecord": "roarfast.store.record", "RankStore": "roarfast.store.index", "RankWriter": "roarfast.store.writer"}

__all__ = ["CHECKSUM", "FORMAT", "MANIFEST", "MAPS", "MAPS_DTYPE", "RANKS", "RANK_DTYPES", "SPLITS", "RankRecord",
           "RankStore", "RankWriter"]


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
