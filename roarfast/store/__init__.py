"""Rank store: per-method, per-split attribution ranks on disk, written chunk by chunk, resumable, verified
as they are read.

The package by job: .layout (the files of a store, its manifest, the chunk checksum), .writer
(RankWriter: chunk by chunk, durable, resumable), .record (RankRecord: a complete store read back, every
chunk checked as it is read), .index (RankStore: the stores under one root; a run directory's is
RunDir.rank_store).
"""

from roarfast.store.index import RankStore
from roarfast.store.layout import CHECKSUM, FORMAT, MANIFEST, MAPS, MAPS_DTYPE, RANK_DTYPES, RANKS, SPLITS
from roarfast.store.record import RankRecord
from roarfast.store.writer import RankWriter

__all__ = ["CHECKSUM", "FORMAT", "MANIFEST", "MAPS", "MAPS_DTYPE", "RANKS", "RANK_DTYPES", "SPLITS", "RankRecord",
           "RankStore", "RankWriter"]
