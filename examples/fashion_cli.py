"""Your model, your data, your estimator on the command line: a FashionMNIST-format dataset written here (the
IDX files torchvision reads), the network and estimator of my_plugins.py by import path, a ROAR/KAR sweep
against random, grad and guided backprop, then the report.

    python examples/fashion_cli.py [--out runs/fashion-cli] [--train 6000 --test 1000 --epochs 3 --seeds 2]

The images: 28x28 grayscale "garments", a striped patch at a random place on noise; the class is the
stripes' angle (5) and frequency (2). About 6 minutes on 2 CPU cores at the defaults.
"""

import argparse
import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
SIDE, PATCH, CLASSES = 28, 12, 10
#: torchvision's file names, under <root>/<Class>/raw/
IDX_FILES = {"train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
             "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")}


def garments(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(uint8 [n, 28, 28] images, uint8 [n] labels): class k's patch has stripes at angle 36 * (k % 5) degrees,
    2 or 4 cycles across it (k < 5 or not), at a random place on a noisy background."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, CLASSES, n).astype(np.uint8)
    images = rng.normal(70, 25, (n, SIDE, SIDE))
    yy, xx = np.mgrid[0:PATCH, 0:PATCH] / PATCH
    for i, label in enumerate(labels):
        angle = np.deg2rad(36 * (label % 5))
        cycles = 2 if label < 5 else 4
        stripes = 110 + 100 * np.sin(2 * np.pi * cycles * (xx * np.cos(angle) + yy * np.sin(angle)))
        top, left = rng.integers(0, SIDE - PATCH + 1, 2)
        images[i, top:top + PATCH, left:left + PATCH] = stripes
    return np.clip(images, 0, 255).astype(np.uint8), labels


def write_idx(path: Path, array: np.ndarray) -> None:
    """A uint8 array in the IDX format (MNIST's): magic 0x08 (unsigned byte) and the rank, the sizes as big-endian
    int32, then the bytes."""
    header = bytes([0, 0, 0x08, array.ndim]) + b"".join(int(d).to_bytes(4, "big") for d in array.shape)
    path.write_bytes(header + np.ascontiguousarray(array, dtype=np.uint8).tobytes())


def write_mnist_format(root: Path, name: str, splits: dict) -> Path:
    """Writes {"train": (images, labels), "test": ...} where torchvision.datasets.<name> (MNIST, FashionMNIST,
    KMNIST) reads them: <root>/<name>/raw/; returns root."""
    raw = root / name / "raw"
    raw.mkdir(parents=True, exist_ok=True)
    for split, (images, labels) in splits.items():
        images_file, labels_file = IDX_FILES[split]
        write_idx(raw / images_file, images)
        write_idx(raw / labels_file, labels)
    return root


def write_fashion(root: Path, train: int, test: int) -> Path:
    return write_mnist_format(root, "FashionMNIST", {"train": garments(train, seed=0), "test": garments(test, seed=1)})


def study_arguments(description: str, out: str, argv=None) -> argparse.Namespace:
    """The study's sizes, the same for both examples (small ones make a quick check)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--out", type=Path, default=Path(out))
    parser.add_argument("--train", type=int, default=6000)
    parser.add_argument("--test", type=int, default=1000)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--fractions", default="0.3,0.7")
    return parser.parse_args(argv)


def main(argv=None) -> None:
    args = study_arguments(__doc__.splitlines()[0], "runs/fashion-cli", argv)
    out = args.out.resolve()
    data = write_fashion(out / "data", args.train, args.test)
    run = out / "run"
    roarfast = [sys.executable, "-m", "roarfast.cli"]
    commands = [
        ["sweep", "--run-dir", run, "--dataset", "torchvision:FashionMNIST", "--data-dir", data,
         "--model", "my_plugins:small_cnn", "--method", "my_plugins:input_x_gradient,grad,gb",
         "--fraction", args.fractions, "--seeds", args.seeds, "--recipe", f"epochs={args.epochs}", "--device", "cpu",
         "--no-progress"],
        ["report", "--run-dir", run],
    ]
    for command in commands:
        command = [str(part) for part in command]
        print("$ roarfast " + shlex.join(command), flush=True)
        # from this folder, so that my_plugins imports from the working directory
        subprocess.run(roarfast + command, cwd=HERE, check=True)


if __name__ == "__main__":
    main()
