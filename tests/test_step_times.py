"""The step-time record (roarfast.stages.step_times): seconds measured on this machine kept per device, model, canvas
and step settings, so a dry run measures a model once; a real training's seconds win over a measured step's; a
damaged record is measured again, never used."""

import logging
from types import SimpleNamespace

import pytest
import torch

from roarfast.planning import estimate

from roarfast.stages import step_times
from roarfast.models import resolve_model
from roarfast.recipe import Recipe

CPU = torch.device("cpu")


class Splits(SimpleNamespace):
    def __len__(self):
        return self.images


def data(size: int = 16):
    return SimpleNamespace(name="toy", num_classes=4, image_size=size, channels=3, val_images=10,
                           train=Splits(shape=(3, size, size), images=100), train_index=range(90), test=range(40))


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("ROARFAST_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def no_measuring(*args, **kwargs):
    raise AssertionError("measured again where the record holds the times")


def test_a_measured_step_is_kept_and_read_back_instead_of_measuring_again(cache_dir, monkeypatch):
    spec, recipe = resolve_model("fastnet"), Recipe(epochs=2, batch_size=16, amp=None)
    first = estimate.training_times(spec, recipe, data(), CPU)
    assert first.source == "a step measured now" and first.train_image > 0 and first.eval_image > 0
    monkeypatch.setattr(estimate, "measure_steps", no_measuring)
    again = estimate.training_times(spec, recipe.replace(epochs=9, lr=0.3), data(), CPU)  # the same work a step
    assert (again.train_image, again.eval_image) == (first.train_image, first.eval_image)
    assert again.source == "a step measured here earlier"


def test_the_key_holds_what_changes_a_step_and_the_threads_it_ran_with(cache_dir):
    spec, recipe = resolve_model("fastnet"), Recipe(batch_size=16, amp=None)

    def key(**changes):
        return step_times.key("training", CPU, spec, data(), step_times.training_settings(recipe.replace(**changes)))

    assert key(lr=0.5, epochs=30, weight_decay=0.0) == key()
    assert len({key(), key(batch_size=32), key(amp="bf16"), key(channels_last=False), key(tta=1)}) == 5
    assert step_times.key("training", CPU, spec, data(32), step_times.training_settings(recipe)) != key()
    threads, before = torch.get_num_threads(), key()
    try:
        torch.set_num_threads(threads + 1)
        assert key() != before
    finally:
        torch.set_num_threads(threads)


def test_a_real_training_replaces_a_measured_step_and_is_never_replaced_by_one(cache_dir, monkeypatch):
    spec, recipe = resolve_model("fastnet"), Recipe(epochs=2, batch_size=16, amp=None)
    ds = data()
    measured = estimate.training_times(spec, recipe, ds, CPU)
    # a training of 2 epochs: 5 steps of 16 of the 90 training images an epoch, 10 validated an epoch, 40 tested
    step_times.remember_training(CPU, spec, ds, recipe, seconds=12.0)
    trained = estimate.training_times(spec, recipe, ds, CPU)
    assert trained.source == "a training here"
    share = measured.eval_image / measured.train_image  # the split of its seconds the measured step gave
    assert trained.train_image == pytest.approx(12.0 / (2 * 80 + share * (2 * 10 + 40)))
    assert trained.eval_image == pytest.approx(share * trained.train_image)
    assert estimate.training_seconds(trained, recipe, ds) == pytest.approx(12.0)
    step_times.remember_training(CPU, spec, ds, recipe, seconds=24.0)  # a slower one moves it a fifth of the way
    assert estimate.training_seconds(estimate.training_times(spec, recipe, ds, CPU), recipe, ds) == pytest.approx(
        0.8 * 12.0 + 0.2 * 24.0)
    trained = estimate.training_times(spec, recipe, ds, CPU)
    key = step_times.key("training", CPU, spec, ds, step_times.training_settings(recipe))
    step_times.remember(key, {"train_image": 1.0, "eval_image": 1.0}, real=False)
    assert estimate.training_times(spec, recipe, ds, CPU).train_image == trained.train_image


def test_a_damaged_record_is_measured_again_with_a_note(cache_dir, caplog):
    spec, recipe = resolve_model("fastnet"), Recipe(epochs=2, batch_size=16, amp=None)
    estimate.training_times(spec, recipe, data(), CPU)
    (record,) = (cache_dir / step_times.KIND).glob("*.json")
    record.write_text(record.read_text().replace('"train_image": ', '"train_image": 1'))
    with caplog.at_level(logging.WARNING):
        again = estimate.training_times(spec, recipe, data(), CPU)
    assert again.source == "a step measured now"
    assert any(str(record) in message and "measuring it again" in message for message in caplog.messages)


def test_a_step_shape_counts_a_convolution_as_torch_defines_it(cache_dir):
    """One 3x3 convolution, 3 -> 8 channels, padding 1, on 16 x 16: 2 x 8 x 16 x 16 x 3 x 9 FLOPs forward; its
    backward computes the weights' gradient (as many) and no input gradient (the input needs none)."""
    from roarfast.models.spec import ModelSpec

    def factory(classes, size, channels):
        return torch.nn.Sequential(torch.nn.Conv2d(channels, 8, 3, padding=1, bias=False), torch.nn.Flatten(),
                                   torch.nn.Linear(8 * size * size, classes, bias=False))

    shape = estimate.step_shape(ModelSpec(name="tiny", factory=factory), data())
    conv, linear = 2 * 8 * 16 * 16 * 3 * 9, 2 * 8 * 16 * 16 * 4
    assert shape.eval_flops == conv + linear
    assert shape.train_flops == 2 * conv + 3 * linear  # the linear layer's input gradient too
    assert shape.parameters == 8 * 3 * 9 + 8 * 16 * 16 * 4
    # kept for the backward: the input (the convolution's), the convolution's output (the linear layer's input)
    assert shape.activation_bytes == 4 * (3 * 16 * 16 + 8 * 16 * 16)
