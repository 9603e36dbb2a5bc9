"""The checksum of a rank-store chunk (roarfast.store.CHECKSUM): candidate hashes on one chunk of real rank
maps (CHUNK_IMAGES rows of permutations) at CIFAR (32 px) and ImageNet (224 px) canvases, and what
verifying a whole store costs a reader (RankRecord.verify: checksum and range of every chunk, read from the
page cache) against reading its rows.

    python benchmarks/checksums.py
"""

import hashlib
import tempfile
import time
import zlib

import numpy as np
import xxhash

from roarfast.stages.extract import CHUNK_IMAGES
from roarfast.store import RankStore

HASHES = {"xxh3_64": xxhash.xxh3_64_hexdigest, "xxh64": xxhash.xxh64_hexdigest,
          "sha256": lambda b: hashlib.sha256(b).hexdigest(), "blake2b": lambda b: hashlib.blake2b(b).hexdigest(),
          "crc32": zlib.crc32}


def best_of(func, repeats: int = 5) -> float:
    func()
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        func()
        times.append(time.perf_counter() - started)
    return min(times)


def chunk(side: int, rows: int = CHUNK_IMAGES) -> np.ndarray:
    rng = np.random.default_rng(0)
    return np.stack([rng.permutation(side * side).astype(np.uint16).reshape(side, side) for _ in range(rows)])


def main():
    for side in (32, 224):
        ranks = chunk(side)
        data = ranks.tobytes()
        mib = len(data) / 2**20
        cells = [f"{name} {mib / 1024 / best_of(lambda f=func: f(data)):.1f} GiB/s" for name, func in HASHES.items()]
        print(f"{side} px chunk ({ranks.shape[0]} rows, {mib:.1f} MiB): " + ", ".join(cells))
    ranks = np.concatenate([chunk(32)] * 20)  # 10,240 rows: 20 chunks of a CIFAR-sized store
    with tempfile.TemporaryDirectory() as root:
        store = RankStore(root)
        writer = store.open_writer("m", "train", shape=ranks.shape, dtype="uint16", chunk_size=CHUNK_IMAGES, params={},
                                   checkpoint_sha256=None, dataset_fingerprint="f")
        for i in range(writer.num_chunks):
            writer.write_chunk(i, ranks[i * CHUNK_IMAGES:(i + 1) * CHUNK_IMAGES])
        writer.close()
        read = best_of(lambda: np.array(store.read("m", "train").ranks))
        verified = best_of(lambda: store.read("m", "train").tensor())
    print(f"a {ranks.nbytes / 2**20:.0f} MiB store read whole: {read * 1e3:.1f} ms unverified, {verified * 1e3:.1f} ms "
          f"through RankRecord.tensor (every chunk's checksum and range checked)")


if __name__ == "__main__":
    main()
