"""A model and a dataset added as a contributor adds them (ARCHITECTURE.md, "Where to add"): the implementation
in a module, and its declaration (name, description, options or recipe block, its place in the listing, the
import path of the factory or loader) beside the built-ins'. In a fresh interpreter the two declarations join
MODELS and DATASETS, as a module of roarfast/models/builtins/ and a plug-in's DatasetEntry would (a built-in
dataset is a module of roarfast/data/builtin/: tests/test_dataset_builtins.py); then the --help lists them with
their descriptions and options without importing their modules (nor torch), the model resolves and trains with
the recipe it declares (a Study's plan shows it, for its base model and its cells), and the dataset's options
reach its loader and its fingerprint."""

import json
import subprocess
import sys
import textwrap

from roarfast.planning.grid import PRESETS

MODEL_MODULE = '''
from torch import nn


def tinynet(num_classes, image_size, in_channels):
    net = nn.Sequential(nn.Conv2d(in_channels, 4, 3, padding=1), nn.ReLU(), nn.AdaptiveMaxPool2d(1), nn.Flatten(),
                        nn.Linear(4, num_classes))
    net.cam_layer = "0"
    return net
'''

DATASET_MODULE = '''
import torch

from roarfast.data.base import ImageSet


def load_squares(n=40, brightness=200):
    labels = torch.arange(n) % 2
    images = torch.zeros(n, 3, 8, 8, dtype=torch.uint8)
    images[labels == 1, :, 2:6, 2:6] = brightness
    split = ImageSet(images=images, labels=labels, masks=None, classes=["empty", "square"])
    return split, split
'''

SCRIPT = '''
import json, sys
from roarfast.data.registry import DATASETS, DatasetEntry
from roarfast.models.registry import MODELS, ModelEntry

sys.path[:0] = sys.argv[1:3]
MODELS.register(ModelEntry("tinynet", "a four-filter CNN", target="tinynet:tinynet",
                           recipe={"epochs": 1, "batch_size": 16, "lr": 0.01},
                           order=max(entry.order for entry in MODELS) + 1))  # listed after the built-ins
DATASETS.register(DatasetEntry("squares", "bright squares on black, 8x8", target="squares:load_squares",
                               options={"n": 40, "brightness": 200}))
from click.testing import CliRunner
from roarfast.cli import main
from roarfast.data import load_dataset
from roarfast.errors import UserError
from roarfast.models import resolve_model
from roarfast.recipe import DataSize, effective_recipe

help = CliRunner().invoke(main, ["train", "--help"], terminal_width=10_000).output
imported = sorted(name for name in ("tinynet", "squares", "torch") if name in sys.modules)
spec = resolve_model("tinynet")
ds = load_dataset("squares", n=48)
try:
    load_dataset("squares", colour=3)
    refused = None
except UserError as err:
    refused = str(err)
from roarfast import Study  # after `imported`: it imports torch
print(json.dumps({"help": help, "imported": imported, "builtin": spec.builtin, "cam_layer": spec.build(2, 8, 3).cam_layer,
                  "recipe": effective_recipe("tinynet", "cpu", DataSize(48, 8)).to_dict(),
                  "images": len(ds.train), "options": ds.options, "refused": refused,
                  "plan": Study(sys.argv[3], model="tinynet", dataset="squares", dataset_options={"n": 48},
                                methods="random", device="cpu", progress=False).preview().lines()}))
'''


def test_a_model_and_a_dataset_are_a_module_and_a_declaration_each(tmp_path):
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "tinynet.py").write_text(textwrap.dedent(MODEL_MODULE))
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "squares.py").write_text(textwrap.dedent(DATASET_MODULE))
    out = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path / "models"), str(tmp_path / "data"),
                          str(tmp_path / "run")],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    seen = json.loads(out.stdout.splitlines()[-1])

    lines = {line.split()[0]: line for line in seen["help"].splitlines() if line.strip().startswith("--")}
    assert "tinynet: a four-filter CNN" in lines["--model"] and "| tinynet)" in lines["--model"]
    assert "squares: bright squares on black, 8x8 (--data-option n, brightness)" in lines["--dataset"]
    assert seen["imported"] == []  # listed from the declarations alone

    assert seen["builtin"] and seen["cam_layer"] == "0"
    assert (seen["recipe"]["epochs"], seen["recipe"]["batch_size"], seen["recipe"]["lr"]) == (1, 16, 0.01)
    assert seen["images"] == 48 and seen["options"] == {"n": 48, "brightness": 200, "val_seed": 0}
    assert seen["refused"] == "unknown option(s) colour for dataset 'squares'; it takes brightness, n, num_test, num_train"
    # a Study's plan: the base model trains with the recipe it declares, the cells with the preset's epochs
    cells_epochs = PRESETS["quick"]["epochs"]
    assert any(line.startswith("base model: tinynet, 1 epochs, batch 16, lr 0.01: to train") for line in seen["plan"])
    assert any(line.startswith(f"cells: tinynet, {cells_epochs} epochs, batch 16, lr 0.01,") for line in seen["plan"])
