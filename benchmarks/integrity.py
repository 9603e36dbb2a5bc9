"""What verifying every stored byte costs a reader (README, "Integrity"): each record read verified, as
roarfast reads it, against the same bytes read without the checks, best of 7, files in the page cache.

- results.sqlite of ROWS rows (a paper grid is ~1,400 cells): opened read-only (the report, results.load)
  and for writing, every row read; unverified: the same calls with the row digests and SQLite's integrity
  check switched off.
- a base checkpoint (fastnet-gpu, the GPU default, and resnet18): load_checkpoint (meta.json's digest, the
  weights' sha256) against meta.json parsed and the weights loaded as roarfast did before digests; and the
  checkpoint hash every rank read stamps with (checkpoint_sha256: the file's sha256 plus meta.json
  verified, against the file's sha256 alone).
- a CIFAR-sized rank store (10,000 x 32 x 32 uint16, 20 MiB): RankStore.read + tensor (the manifest's
  digest, every chunk's checksum and range) against the manifest parsed and ranks.npy read.

    python benchmarks/integrity.py
"""

import json
import platform
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

ROWS = 2000
REPEATS = 25


def line(what: str, verified, unverified) -> None:
    """One row: the best of REPEATS calls of each, taken in turns (a shared machine's load drifts alike for
    both), after one call of each."""
    best = {verified: float("inf"), unverified: float("inf")}
    for func in best:
        func()
    for _ in range(REPEATS):
        for func in best:
            started = time.perf_counter()
            func()
            best[func] = min(best[func], time.perf_counter() - started)
    print(f"| {what} | {best[unverified] * 1e3:.2f} ms | {best[verified] * 1e3:.2f} ms | "
          f"{best[verified] / best[unverified]:.2f}x |")


def results(root: Path) -> None:
    from roarfast.measurements import db
    from roarfast.results import RETRAIN, MeasurementKey, ResultsDB

    path = root / "results.sqlite"
    with ResultsDB(path) as out:
        for i in range(ROWS):  # a grid's rows: 14 methods x 10 fractions x seeds, with configs and versions
            key = MeasurementKey.of(kind=RETRAIN, dataset="cifar10", model="fastnet-gpu", method=f"m{i % 14}",
                                    mode="roar", fill="dataset-mean", fraction=(i % 10 + 1) / 10, seed=i // 140,
                                    config={"recipe": {"epochs": 16, "lr": 0.05, "batch_size": 512},
                                            "ranks": {"method": f"m{i % 14}", "samples": 15}, "fill": "dataset-mean"})
            out.record(key, {"test_acc": 0.5 + i / 1e4, "val_acc": 0.4, "epochs": 16, "seconds": 12.5, "threads": 2,
                             "test_images": 10000, "test_chance": 0.1})

    def read(readonly, verified):
        saved = db.check_integrity, db.ResultsDB._verified
        if not verified:
            db.check_integrity, db.ResultsDB._verified = (lambda conn, path: None), (lambda self, row: row)
        try:
            with ResultsDB(path, readonly=readonly) as opened:
                return opened.rows()
        finally:
            db.check_integrity, db.ResultsDB._verified = saved

    size = path.stat().st_size / 2**20
    line(f"results.sqlite, {ROWS} rows ({size:.1f} MiB), opened read-only + every row", lambda: read(True, True),
         lambda: read(True, False))
    line(f"results.sqlite, {ROWS} rows, opened for writing + every row", lambda: read(False, True),
         lambda: read(False, False))


def checkpoints(root: Path) -> None:
    from safetensors.torch import load_file

    from roarfast.records.checkpoint import checkpoint_sha256, load_checkpoint, recorded_model, save_checkpoint
    from roarfast.common.fingerprint import sha256_file
    from roarfast.models import build_model

    for name in ("fastnet-gpu", "resnet18"):
        directory = root / name
        meta = {"model": name, "num_classes": 10, "image_size": 32, "in_channels": 3, "test_acc": 0.935}
        save_checkpoint(directory, build_model(name, 10), meta)

        def unverified(d=directory):
            meta = json.loads((d / "meta.json").read_text())
            model = recorded_model(meta, d).build(meta["num_classes"], meta["image_size"], meta["in_channels"])
            model.load_state_dict(load_file(str(d / "model.safetensors")), strict=True)
            return model.eval()

        size = (directory / "model.safetensors").stat().st_size / 2**20
        line(f"checkpoint {name} ({size:.1f} MiB), loaded", lambda d=directory: load_checkpoint(d), unverified)
        line(f"checkpoint {name}, its hash for a rank read", lambda d=directory: checkpoint_sha256(d),
             lambda d=directory: sha256_file(d / "model.safetensors"))


def rank_store(root: Path) -> None:
    from roarfast.stages.extract import CHUNK_IMAGES
    from roarfast.store import RankStore

    rng = np.random.default_rng(0)
    ranks = np.stack([rng.permutation(1024).astype(np.uint16).reshape(32, 32) for _ in range(10000)])
    store = RankStore(root / "attributions")
    writer = store.open_writer("sg-sq", "train", shape=ranks.shape, dtype="uint16", chunk_size=CHUNK_IMAGES,
                               params={"samples": 15, "noise_level": 0.15}, checkpoint_sha256="c" * 64,
                               dataset_fingerprint="d" * 64)
    for i in range(writer.num_chunks):
        writer.write_chunk(i, ranks[i * CHUNK_IMAGES:(i + 1) * CHUNK_IMAGES])
    writer.close()
    directory = store.path("sg-sq", "train")

    def unverified():
        json.loads((directory / "manifest.json").read_text())
        return torch.from_numpy(np.array(np.load(directory / "ranks.npy", mmap_mode="r")))

    line(f"rank store {ranks.shape[0]} x 32 x 32 uint16 ({ranks.nbytes / 2**20:.0f} MiB), read whole",
         lambda: store.read("sg-sq", "train").tensor(), unverified)
    line("rank store manifest alone", lambda: store.manifest("sg-sq", "train"),
         lambda: json.loads((directory / "manifest.json").read_text()))


def main():
    cpu = next((entry.split(":", 1)[1].strip() for entry in Path("/proc/cpuinfo").read_text().splitlines()
                if entry.startswith("model name")), platform.processor())
    print(f"{cpu}, {torch.get_num_threads()} threads, torch {torch.__version__}, python {platform.python_version()}")
    print("| read | unverified | verified | ratio |\n|---|---|---|---|")
    with tempfile.TemporaryDirectory() as root:
        results(Path(root))
        checkpoints(Path(root))
        rank_store(Path(root))


if __name__ == "__main__":
    main()
