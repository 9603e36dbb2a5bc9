"""CIFAR-10 (JPEG q75) on a GPU machine that cannot see ../shared: a pack small enough to travel with the
tree, then GPU JPEG decoding checked against the CPU path and one fastnet-gpu training on the real images.

    python benchmarks/cifar_gpu.py pack --jpeg-dir ../shared/data/cifar10-jpeg --out .device-data   (here)
    python benchmarks/cifar_gpu.py run --pack .device-data --out DIR [--epochs 10,20]               (GPU machine)

pack: every file's bytes in roarfast's listing order (train, then test; roarfast.data.imagefolder.list_tree),
zlib-compressed in one npz (the 60,000 files share their JPEG tables: 55 MB -> 24.6 MB). Beside them,
what roarfast's CPU path (DALI's CPU decoder, else PIL and torchvision; canvas 32/32) makes of them: a 64-bit
hash of every canvas and the full canvases of REFERENCE_CANVASES test images. airbench94's published script
(--reference) is copied beside the pack, for benchmarks/gpu_round.py's reference and timing parts.
run: decodes every file with torchvision.io.decode_jpeg on the CPU and batched on the GPU (nvJPEG),
compares both with the CPU path's canvases (identical images; the largest and mean level differences),
times both decoders against torchvision ImageFolder + DataLoader on the same files written to disk,
then trains fastnet-gpu (its default GPU recipe, bf16) on the canvases of the CPU path: test accuracy
and the synchronized seconds of each training, plus one ROAR cell (random ranks, 50%) with the mean fill
and with ROAD's imputation fill, for the cost of masking and of the fill. Writes DIR/cifar.json and DIR/cifar.md.
"""

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

PACK = "cifar10-jpeg.npz"
REFERENCE_CANVASES = 2000  # full CPU-path canvases carried for the level comparison (6 MB)
DECODE_BATCH = 1024  # images per batched GPU decode call
LOADER_WORKERS = 16  # the GPU machine's cores, for the ImageFolder + DataLoader baseline


def sync(device: str) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def canvas_hash(canvas: np.ndarray) -> int:
    """64-bit hash of one uint8 canvas's bytes (C, H, W order)."""
    return int.from_bytes(hashlib.blake2b(np.ascontiguousarray(canvas).tobytes(), digest_size=8).digest(), "little")


def pack(jpeg_dir: Path, out: Path) -> None:
    from roarfast.data.builtin.imagefolder import load_imagefolder
    from roarfast.data.imagefolder import list_tree

    classes, files, labels, is_test = None, [], [], []
    for split in ("train", "test"):
        classes, names, split_labels = list_tree(jpeg_dir / split, classes)
        files += [jpeg_dir / split / name for name in names]
        labels += split_labels
        is_test += [split == "test"] * len(names)
    blobs = [path.read_bytes() for path in files]
    offsets = np.cumsum([0] + [len(b) for b in blobs]).astype(np.int64)
    train, test = load_imagefolder(jpeg_dir, resize=32, crop=32, device="cpu", stream=False, test_split="test")
    canvases = torch.cat([train.images, test.images]).numpy()
    n_train = len(train)
    reference = np.linspace(n_train, len(files) - 1, REFERENCE_CANVASES).round().astype(np.int64)
    out.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(out / PACK, jpeg=np.frombuffer(b"".join(blobs), dtype=np.uint8), offsets=offsets,
                        labels=np.array(labels, dtype=np.int64), is_test=np.array(is_test), classes=np.array(classes),
                        canvas_hash=np.array([canvas_hash(c) for c in canvases], dtype=np.uint64),
                        reference_index=reference, reference_canvas=canvases[reference])
    print(f"{len(files)} files ({offsets[-1] / 1e6:.1f} MB) -> {out / PACK} "
          f"({(out / PACK).stat().st_size / 1e6:.1f} MB)")


def load_pack(folder: Path) -> dict:
    data = np.load(folder / PACK)
    return {key: data[key] for key in data.files}


def encoded(data: dict) -> list[torch.Tensor]:
    """One uint8 Tensor of file bytes per image."""
    jpeg, offsets = torch.from_numpy(data["jpeg"]), data["offsets"]
    return [jpeg[offsets[i]:offsets[i + 1]] for i in range(len(offsets) - 1)]


def decode_cpu(files: list[torch.Tensor]) -> tuple[torch.Tensor, float]:
    from torchvision.io import ImageReadMode, decode_jpeg

    start = time.perf_counter()
    images = torch.stack(decode_jpeg(files, mode=ImageReadMode.RGB))
    return images, time.perf_counter() - start


def decode_gpu(files: list[torch.Tensor]) -> tuple[torch.Tensor, float]:
    """All files decoded by nvJPEG in batches of DECODE_BATCH; seconds of the timed pass after one warm-up."""
    from torchvision.io import ImageReadMode, decode_jpeg

    def once():
        return torch.cat([torch.stack(decode_jpeg(files[i:i + DECODE_BATCH], mode=ImageReadMode.RGB, device="cuda"))
                          for i in range(0, len(files), DECODE_BATCH)])

    once()
    torch.cuda.synchronize()
    start = time.perf_counter()
    images = once()
    torch.cuda.synchronize()
    return images.cpu(), time.perf_counter() - start


def imagefolder_baseline(data: dict, files: list[torch.Tensor], root: Path) -> float:
    """Seconds of one pass of torchvision ImageFolder + DataLoader (LOADER_WORKERS workers, PIL decode,
    PILToTensor) over the same files written out as a tree; one untimed pass first."""
    from torchvision import datasets, transforms

    classes = [str(c) for c in data["classes"]]
    for i, blob in enumerate(files):
        folder = root / classes[data["labels"][i]]
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{i:05d}.jpg").write_bytes(blob.numpy().tobytes())
    dataset = datasets.ImageFolder(str(root), transform=transforms.PILToTensor())
    loader = torch.utils.data.DataLoader(dataset, batch_size=DECODE_BATCH, num_workers=LOADER_WORKERS)
    for _ in loader:
        pass
    start = time.perf_counter()
    for _ in loader:
        pass
    return time.perf_counter() - start


def level_differences(a: torch.Tensor, b: torch.Tensor) -> dict:
    """How two stacks of uint8 canvases differ: identical images, largest and mean absolute level gap."""
    gap = (a.to(torch.int16) - b.to(torch.int16)).abs()
    return dict(images=int(a.shape[0]), identical_images=int((gap.flatten(1).amax(1) == 0).sum()),
                max_level_gap=int(gap.max()), mean_level_gap=float(gap.float().mean()),
                share_of_levels_differing=float((gap > 0).float().mean()))


def parse_variants(text: str) -> list[dict]:
    """"lr=0.4;weight_decay=5e-5,momentum=0.85" -> [{"lr": 0.4}, {"weight_decay": 5e-05, "momentum": 0.85}]:
    Recipe fields to override, one training each; "none" -> None, ints stay ints."""
    from roarfast.recipe import Recipe

    defaults = Recipe()
    variants = []
    for part in filter(None, text.split(";")):
        changes = {}
        for item in part.split(","):
            key, value = item.split("=")
            kind = int if isinstance(getattr(defaults, key), int) else float
            changes[key] = None if value == "none" else kind(value)
        variants.append(changes)
    return variants


def train_runs(data: dict, canvases: torch.Tensor, epochs_list: list[int], seeds: int,
               variants: list[dict] = (), device: str = "cuda") -> list[dict]:
    from roarfast import ops
    from roarfast.data.base import ImageSet, make_dataset
    from roarfast.recipe import effective_recipe
    from roarfast.stages.basemodel import TrainOptions
    from roarfast.train import Masking, train_classifier

    classes = [str(c) for c in data["classes"]]
    labels = torch.from_numpy(data["labels"])
    test = torch.from_numpy(data["is_test"])
    split = {name: ImageSet(images=canvases[rows], labels=labels[rows], masks=None, classes=classes)
             for name, rows in (("train", ~test), ("test", test))}
    ds = make_dataset("cifar10-jpeg-q75", split["train"], split["test"], {"canvas": 32})
    rows = []

    def timed(epochs, seed, masking=None, changes=None):
        recipe = effective_recipe("fastnet-gpu", device, ds, TrainOptions(epochs=epochs, recipe=changes))
        sync(device)
        start = time.perf_counter()
        result = train_classifier(ds, "fastnet-gpu", recipe, device, seed=seed, masking=masking, progress=False)
        sync(device)
        fill = None if masking is None else masking.fill or "dataset-mean"
        rows.append(dict(epochs=epochs, seed=seed, masked=masking is not None, fill=fill,
                         seconds=time.perf_counter() - start,
                         test_acc=result.test_acc, val_acc=result.val_acc, best_epoch=result.best_epoch,
                         batch_size=recipe.batch_size, lr=recipe.lr, amp=recipe.amp, train_images=len(ds.train_index),
                         changes=changes or {}))
        print(f"fastnet-gpu {epochs} epochs seed {seed}{f' ROAR 50% random, fill {fill}' if masking else ''} "
              f"{changes or ''}: "
              f"test {result.test_acc:.2%} in {rows[-1]['seconds']:.2f} s", flush=True)

    timed(1, 99)  # warm-up: CUDA context, cuDNN autotuning; not reported
    rows.clear()
    for epochs in epochs_list:
        for seed in range(seeds):
            timed(epochs, seed)
    ranks = [ops.rank(torch.rand(len(part), 32, 32, generator=torch.Generator().manual_seed(s)))
             for s, part in enumerate((ds.train, ds.test))]
    timed(epochs_list[0], 0, Masking(train_ranks=ranks[0], test_ranks=ranks[1], fraction=0.5))
    # the same cell with ROAD's imputation fill (target: at most 1.3x the mean fill's time)
    timed(epochs_list[0], 0, Masking(train_ranks=ranks[0], test_ranks=ranks[1], fraction=0.5, fill="road"))
    for changes in variants:  # recipe variants, seed 0, the first epoch count
        timed(epochs_list[0], 0, changes=changes)
    return rows


def run(pack_dir: Path, out: Path, epochs_list: list[int], seeds: int, variants: list[dict] = ()) -> None:
    out.mkdir(parents=True, exist_ok=True)
    data = load_pack(pack_dir)
    files = encoded(data)
    n = len(files)
    cpu, cpu_s = decode_cpu(files)
    gpu, gpu_s = decode_gpu(files)
    folder_s = imagefolder_baseline(data, files, out / "tree")
    cpu_hash_equal = int(sum(canvas_hash(c) == int(h) for c, h in zip(cpu.numpy(), data["canvas_hash"])))
    gpu_hash_equal = int(sum(canvas_hash(c) == int(h) for c, h in zip(gpu.numpy(), data["canvas_hash"])))
    reference = torch.from_numpy(data["reference_canvas"])
    chosen = torch.from_numpy(data["reference_index"])
    decode = dict(
        images=n,
        torchvision_cpu_images_per_s=n / cpu_s, nvjpeg_batched_images_per_s=n / gpu_s,
        imagefolder_dataloader_images_per_s=n / folder_s, dataloader_workers=LOADER_WORKERS,
        cpu_equal_to_roarfast_cpu_path=cpu_hash_equal, gpu_equal_to_roarfast_cpu_path=gpu_hash_equal,
        gpu_vs_roarfast_cpu_path=level_differences(gpu[chosen], reference),
        gpu_vs_torchvision_cpu=level_differences(gpu, cpu),
    )
    print(json.dumps(decode, indent=1), flush=True)
    # train on the CPU path's canvases (what roarfast's imagefolder loader gives), when the CPU decode is them
    canvases = cpu if cpu_hash_equal == n else gpu
    training = train_runs(data, canvases, epochs_list, seeds, variants)
    meta = dict(device=torch.cuda.get_device_name(0), torch=torch.__version__,
                date=time.strftime("%Y-%m-%d", time.gmtime()),
                trained_on="torchvision CPU decode (= roarfast CPU path)" if canvases is cpu else "nvJPEG decode")
    (out / "cifar.json").write_text(json.dumps(dict(meta=meta, decode=decode, training=training), indent=1) + "\n")
    g = decode["gpu_vs_roarfast_cpu_path"]
    lines = [f"{meta['device']}, torch {meta['torch']}, {meta['date']}; CIFAR-10 (JPEG q75), {n} files",
             "", "| decoder | images/s | vs ImageFolder + DataLoader |", "| --- | ---: | ---: |",
             f"| ImageFolder + DataLoader ({LOADER_WORKERS} workers, PIL) | {n / folder_s:,.0f} | 1.00x |",
             f"| torchvision decode_jpeg, CPU, one thread | {n / cpu_s:,.0f} | {folder_s / cpu_s:.2f}x |",
             f"| torchvision decode_jpeg, GPU (nvJPEG), batches of {DECODE_BATCH} | {n / gpu_s:,.0f} | "
             f"{folder_s / gpu_s:.2f}x |", "",
             f"Canvases equal to roarfast's CPU path (DALI CPU): torchvision CPU {cpu_hash_equal}/{n}, "
             f"nvJPEG {gpu_hash_equal}/{n}; nvJPEG vs the CPU path on {g['images']} test canvases: "
             f"{g['identical_images']} identical, largest level gap {g['max_level_gap']}, mean "
             f"{g['mean_level_gap']:.3f}, {g['share_of_levels_differing']:.1%} of levels differ.", "",
             f"Training on {meta['trained_on']}:", "",
             "| run | epochs | seed | batch | test acc | seconds |", "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for r in training:
        name = f"ROAR 50% random, fill {r['fill']}" if r["masked"] else "unmodified"
        if r["changes"]:
            name += " (" + ", ".join(f"{k}={v}" for k, v in r["changes"].items()) + ")"
        lines.append(f"| {name} | {r['epochs']} | {r['seed']} | {r['batch_size']} | {r['test_acc']:.2%} | "
                     f"{r['seconds']:.2f} |")
    (out / "cifar.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("pack", help="here: the tree -> a compressed pack with the CPU path's canvases")
    p.add_argument("--jpeg-dir", type=Path, default=Path("../shared/data/cifar10-jpeg"))
    p.add_argument("--out", type=Path, default=Path(".device-data"))
    p.add_argument("--reference", type=Path, default=Path("../shared/reference/airbench94/airbench94.py"),
                   help="airbench94's published script, copied beside the pack")
    r = sub.add_parser("run", help="on the GPU machine: decode, compare, train")
    r.add_argument("--pack", type=Path, default=Path(".device-data"))
    r.add_argument("--out", type=Path, default=Path("gpu-results/cifar"))
    r.add_argument("--epochs", default="10", help="comma-separated epoch counts of the unmodified trainings")
    r.add_argument("--seeds", type=int, default=2, help="trainings per epoch count")
    r.add_argument("--variants", default="", help="recipe variants trained once each at the first epoch count: "
                   "'lr=0.4;weight_decay=5e-5,momentum=0.85'")
    args = parser.parse_args(argv)
    if args.command == "pack":
        if not args.jpeg_dir.is_dir():
            raise SystemExit(f"no CIFAR-10 JPEG tree at {args.jpeg_dir} (skipped)")
        pack(args.jpeg_dir, args.out)
        if not args.reference.is_file():
            raise SystemExit(f"no airbench94 script at {args.reference}: pass --reference")
        (args.out / "airbench94.py").write_bytes(args.reference.read_bytes())
    else:
        run(args.pack, args.out, [int(e) for e in args.epochs.split(",")], args.seeds, parse_variants(args.variants))


if __name__ == "__main__":
    main()
