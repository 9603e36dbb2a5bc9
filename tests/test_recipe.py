"""The effective recipe (roarfast.recipe.effective_recipe): what it is made of and in which order (the user's
--recipe fields over the user's flags over the GPU's scaling over the model's recipe block or the untuned
default over Recipe's defaults), which of the user's options each stage reads, and that the record it leaves is
the recipe itself."""

import json
from types import SimpleNamespace

import pytest

from roarfast.planning.grid import Grid
from roarfast.stages.basemodel import TrainOptions
from roarfast.stages.cells import CellOptions, cell_model
from roarfast.models import MODELS
from roarfast.recipe import (BASE_MODEL, CELLS, GPU_EVAL_BATCH_SIZE, LATER_FIELDS, MIN_STEPS_PER_EPOCH,
                             PLUGIN_RECIPES, DataSize, Recipe, effective_recipe)

CIFAR = DataSize(45_000, 32)


def user(overrides=None, **fields) -> TrainOptions:
    """The user's options of `roarfast train` (--epochs, --batch-size, --amp; --recipe: `overrides`)."""
    return TrainOptions(recipe=overrides, **fields)


def tuned(name: str) -> Recipe:
    return Recipe(**MODELS[name].recipe)


def test_a_tuned_model_trains_with_its_modules_fields_over_recipes_defaults():
    for entry in MODELS:
        recipe = effective_recipe(entry.name, "cpu", CIFAR)
        assert recipe == (Recipe(**entry.recipe) if entry.recipe else PLUGIN_RECIPES["small"])
        for field, value in (entry.recipe or {}).items():
            assert getattr(recipe, field) == value, (entry.name, field)
    assert effective_recipe("fastnet", "cpu", CIFAR).lr != Recipe().lr  # fastnet's own lr, not the default


@pytest.mark.parametrize("image_size,kind", [(8, "small"), (32, "small"), (64, "small"), (65, "large"),
                                             (224, "large")])
def test_a_model_roarfast_has_not_tuned_takes_the_default_of_its_image_size(image_size, kind):
    for name in ("mymod:net", "timm:resnet18", "object:mine"):
        assert effective_recipe(name, "cpu", DataSize(1000, image_size)) == PLUGIN_RECIPES[kind]


def test_the_users_flags_override_the_tuned_recipe_field_by_field():
    base = effective_recipe("fastnet", "cpu", CIFAR)
    flagged = effective_recipe("fastnet", "cpu", CIFAR, user(epochs=3, batch_size=32, amp="fp16"))
    assert (flagged.epochs, flagged.batch_size, flagged.amp) == (3, 32, "fp16")
    assert flagged.replace(epochs=base.epochs, batch_size=base.batch_size, amp=base.amp) == base
    untuned = effective_recipe("mymod:net", "cpu", DataSize(1000, 224), user(epochs=2))
    assert untuned == PLUGIN_RECIPES["large"].replace(epochs=2)


def test_recipe_overrides_win_over_the_flags_and_the_tuned_recipe():
    recipe = effective_recipe("fastnet", "cpu", CIFAR, user(epochs=3, batch_size=32, amp="bf16",
                                                          overrides={"epochs": 5, "batch_size": 64, "amp": None,
                                                                     "lr": 0.01}))
    assert (recipe.epochs, recipe.batch_size, recipe.amp, recipe.lr) == (5, 64, None, 0.01)
    # the fields no one set keep the tuned recipe's values
    assert recipe.replace(epochs=8, batch_size=128, lr=tuned("fastnet").lr) == tuned("fastnet")
    # an --recipe amp is an --amp choice too: "off" is fp32, "auto" the device's
    assert effective_recipe("fastnet", "cpu", CIFAR, user(amp="bf16", overrides={"amp": "off"})).amp is None
    assert effective_recipe("fastnet", "cpu", CIFAR, user(amp="off", overrides={"amp": "fp16"})).amp == "fp16"
    # an override to a later field's default wins over a tuned recipe that sets it otherwise
    airbench = effective_recipe("airbench", "cpu", CIFAR, user(overrides={"schedule": "cosine", "tta": 0}))
    assert tuned("airbench").schedule == "linear" and (airbench.schedule, airbench.tta) == ("cosine", 0)


@pytest.mark.parametrize("name", ["fastnet", "fastnet-gpu", "airbench", "mymod:net"])
def test_a_gpu_scales_the_batch_and_learning_rate_before_the_users_fields(name):
    cpu = effective_recipe(name, "cpu", CIFAR)
    gpu = effective_recipe(name, "cuda", CIFAR)
    assert gpu.batch_size == 4 * cpu.batch_size and gpu.lr == pytest.approx(4 * cpu.lr)
    assert (gpu.eval_batch_size, gpu.amp) == (GPU_EVAL_BATCH_SIZE, "bf16")
    assert gpu.replace(batch_size=cpu.batch_size, lr=cpu.lr, eval_batch_size=cpu.eval_batch_size, amp=cpu.amp) == cpu
    # what the user sets is taken as set, never scaled
    flagged = effective_recipe(name, "cuda", CIFAR,
                               user(batch_size=32, overrides={"lr": 0.01, "eval_batch_size": 100}))
    assert (flagged.batch_size, flagged.lr, flagged.eval_batch_size) == (32, 0.01, 100)
    assert effective_recipe(name, "cuda", CIFAR, user(amp="off")).amp is None


@pytest.mark.parametrize("train_images,scale", [(None, 4), (45_000, 4), (4_500, 1), (20_000, 2), (100, 1)])
def test_gpu_batch_keeps_enough_steps_per_epoch(train_images, scale):
    # fastnet-gpu's base batch is 256: CIFAR-10's 45,000 images take the full 4x; the embedded 4,500 none
    base = effective_recipe("fastnet-gpu", "cpu", DataSize(train_images, 32))
    gpu = effective_recipe("fastnet-gpu", "cuda", DataSize(train_images, 32))
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
    recipe = effective_recipe(name, device, CIFAR, user(**fields))
    record = recipe.to_dict()
    assert json.loads(json.dumps(record)) == record == effective_recipe(name, device, CIFAR, user(**fields)).to_dict()
    assert Recipe.from_dict(record) == recipe
    assert set(Recipe().to_dict()) <= set(record) <= set(Recipe().to_dict()) | set(LATER_FIELDS)


def test_each_stage_reads_the_sizes_of_its_own_options_and_every_stage_the_rest():
    """train's options size the base model, retrain's and a sweep's grid the cells (which take no --batch-size); a
    sweep's base model reads its grid's --amp and --recipe, never its --epochs (they are the cells'); a Dataset or
    a dry run's outline is read as its training split and image side."""
    data = SimpleNamespace(train_index=range(3000), image_size=28)
    shared = {"amp": "off", "recipe": {"lr": 0.01, "warmup": 0.3}}
    no_base_model = SimpleNamespace(head=lambda: SimpleNamespace(base=None), model_meta=lambda base: {})
    for name in ("mymod:net", "resnet8"):
        plain = effective_recipe(name, "cuda", DataSize(3000, 28), TrainOptions(**shared))
        assert plain == effective_recipe(name, "cuda", DataSize(3000, 28)).replace(amp=None, lr=0.01, warmup=0.3)
        sized, spec = plain.replace(epochs=3), SimpleNamespace(name=name)
        assert effective_recipe(spec, "cuda", data, TrainOptions(epochs=3, **shared)) == sized
        assert effective_recipe(spec, "cuda", data, TrainOptions(epochs=3, batch_size=8, **shared)) == \
            sized.replace(batch_size=8)
        assert effective_recipe(spec, "cuda", data, CellOptions(epochs=3, **shared)) == sized
        grid = Grid(epochs=3, **shared)
        assert effective_recipe(spec, "cuda", data, grid) == sized  # its cells
        assert effective_recipe(spec, "cuda", data, grid, stage=BASE_MODEL) == plain  # its base model
        assert effective_recipe(spec, "cuda", data, TrainOptions(epochs=3, **shared), stage=CELLS) == plain
    cells = cell_model(no_base_model, data, "cuda", "resnet8")  # retrain's: the model, then its recipe
    assert (cells.name, effective_recipe(cells, "cuda", data, CellOptions(model="resnet8", epochs=3, **shared))) == \
        ("resnet8", effective_recipe("resnet8", "cuda", DataSize(3000, 28), TrainOptions(epochs=3, **shared)))
    with pytest.raises(ValueError, match="stage should be 'base model' or 'cells', got 'extract'"):
        effective_recipe("resnet8", "cpu", data, stage="extract")
