"""The effective recipe (roarfast.recipe.effective_recipe): what it is made of and in which order (the user's
--recipe fields over the user's flags over the GPU's scaling over the model's tuned recipe or the untuned
default over Recipe's defaults), and that the record it leaves is the recipe itself."""

import json
from types import SimpleNamespace

import pytest

from roarfast.stages.basemodel import TrainOptions, base_recipe
from roarfast.stages.cells import CellOptions, cell_recipe
from roarfast.models import MODELS
from roarfast.recipe import (GPU_EVAL_BATCH_SIZE, LATER_FIELDS, MIN_STEPS_PER_EPOCH, PLUGIN_RECIPES, Recipe,
                             effective_recipe)

CIFAR = {"train_images": 45_000, "image_size": 32}


def tuned(name: str) -> Recipe:
    return Recipe(**MODELS[name].recipe)


def test_a_tuned_model_trains_with_its_modules_fields_over_recipes_defaults():
    for entry in MODELS:
        recipe = effective_recipe(entry.name, "cpu", **CIFAR)
        assert recipe == (Recipe(**entry.recipe) if entry.recipe else PLUGIN_RECIPES["small"])
        for field, value in (entry.recipe or {}).items():
            assert getattr(recipe, field) == value, (entry.name, field)
    assert effective_recipe("fastnet", "cpu", **CIFAR).lr != Recipe().lr  # fastnet's own lr, not the default


@pytest.mark.parametrize("image_size,kind", [(8, "small"), (32, "small"), (64, "small"), (65, "large"),
                                             (224, "large")])
def test_a_model_roarfast_has_not_tuned_takes_the_default_of_its_image_size(image_size, kind):
    for name in ("mymod:net", "timm:resnet18", "object:mine"):
        assert effective_recipe(name, "cpu", train_images=1000, image_size=image_size) == PLUGIN_RECIPES[kind]


def test_the_users_flags_override_the_tuned_recipe_field_by_field():
    base = effective_recipe("fastnet", "cpu", **CIFAR)
    flagged = effective_recipe("fastnet", "cpu", **CIFAR, epochs=3, batch_size=32, amp="fp16")
    assert (flagged.epochs, flagged.batch_size, flagged.amp) == (3, 32, "fp16")
    assert flagged.replace(epochs=base.epochs, batch_size=base.batch_size, amp=base.amp) == base
    untuned = effective_recipe("mymod:net", "cpu", train_images=1000, image_size=224, epochs=2)
    assert untuned == PLUGIN_RECIPES["large"].replace(epochs=2)


def test_recipe_overrides_win_over_the_flags_and_the_tuned_recipe():
    recipe = effective_recipe("fastnet", "cpu", **CIFAR, epochs=3, batch_size=32, amp="bf16",
                              overrides={"epochs": 5, "batch_size": 64, "amp": None, "lr": 0.01})
    assert (recipe.epochs, recipe.batch_size, recipe.amp, recipe.lr) == (5, 64, None, 0.01)
    # the fields no one set keep the tuned recipe's values
    assert recipe.replace(epochs=8, batch_size=128, lr=tuned("fastnet").lr) == tuned("fastnet")
    # an --recipe amp is an --amp choice too: "off" is fp32, "auto" the device's
    assert effective_recipe("fastnet", "cpu", **CIFAR, amp="bf16", overrides={"amp": "off"}).amp is None
    assert effective_recipe("fastnet", "cpu", **CIFAR, amp="off", overrides={"amp": "fp16"}).amp == "fp16"
    # an override to a later field's default wins over a tuned recipe that sets it otherwise
    airbench = effective_recipe("airbench", "cpu", **CIFAR, overrides={"schedule": "cosine", "tta": 0})
    assert tuned("airbench").schedule == "linear" and (airbench.schedule, airbench.tta) == ("cosine", 0)


@pytest.mark.parametrize("name", ["fastnet", "fastnet-gpu", "airbench", "mymod:net"])
def test_a_gpu_scales_the_batch_and_learning_rate_before_the_users_fields(name):
    cpu = effective_recipe(name, "cpu", **CIFAR)
    gpu = effective_recipe(name, "cuda", **CIFAR)
    assert gpu.batch_size == 4 * cpu.batch_size and gpu.lr == pytest.approx(4 * cpu.lr)
    assert (gpu.eval_batch_size, gpu.amp) == (GPU_EVAL_BATCH_SIZE, "bf16")
    assert gpu.replace(batch_size=cpu.batch_size, lr=cpu.lr, eval_batch_size=cpu.eval_batch_size, amp=cpu.amp) == cpu
    # what the user sets is taken as set, never scaled
    flagged = effective_recipe(name, "cuda", **CIFAR, batch_size=32, overrides={"lr": 0.01, "eval_batch_size": 100})
    assert (flagged.batch_size, flagged.lr, flagged.eval_batch_size) == (32, 0.01, 100)
    assert effective_recipe(name, "cuda", **CIFAR, amp="off").amp is None


@pytest.mark.parametrize("train_images,scale", [(None, 4), (45_000, 4), (4_500, 1), (20_000, 2), (100, 1)])
def test_gpu_batch_keeps_enough_steps_per_epoch(train_images, scale):
    # fastnet-gpu's base batch is 256: CIFAR-10's 45,000 images take the full 4x; the embedded 4,500 none
    base = effective_recipe("fastnet-gpu", "cpu", train_images=train_images, image_size=32)
    gpu = effective_recipe("fastnet-gpu", "cuda", train_images=train_images, image_size=32)
    assert gpu.batch_size == base.batch_size * scale and gpu.lr == pytest.approx(base.lr * scale)
    if train_images is not None and scale > 1:
        assert train_images // gpu.batch_size >= MIN_STEPS_PER_EPOCH
    assert base == tuned("fastnet-gpu")  # CPU recipes never scale


@pytest.mark.parametrize("name", ["fastnet", "airbench", "resnet50", "mymod:net"])
@pytest.mark.parametrize("device", ["cpu", "cuda"])
@pytest.mark.parametrize("fields", [{}, {"epochs": 2, "amp": "fp16"},
                                    {"overrides": {"schedule": "cosine", "lookahead": False, "ema_decay": None}}])
def test_the_record_is_the_recipe(name, device, fields):
    """What is recorded (Recipe.to_dict) is JSON, the same on every call, and gives the recipe back whole: a
    later field left out of the record is at Recipe's default, whatever the model's tuned recipe says."""
    recipe = effective_recipe(name, device, **CIFAR, **fields)
    record = recipe.to_dict()
    assert json.loads(json.dumps(record)) == record == effective_recipe(name, device, **CIFAR, **fields).to_dict()
    assert Recipe.from_dict(record) == recipe
    assert set(Recipe().to_dict()) <= set(record) <= set(Recipe().to_dict()) | set(LATER_FIELDS)


def test_the_base_model_and_the_cells_pass_their_options_to_it():
    """train's and the cells' options reach effective_recipe field by field (the cells take no --batch-size)."""
    data = SimpleNamespace(train_index=range(3000), image_size=28)
    options = {"epochs": 3, "amp": "off", "recipe": {"lr": 0.01, "warmup": 0.3}}
    for name in ("mymod:net", "resnet8"):
        expected = effective_recipe(name, "cuda", train_images=3000, image_size=28, epochs=3, amp="off",
                                    overrides={"lr": 0.01, "warmup": 0.3})
        spec = SimpleNamespace(name=name)
        assert base_recipe(spec, data, "cuda", TrainOptions(**options)) == expected
        assert base_recipe(spec, data, "cuda", TrainOptions(batch_size=8, **options)) == expected.replace(batch_size=8)
    no_base_model = SimpleNamespace(head=lambda: SimpleNamespace(base=None), model_meta=lambda base: {})
    spec, recipe = cell_recipe(no_base_model, data, "cuda", CellOptions(model="resnet8", **options))
    assert (spec.name, recipe) == ("resnet8", expected)
