"""A new built-in dataset is one module of roarfast/data/builtin/ (and its test): here a module written as a
contributor would write it (its loader registered with register_dataset, torch imported inside the loader) joins
the package's path in a fresh interpreter, and with no other file edited --dataset's help lists it with its
description and the options its signature declares, without importing the module's data code nor torch; it loads
with the options given, fingerprinted with its defaults, and an option it does not take is refused in one line."""

import json
import subprocess
import sys
import textwrap

DATASET_MODULE = '''
from roarfast.data.registry import register_dataset


@register_dataset("squares", "bright squares on black, 8x8", order=9)
def load_squares(n: int = 40, brightness: int = 200):
    import torch

    from roarfast.data.base import ImageSet

    labels = torch.arange(n) % 2
    images = torch.zeros(n, 3, 8, 8, dtype=torch.uint8)
    images[labels == 1, :, 2:6, 2:6] = brightness
    split = ImageSet(images=images, labels=labels, masks=None, classes=["empty", "square"])
    return split, split
'''

SCRIPT = '''
import json, sys
import roarfast.data.builtin

roarfast.data.builtin.__path__.append(sys.argv[1])  # as if squares.py were a file of the package
from click.testing import CliRunner
from roarfast.cli import main
from roarfast.data import DATASETS, load_dataset
from roarfast.errors import UserError

help = CliRunner().invoke(main, ["train", "--help"], terminal_width=10_000).output
seen = {"help": help, "names": DATASETS.names, "torch": "torch" in sys.modules}
ds = load_dataset("squares", n=48)
seen.update(images=len(ds.train), options=ds.options, fingerprint=ds.fingerprint,
            again=load_dataset("squares", n=48, brightness=200).fingerprint)
try:
    load_dataset("squares", colour=3)
except UserError as err:
    seen["refused"] = str(err)
print(json.dumps(seen))
'''


def test_a_dataset_is_one_module(tmp_path):
    (tmp_path / "squares.py").write_text(textwrap.dedent(DATASET_MODULE))
    out = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    seen = json.loads(out.stdout.splitlines()[-1])

    lines = {line.split()[0]: line for line in seen["help"].splitlines() if line.strip().startswith("--")}
    assert "squares: bright squares on black, 8x8 (--data-option n, brightness)" in lines["--dataset"]
    assert "| imagefolder | squares)" in lines["--dataset"]  # listed after the built-ins of lower order
    assert seen["names"][-1] == "squares" and not seen["torch"]  # listed from its signature, nothing loaded
    assert seen["images"] == 48 and seen["options"] == {"n": 48, "brightness": 200, "val_seed": 0}
    assert seen["again"] == seen["fingerprint"]  # a default given or left out: one dataset
    assert seen["refused"] == "unknown option(s) colour for dataset 'squares'; it takes brightness, n, num_test, num_train"
