"""What an estimator needs of the model, and estimators from outside roarfast: guided backprop on in-place
ReLUs equals the out-of-place model; a model without ReLU modules is refused for gb before any image is
processed; a plug-in's random numbers follow the run's seed; an estimator object is named by its import path,
else by its name and a digest; one whose import path is longer than a file name goes through the sweep and the
report under its full name."""

import copy
import re

import pytest
import torch
from click.testing import CliRunner
from torch import nn

from roarfast.stages import extract_tasks
from roarfast.cli import main
from roarfast.errors import UserError
from roarfast.methods import ExplainBatch, MethodParams, compute_maps, parse_methods
from roarfast.rundir.directory import RunDir
from tests.plugin_files import snapshot, write_module


def inplace_cnn() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 6, 3, padding=1), nn.BatchNorm2d(6), nn.ReLU(inplace=True),
                         nn.Conv2d(6, 6, 3, padding=1), nn.ReLU(inplace=True), nn.AdaptiveMaxPool2d(1), nn.Flatten(),
                         nn.Linear(6, 4)).eval()


def out_of_place(model: nn.Module) -> nn.Module:
    """The same network, weights and all, built with out-of-place ReLUs."""
    copied = copy.deepcopy(model)
    for module in copied.modules():
        if isinstance(module, nn.ReLU):
            module.inplace = False
    return copied


def batch(channels=3, side=8, n=5):
    x = torch.randn(n, channels, side, side, generator=torch.Generator().manual_seed(1))
    return ExplainBatch(x=x, target=torch.zeros(n, dtype=torch.int64), index=torch.arange(n))


def test_guided_backprop_on_inplace_relus_equals_the_out_of_place_model():
    model = inplace_cnn()
    plain = out_of_place(model)
    methods = ["gb", "sg-sq-gb"]
    ours = compute_maps(model, batch(), methods, MethodParams(samples=3))
    reference = compute_maps(plain, batch(), methods, MethodParams(samples=3))
    for name in methods:
        assert torch.equal(ours[name], reference[name])
    grad = compute_maps(plain, batch(), ["grad"])["grad"]
    assert not torch.allclose(ours["gb"], grad)  # guided: not the plain gradient
    assert all(m.inplace for m in model.modules() if isinstance(m, nn.ReLU))  # the model is given back as it was


def test_guided_backprop_on_a_timm_network_with_inplace_relus():
    timm = pytest.importorskip("timm")
    torch.manual_seed(0)
    model = timm.create_model("test_resnet", num_classes=4, in_chans=3).eval()
    assert any(m.inplace for m in model.modules() if isinstance(m, nn.ReLU))
    ours = compute_maps(model, batch(side=16), ["gb"])["gb"]
    assert torch.equal(ours, compute_maps(out_of_place(model), batch(side=16), ["gb"])["gb"])


def test_gb_on_a_model_without_relu_modules_is_refused_before_any_image(tmp_path, monkeypatch):
    module = write_module(tmp_path / "code", monkeypatch)
    run = tmp_path / "run"
    trained = CliRunner().invoke(main, ["train", "--run-dir", run, "--model", f"{module}:gelu_cnn", "--dataset",
                                        f"{module}:tensors", "--epochs", "1", "--device", "cpu", "--no-progress"])
    assert trained.exit_code == 0, trained.output
    calls = []
    original = extract_tasks.compute_maps
    monkeypatch.setattr(extract_tasks, "compute_maps", lambda *a, **k: calls.append(1) or original(*a, **k))
    before = snapshot(run)
    result = CliRunner().invoke(main, ["extract", "--run-dir", run, "--method", "sg-gb", "--device", "cpu",
                                       "--trust-run-dir"])  # its records name the user's model and data
    assert result.exit_code == 1
    assert "--method sg-gb: guided backprop guides nn.ReLU modules, and Sequential has none (its activations: GELU)" \
        in result.output
    assert calls == [] and snapshot(run) == before and RunDir(run).rank_store.methods("train") == []


RANDOM_PLUGIN = '''

def noisy(model, images, target):
    return torch.rand(images.shape[0], 1, *images.shape[2:]) + images.sum(1, keepdim=True) * 0
'''


def test_a_plugins_random_numbers_follow_the_run_seed(tmp_path, monkeypatch):
    module = write_module(tmp_path / "code", monkeypatch, extra=RANDOM_PLUGIN)
    (name,) = parse_methods(f"{module}:noisy")
    model = inplace_cnn()
    first, again = (compute_maps(model, batch(), [name], MethodParams(seed=3))[name] for _ in range(2))
    torch.rand(7)  # the global random state moved on: the plug-in's draws must not depend on it
    other = compute_maps(model, batch(), [name], MethodParams(seed=4))[name]
    assert torch.equal(first, again) and not torch.equal(first, other)
    assert torch.equal(first, compute_maps(model, batch(), [name], MethodParams(seed=3))[name])


def test_an_estimator_object_is_named_by_where_it_lives(tmp_path, monkeypatch):
    module = write_module(tmp_path / "code", monkeypatch)
    imported = __import__(module)
    assert parse_methods([imported.saliency, "grad"]) == [f"{module}:saliency", "grad"]

    def nested(model, images, target):
        return images

    # a nested function has no import path: its name, then a digest of what it runs
    (name,) = parse_methods([nested])
    assert re.fullmatch(r"object:test_an_estimator_object_is_named_by_where_it_lives\.nested-[0-9a-f]{8}", name)
    with pytest.raises(UserError, match=r"should take \(model, images, target\)"):
        parse_methods([len])


#: an estimator whose import path is longer than a file name may be (255 bytes)
LONG_NAME = "saliency_" + "with_a_very_long_descriptive_name_" * 8
LONG_PLUGIN = f'''

def {LONG_NAME}(model, images, target):
    return saliency(model, images, target)
'''


def test_an_estimator_with_a_long_import_path_goes_through_the_sweep_and_the_report(tmp_path, monkeypatch):
    import json

    module = write_module(tmp_path / "code", monkeypatch, extra=LONG_PLUGIN)
    method = f"{module}:{LONG_NAME}"
    run = tmp_path / "run"
    for args in (["sweep", "--run-dir", run, "--dataset", f"{module}:tensors", "--model", f"{module}:small_cnn",
                  "--method", method, "--fraction", "0.5", "--mode", "roar", "--seeds", "1", "--no-control",
                  "--recipe", "epochs=1", "--device", "cpu", "--no-progress"],
                 ["report", "--run-dir", run]):
        result = CliRunner().invoke(main, [str(a) for a in args])
        assert result.exit_code == 0, result.output
    assert len(method) > 255 and RunDir(run).rank_store.methods() == sorted(["random", method])
    groups = json.loads((run / "report" / "summary.json").read_text())["groups"]
    assert {g["method"] for g in groups} == {"random", method}
