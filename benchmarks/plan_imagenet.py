"""The paper's ImageNet grid costed by `roarfast sweep --dry-run` without ImageNet: a tree whose listing is
ImageNet's (tests/imagenet_tree.py: 1,281,167 train, 50,000 val images in 1000 classes; two real JPEGs give its
canvas, 256/224), the rest names that no reader opens. Nothing is decoded but those two.

    python benchmarks/plan_imagenet.py [sweep options...]
    python benchmarks/plan_imagenet.py --plan-device h100 --plan-workers 64
"""

import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from roarfast.cli import main  # noqa: E402
from roarfast.data import imagefolder  # noqa: E402
from tests.imagenet_tree import listing, write_first_files  # noqa: E402


def plan(args):
    where = Path(tempfile.mkdtemp(prefix="imagenet-plan-"))
    write_first_files(where / "tree")
    imagefolder.scan_tree = listing
    main(["sweep", "--dry-run", "--run-dir", str(where / "run"), "--dataset", "imagefolder", "--data-dir",
          str(where / "tree"), "--preset", "paper", "--model", "resnet50", *args])


if __name__ == "__main__":
    plan(sys.argv[1:])
