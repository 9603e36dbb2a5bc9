"""The built-in models: output shapes, ReLU modules that guided backprop can hook, cam_layer, size of the CPU
default; each listed with its description in the --model help and trained with the recipe its module declares."""

import pytest
import torch
from click.testing import CliRunner
from torch import nn

from roarfast.cli import main
from roarfast.models import MODELS, build_model, resolve_model
from roarfast.recipe import PLUGIN_RECIPES, DataSize, Recipe, effective_recipe

#: input side for the per-model tests: small keeps ResNet-50 cheap; every model pools globally
SIDE = 24


@pytest.mark.parametrize("name", MODELS.names)
def test_shapes_cam_layer_and_hookable_relus(name):
    """Logits [B, classes]; cam_layer is a spatial stage; every ReLU is an nn.ReLU module, none inplace,
    each runs in forward, and a backward hook on them (guided backprop's mechanism) reaches the input."""
    torch.manual_seed(0)
    model = build_model(name, num_classes=7).eval()
    relus = [m for m in model.modules() if isinstance(m, nn.ReLU)]
    assert relus and not any(m.inplace for m in relus)
    captured, calls = {}, []
    handles = [model.get_submodule(model.cam_layer).register_forward_hook(lambda m, i, o: captured.setdefault("o", o))]
    handles += [m.register_forward_hook(lambda m, i, o: calls.append(m)) for m in relus]
    x = torch.randn(2, 3, SIDE, SIDE, requires_grad=True)
    logits = model(x)
    for h in handles:
        h.remove()
    assert logits.shape == (2, 7)
    assert captured["o"].dim() == 4 and captured["o"].shape[-1] > 1
    assert {id(m) for m in calls} == {id(m) for m in relus}

    logits[0, 0].backward()
    plain = x.grad.clone()
    x.grad = None
    handles = [m.register_full_backward_hook(lambda m, gi, go: (gi[0].clamp(min=0),)) for m in relus]
    model(x)[0, 0].backward()
    for h in handles:
        h.remove()
    assert not torch.allclose(plain, x.grad)


def test_in_channels_and_large_canvas():
    assert build_model("resnet8", 5, in_channels=1)(torch.randn(2, 1, 32, 32)).shape == (2, 5)
    assert build_model("fastnet", 5, in_channels=1)(torch.randn(2, 1, 32, 32)).shape == (2, 5)
    resnet = build_model("resnet18", 5, image_size=224, in_channels=1).eval()
    assert resnet.conv1.stride == (2, 2)  # ImageNet stem kept for large images
    with torch.no_grad():
        assert resnet(torch.randn(1, 1, 96, 96)).shape == (1, 5)
    assert build_model("resnet18", 5, image_size=32).conv1.stride == (1, 1)


def _conv_linear_macs(model, x):
    macs = []

    def count(module, inputs, output):
        if isinstance(module, nn.Conv2d):
            kernel = module.in_channels // module.groups * module.kernel_size[0] * module.kernel_size[1]
            macs.append(output.numel() // output.shape[0] * kernel)
        elif isinstance(module, nn.Linear):
            macs.append(module.in_features * module.out_features)

    handles = [m.register_forward_hook(count) for m in model.modules() if isinstance(m, (nn.Conv2d, nn.Linear))]
    with torch.no_grad():
        model(x)
    for h in handles:
        h.remove()
    return sum(macs)


def test_cpu_default_is_a_few_mflop():
    """The CPU default needs a model of a few MFLOP per 32x32 image (so that `roarfast run` trains its cells
    in seconds on a laptop's cores)."""
    macs = _conv_linear_macs(build_model("fastnet", 10).eval(), torch.randn(1, 3, 32, 32))
    assert 1e6 <= 2 * macs <= 8e6
    gpu_macs = _conv_linear_macs(build_model("fastnet-gpu", 10).eval(), torch.randn(1, 3, 32, 32))
    assert gpu_macs > 20 * macs  # the GPU default is the large one
    small_macs = _conv_linear_macs(build_model("fastnet-small", 10).eval(), torch.randn(1, 3, 32, 32))
    assert 3 * small_macs <= macs  # `roarfast run`'s net: fastnet at half width


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="unknown model 'vgg'; known: .*fastnet-gpu"):
        build_model("vgg", 10)
    with pytest.raises(ValueError, match="num_classes"):
        build_model("fastnet", 1)
    with pytest.raises(ValueError, match="in_channels"):
        build_model("fastnet", 10, in_channels=0)


def help_line(command: str, flag: str) -> str:
    """The line of `roarfast COMMAND --help` that documents `flag` (a wide terminal: one line per option)."""
    result = CliRunner().invoke(main, [command, "--help"], terminal_width=10_000)
    assert result.exit_code == 0, result.output
    return next(line for line in result.output.splitlines() if line.strip().startswith(flag))


@pytest.mark.parametrize("command", ["train", "retrain", "sweep"])
def test_the_model_help_lists_every_builtin_with_its_description(command):
    line = help_line(command, "--model")
    for entry in MODELS:
        assert f"{entry.name}: {entry.description}" in line
    assert "timm:<name>" in line and "package.module:factory" in line


def cpu_recipe(name: str) -> Recipe:
    return effective_recipe(name, "cpu", DataSize(4500, 32))


def test_a_builtin_trains_with_the_recipe_its_module_declares():
    for entry in MODELS:
        untuned = PLUGIN_RECIPES["small"]
        assert cpu_recipe(entry.name) == (Recipe(**entry.recipe) if entry.recipe else untuned)
        assert resolve_model(entry.name).builtin
    assert cpu_recipe("fastnet") != cpu_recipe("my_module:fastnet") == PLUGIN_RECIPES["small"]
