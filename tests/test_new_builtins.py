"""A model and a dataset added as a contributor adds them (ARCHITECTURE.md, "Where to add"): one module each,
nothing else edited. In a fresh interpreter the two modules join the packages the resolvers discover
(roarfast.models, roarfast.data.builtin) before their first lookup; then the --help lists them with their
descriptions and options, the model resolves and trains with the recipe its module declares, and the
dataset's options reach its loader and its fingerprint."""

import json
import subprocess
import sys
import textwrap

MODEL_MODULE = '''
from torch import nn

from roarfast.models.registry import MODELS, ModelEntry


def tinynet(num_classes, image_size, in_channels):
    net = nn.Sequential(nn.Conv2d(in_channels, 4, 3, padding=1), nn.ReLU(), nn.AdaptiveMaxPool2d(1), nn.Flatten(),
                        nn.Linear(4, num_classes))
    net.cam_layer = "0"
    return net


MODELS.register(ModelEntry("tinynet", "a four-filter CNN", value=tinynet,
                           recipe={"epochs": 1, "batch_size": 16, "lr": 0.01}))
'''

DATASET_MODULE = '''
import torch

from roarfast.data.base import ImageSet
from roarfast.data.registry import DATASETS, loader_entry


def load_squares(n=40, brightness=200):
    labels = torch.arange(n) % 2
    images = torch.zeros(n, 3, 8, 8, dtype=torch.uint8)
    images[labels == 1, :, 2:6, 2:6] = brightness
    split = ImageSet(images=images, labels=labels, masks=None, classes=["empty", "square"])
    return split, split


DATASETS.register(loader_entry("squares", "bright squares on black, 8x8", load_squares))
'''

SCRIPT = '''
import json, sys
import roarfast.data.builtin, roarfast.models

roarfast.models.__path__.append(sys.argv[1])
roarfast.data.builtin.__path__.append(sys.argv[2])
from click.testing import CliRunner
from roarfast.cli import main
from roarfast.data import load_dataset
from roarfast.errors import UserError
from roarfast.models import resolve_model
from roarfast.recipe import effective_recipe

help = CliRunner().invoke(main, ["train", "--help"], terminal_width=10_000).output
spec = resolve_model("tinynet")
ds = load_dataset("squares", n=48)
try:
    load_dataset("squares", colour=3)
    refused = None
except UserError as err:
    refused = str(err)
print(json.dumps({"help": help, "builtin": spec.builtin, "cam_layer": spec.build(2, 8, 3).cam_layer,
                  "recipe": effective_recipe("tinynet", "cpu", train_images=48, image_size=8).to_dict(),
                  "images": len(ds.train), "options": ds.options, "refused": refused}))
'''


def test_a_model_and_a_dataset_are_one_module_each(tmp_path):
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "tinynet.py").write_text(textwrap.dedent(MODEL_MODULE))
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "squares.py").write_text(textwrap.dedent(DATASET_MODULE))
    out = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path / "models"), str(tmp_path / "data")],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    seen = json.loads(out.stdout.splitlines()[-1])

    lines = {line.split()[0]: line for line in seen["help"].splitlines() if line.strip().startswith("--")}
    assert "tinynet: a four-filter CNN" in lines["--model"] and "| tinynet)" in lines["--model"]
    assert "squares: bright squares on black, 8x8 (--data-option n, brightness)" in lines["--dataset"]

    assert seen["builtin"] and seen["cam_layer"] == "0"
    assert (seen["recipe"]["epochs"], seen["recipe"]["batch_size"], seen["recipe"]["lr"]) == (1, 16, 0.01)
    assert seen["images"] == 48 and seen["options"] == {"n": 48, "brightness": 200, "val_seed": 0}
    assert seen["refused"] == "unknown option(s) colour for dataset 'squares'; it takes brightness, n, num_test, num_train"
