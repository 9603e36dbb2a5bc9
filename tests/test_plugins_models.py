"""--model beyond the built-ins: timm networks on one- and three-channel data, the recipe of a model roarfast
has not tuned (--recipe and the config file's recipe: mapping), the Grad-CAM layer of a model without
cam_layer, and nn.Module objects re-initialized per training."""

import inspect

import pytest
import torch
from click.testing import CliRunner
from torch import nn

from roarfast.cli import main
from roarfast.common.fingerprint import sha256_file
from roarfast.models import resolve_model
from roarfast.recipe import PLUGIN_RECIPES
from roarfast.rundir.directory import RunDir
from tests.plugin_files import write_module

CPU = ["--device", "cpu", "--no-progress"]


def invoke(args) -> str:
    result = CliRunner().invoke(main, [str(a) for a in args])
    assert result.exit_code == 0, result.output
    return result.output


@pytest.mark.parametrize("channels", [1, 3])
def test_a_timm_network_trains_and_explains_on_one_and_three_channels(tmp_path, monkeypatch, channels):
    timm = pytest.importorskip("timm")
    module = write_module(tmp_path / "code", monkeypatch)
    run = tmp_path / "run"
    invoke(["train", "--run-dir", run, "--model", "timm:test_resnet", "--dataset", f"{module}:tensors",
            "--data-option", f"channels={channels}", "--epochs", "1", *CPU])
    meta = RunDir(run).base_meta()
    entry = timm.models.model_entrypoint("test_resnet")
    assert meta["model"] == "timm:test_resnet" and meta["in_channels"] == channels
    assert meta["model_source_sha256"] == sha256_file(inspect.getsourcefile(entry))
    # extract rebuilds the network from the recorded name: gb guides timm's in-place ReLUs, Grad-CAM takes the
    # last Conv2d (timm nets have no cam_layer) and says so once
    # (its dataset, a plug-in, named again: the record alone imports nothing; its options come from the record)
    out = invoke(["extract", "--run-dir", run, "--method", "gb,gradcam", "--split", "test", "--dataset",
                  f"{module}:tensors", *CPU])
    model, _ = RunDir(run).load_base_model(RunDir(run).open_dataset(f"{module}:tensors"))
    last_conv = [n for n, m in model.named_modules() if isinstance(m, nn.Conv2d)][-1]
    assert out.count("gradcam: layer") == 1 and f"gradcam: layer '{last_conv}' (its last Conv2d" in out
    store = RunDir(run).rank_store
    for method in ("gb", "gradcam"):
        ranks = store.read(method, "test").tensor()
        assert ranks.shape == (24, 8, 8) and torch.equal(ranks.flatten(1).sort(1).values[0].long(), torch.arange(64))


def test_recipe_fields_come_from_flags_and_the_config_file(tmp_path, monkeypatch):
    module = write_module(tmp_path / "code", monkeypatch)
    config = tmp_path / "roarfast.yaml"
    config.write_text("recipe: {label_smoothing: 0.0, momentum: 0.8}\ntrain: {recipe: {warmup: 0.5}}\n")
    run = tmp_path / "run"
    invoke(["--config", config, "train", "--run-dir", run, "--model", f"{module}:small_cnn", "--dataset",
            f"{module}:tensors", "--recipe", "lr=0.01", "--recipe", "ema_decay=null", "--epochs", "1", *CPU])
    recipe = RunDir(run).base_meta()["recipe"]
    untuned = PLUGIN_RECIPES["small"]  # 8 px: the small-image default of a model roarfast has not tuned
    assert recipe["lr"] == 0.01 and recipe["ema_decay"] is None and recipe["epochs"] == 1
    assert recipe["label_smoothing"] == 0.0 and recipe["momentum"] == 0.8  # the file's top-level recipe: mapping
    assert recipe["warmup"] == 0.5  # merged with the train section's, field by field
    assert recipe["batch_size"] == untuned.batch_size and recipe["weight_decay"] == untuned.weight_decay


@pytest.mark.parametrize("item, says", [("lrr=0.1", "--recipe lrr: not a Recipe field; the fields are epochs"),
                                        ("lr=-1", "--recipe lr=-1: should be in (0, inf)"),
                                        ("flip=3", "--recipe flip=3: should be true or false")])
def test_a_bad_recipe_field_is_named(item, says):
    result = CliRunner().invoke(main, ["train", "--recipe", item])
    assert result.exit_code == 2 and says in result.output


class Net(nn.Module):
    """A user's network given to Study as an instance."""

    def __init__(self, in_channels=3, num_classes=4):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, 4, 3, padding=1)
        self.head = nn.Linear(4, num_classes)

    def forward(self, x):
        return self.head(torch.relu(self.conv(x)).amax((2, 3)))


def test_an_instance_is_copied_and_reinitialized_for_every_training():
    template = Net()
    before = {k: v.clone() for k, v in template.state_dict().items()}
    spec = resolve_model(template)
    torch.manual_seed(5)
    first = spec.build(4, 8, 3).state_dict()
    torch.manual_seed(5)
    again = spec.build(4, 8, 3).state_dict()
    assert spec.name == "object:Net"
    assert all(torch.equal(first[k], again[k]) for k in first)  # the training's seed decides the weights
    assert not torch.equal(first["conv.weight"], before["conv.weight"])  # not the template's weights
    assert all(torch.equal(v, template.state_dict()[k]) for k, v in before.items())  # the template is untouched
