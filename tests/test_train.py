"""Training: the loop against a straight-line reference, seeded determinism on CPU, model selection on val,
masking of every split, the schedule, run_train's checkpoint, data parallelism, and (slow) the CPU default
learning the embedded dataset."""

import copy
import json
import math

import pytest
import torch

from roarfast import ops
from roarfast.stages.basemodel import TrainOptions, run_train
from roarfast.records.checkpoint import load_checkpoint
from roarfast.data import load_dataset
from roarfast.data.augment import Augment
from roarfast.data.loader import DeviceLoader, pattern_loader, split_loader
from roarfast.errors import UserError
from roarfast.models import resolve_model
from roarfast.recipe import DataSize, Recipe, effective_recipe, resolve_amp
from roarfast.rundir.directory import RunDir
from roarfast.train import Masking, accuracy, train_classifier
from roarfast.train.classifier import init_model
from roarfast.train.evaluation import Selection
from roarfast.train.state import lr_at

pytestmark = pytest.mark.minutes(1)  # on 2 cores: collected early (tests/conftest.py)

TINY = Recipe(epochs=2, batch_size=32, lr=0.05)


@pytest.fixture(scope="module")
def tiny():
    return load_dataset("embedded", num_train=200, num_test=60, seed=0)


def _reference_training(ds, recipe: Recipe, seed: int, masking: Masking | None):
    """The training loop written straight through in fp32 on CPU, from the model, the loaders and torch alone:
    (val_acc, test_acc, best_epoch, [(lr, train_loss, val_acc) per epoch], final state dict)."""
    options = dict(out_dtype=torch.float32, channels_last=recipe.channels_last)
    loaders = {}
    for split in ("train", "test"):
        ranks = None if masking is None else getattr(masking, f"{split}_ranks")
        if masking is not None and masking.mask_only:
            loaders[split] = pattern_loader(ds, split, "cpu", ranks=ranks, fraction=masking.fraction,
                                            keep=masking.keep, **options)
        elif masking is not None:
            loaders[split] = split_loader(ds, split, "cpu", ranks=ranks, fraction=masking.fraction, keep=masking.keep,
                                          fill=masking.fill, **options)
        else:
            loaders[split] = split_loader(ds, split, "cpu", **options)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        net = resolve_model("fastnet").build(ds.num_classes, ds.image_size, ds.channels)
    net = net.to(memory_format=torch.channels_last) if recipe.channels_last else net
    ema = copy.deepcopy(net).eval() if recipe.ema_decay is not None else None
    params = list(net.parameters())
    optimizer = torch.optim.SGD([{"params": [p for p in params if p.dim() > 1], "weight_decay": recipe.weight_decay},
                                 {"params": [p for p in params if p.dim() <= 1], "weight_decay": 0.0}],
                                lr=recipe.lr, momentum=recipe.momentum, nesterov=True)
    per_epoch = len(ds.train_index) // recipe.batch_size
    total = per_epoch * recipe.epochs
    warm = max(1, round(recipe.warmup * total))
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: 0.1 + 0.9 * s / warm if s < warm else
                                                 0.5 * (1 + math.cos(math.pi * (s - warm) / max(1, total - warm))))
    loss_fn = torch.nn.CrossEntropyLoss(label_smoothing=recipe.label_smoothing)
    generator = torch.Generator().manual_seed(seed)
    augment = Augment(flip=recipe.flip, translate=recipe.translate)

    @torch.no_grad()
    def score(model, loader, index):
        model.eval()
        correct = sum(int((model(x).argmax(1) == y).sum()) for x, y in loader.batches(index, recipe.eval_batch_size))
        return correct / len(index)

    best, history = (-1.0, 0, None), []
    for epoch in range(1, recipe.epochs + 1):
        net.train()
        loss_sum = torch.zeros(())
        for x, y in loaders["train"].batches(ds.train_index, recipe.batch_size, shuffle=True, augment_spec=augment,
                                             generator=generator, drop_last=True):
            logits = net(x)
            loss = loss_fn(logits.float(), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            schedule.step()
            if ema is not None:
                with torch.no_grad():
                    for e, p in zip(ema.parameters(), net.parameters()):
                        e.lerp_(p, 1.0 - recipe.ema_decay)
                    for e, b in zip(ema.buffers(), net.buffers()):
                        e.copy_(b)
            loss_sum += loss.detach() * y.shape[0]
        val_acc = score(ema if ema is not None else net, loaders["train"], ds.val_index)
        history.append((optimizer.param_groups[0]["lr"], float(loss_sum) / (per_epoch * recipe.batch_size), val_acc))
        if val_acc > best[0]:
            best = (val_acc, epoch, copy.deepcopy((ema if ema is not None else net).state_dict()))
    net.load_state_dict(best[2])
    test_acc = score(net, loaders["test"], torch.arange(len(ds.test)))
    return best[0], test_acc, best[1], history, net.state_dict()


def _random_ranks(n: int, seed: int) -> torch.Tensor:
    return ops.rank(torch.rand(n, 32, 32, generator=torch.Generator().manual_seed(seed)))


@pytest.mark.parametrize("masked,ema", [(None, True), ("kar", False), ("control", True)])
def test_the_loop_equals_a_straight_line_reference(tiny, masked, ema):
    """State, step and selection together train exactly as the loop written straight through: the same
    accuracies, selected epoch, per-epoch learning rate, loss and val accuracy, and bit-identical weights."""
    recipe = TINY.replace(epochs=3, ema_decay=0.9 if ema else None)
    masking = None
    if masked is not None:
        masking = Masking(train_ranks=_random_ranks(len(tiny.train), 1), test_ranks=_random_ranks(len(tiny.test), 2),
                          fraction=0.4, keep=masked == "kar", fill=(0.5, -0.5, 0.0), mask_only=masked == "control")
    val_acc, test_acc, best_epoch, history, weights = _reference_training(tiny, recipe, 3, masking)
    result = train_classifier(tiny, "fastnet", recipe, "cpu", seed=3, masking=masking, progress=False)
    assert (result.val_acc, result.test_acc, result.best_epoch) == (val_acc, test_acc, best_epoch)
    assert [(h["lr"], h["train_loss"], h["val_acc"]) for h in result.history] == history
    trained = result.model.state_dict()
    assert trained.keys() == weights.keys()
    for key, value in weights.items():
        assert torch.equal(trained[key], value), key


def test_selection_keeps_the_earliest_best_epoch_as_a_copy():
    model = torch.nn.Linear(2, 1)
    selection = Selection()
    for epoch, val_acc in enumerate([0.3, 0.5, 0.5, 0.4], start=1):
        selection.offer(val_acc, epoch, model)
        with torch.no_grad():
            model.weight.add_(1.0)  # the next epoch's weights
    assert (selection.val_acc, selection.epoch) == (0.5, 2)
    torch.testing.assert_close(selection.weights["weight"], model.weight.detach() - 3.0)


def test_same_seed_same_weights_other_seed_other_weights(tiny):
    a = train_classifier(tiny, "fastnet", TINY, "cpu", seed=0, progress=False)
    b = train_classifier(tiny, "fastnet", TINY, "cpu", seed=0, progress=False)
    c = train_classifier(tiny, "fastnet", TINY, "cpu", seed=1, progress=False)
    for key, value in a.model.state_dict().items():
        assert torch.equal(value, b.model.state_dict()[key]), key
    assert [h["train_loss"] for h in a.history] == [h["train_loss"] for h in b.history]
    assert not torch.equal(a.model.head.weight, c.model.head.weight)


def test_returned_model_is_the_one_selected_on_val(tiny):
    recipe = TINY.replace(epochs=3)
    result = train_classifier(tiny, "fastnet", recipe, "cpu", seed=2, progress=False)
    val = [h["val_acc"] for h in result.history]
    assert result.val_acc == max(val) and result.best_epoch == val.index(max(val)) + 1
    assert len(result.history) == result.epochs == 3
    loader = DeviceLoader(tiny.train.images, tiny.train.labels, tiny.mean, tiny.std, "cpu")
    assert accuracy(result.model, loader, tiny.val_index, recipe) == result.val_acc
    test_loader = DeviceLoader(tiny.test.images, tiny.test.labels, tiny.mean, tiny.std, "cpu")
    assert accuracy(result.model, test_loader, torch.arange(60), recipe) == result.test_acc


def test_masking_reaches_train_val_and_test(tiny):
    """ROAR at fraction 1 replaces every pixel of every split: the model sees constants, so its one
    prediction is right exactly for the images of one class."""
    n_train, n_test = len(tiny.train), len(tiny.test)
    masking = Masking(train_ranks=torch.zeros(n_train, 32, 32, dtype=torch.int32),
                      test_ranks=torch.zeros(n_test, 32, 32, dtype=torch.int32), fraction=1.0, keep=False)
    result = train_classifier(tiny, "fastnet", TINY, "cpu", seed=0, masking=masking, progress=False)
    test_counts = torch.bincount(tiny.test.labels, minlength=10).tolist()
    val_counts = torch.bincount(tiny.train.labels[tiny.val_index], minlength=10).tolist()
    assert result.test_acc in [count / n_test for count in test_counts]
    assert result.val_acc in [count / len(tiny.val_index) for count in val_counts]


def test_learning_rate_schedule():
    recipe = Recipe(warmup=0.2)
    assert lr_at(0, 100, recipe) == pytest.approx(0.1)
    assert lr_at(20, 100, recipe) == pytest.approx(1.0)
    assert lr_at(60, 100, recipe) == pytest.approx(0.5)
    assert lr_at(100, 100, recipe) == pytest.approx(0.0, abs=1e-12)


@pytest.mark.parametrize("choice,device,expected", [("auto", "cpu", None), ("auto", "cuda", "bf16"),
                                                    ("off", "cuda", None), ("bf16", "cpu", "bf16"),
                                                    ("fp16", "cuda", "fp16")])
def test_amp_choices(choice, device, expected):  # on a CPU without native bf16 (conftest)
    assert resolve_amp(choice, device) == expected


@pytest.mark.parametrize("avx512_bf16, amx, trained", [(True, False, "bf16"), (False, True, "bf16"),
                                                       (False, False, None)])
def test_auto_trains_in_bf16_on_a_cpu_that_computes_it_natively_and_attributes_in_fp32(monkeypatch, avx512_bf16,
                                                                                       amx, trained):
    from roarfast.recipe import autocast_dtype

    monkeypatch.delenv("ROARFAST_NATIVE_BF16")  # what the CPU reports, here the stand-ins below
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: avx512_bf16)
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: amx)
    assert resolve_amp("auto", "cpu") == trained
    assert effective_recipe("fastnet", "cpu", DataSize(4500, 32)).amp == trained
    assert autocast_dtype("auto", "cpu") is None  # attributions on a CPU: fp32 whatever the CPU
    assert autocast_dtype("auto", "cuda") == torch.bfloat16 and autocast_dtype("off", "cuda") is None
    assert resolve_amp("off", "cpu") is None  # asked for fp32: fp32 even where bf16 is native
    monkeypatch.setenv("ROARFAST_NATIVE_BF16", "1" if trained is None else "0")  # the override wins
    assert resolve_amp("auto", "cpu") == ("bf16" if trained is None else None)
    monkeypatch.setenv("ROARFAST_NATIVE_BF16", "yes")
    with pytest.raises(UserError, match="ROARFAST_NATIVE_BF16 should be 0 or 1, got 'yes'"):
        resolve_amp("auto", "cpu")


@pytest.mark.parametrize("options, flag", [({"amp": "fp8"}, "--amp should be one of auto, off, bf16, fp16"),
                                           ({"epochs": 0}, "--epochs should be a positive int"),
                                           ({"batch_size": 2.5}, "--batch-size should be a positive int")])
def test_bad_train_options_are_refused_where_they_enter(options, flag):
    with pytest.raises(UserError, match=flag):
        TrainOptions(**options)


@pytest.mark.parametrize("amp,dtype", [("fp16", torch.float16), ("bf16", torch.bfloat16)])
def test_mixed_precision_training(tiny, monkeypatch, amp, dtype):
    """The model sees inputs in the autocast dtype; fp16 scales the loss (bf16 does not); the weights stay
    fp32 and the model learns (CPU autocast runs the same code path as CUDA's)."""
    scaled = []
    real_scale = torch.amp.GradScaler.scale
    monkeypatch.setattr(torch.amp.GradScaler, "scale",
                        lambda self, loss: scaled.append(self.is_enabled()) or real_scale(self, loss))
    seen = []
    real_init = init_model

    def hooked_init(*args):
        model = real_init(*args)
        model.register_forward_pre_hook(lambda module, inputs: seen.append(inputs[0].dtype))
        return model

    monkeypatch.setattr("roarfast.train.classifier.init_model", hooked_init)
    result = train_classifier(tiny, "fastnet", TINY.replace(amp=amp, epochs=4), "cpu", seed=0, progress=False)
    assert set(seen) == {dtype}
    assert scaled and set(scaled) == {amp == "fp16"}
    assert all(p.dtype == torch.float32 and torch.isfinite(p).all() for p in result.model.parameters())
    assert result.history[-1]["train_loss"] < result.history[0]["train_loss"]


def test_run_train_writes_a_checkpoint_that_reproduces_its_accuracy(tmp_path, tiny):
    summary = run_train(tmp_path, TrainOptions(model="resnet8", epochs=1, batch_size=32), dataset_obj=tiny, seed=0,
                        device="cpu", progress=False)
    directory = RunDir(tmp_path).base_checkpoint
    assert summary["checkpoint"] == str(directory)
    model, meta = load_checkpoint(directory)
    assert meta["dataset_fingerprint"] == tiny.fingerprint and meta["model"] == "resnet8"
    assert meta["versions"]["torch"] == torch.__version__ and meta["recipe"]["epochs"] == 1
    assert json.loads((directory / "meta.json").read_text())["test_acc"] == summary["test_acc"]
    loader = DeviceLoader(tiny.test.images, tiny.test.labels, tiny.mean, tiny.std, "cpu")
    assert accuracy(model, loader, torch.arange(len(tiny.test)), Recipe()) == summary["test_acc"]


@pytest.mark.slow
def test_cpu_default_learns_the_embedded_dataset_from_the_object_only():
    """README, "The embedded dataset": the CPU default learns the embedded set (>= 90%), and with the object removed
    (oracle ROAR at the covering fraction 64/1024) nothing is left to learn (near chance)."""
    ds = load_dataset("embedded")
    recipe = effective_recipe("fastnet", "cpu", ds)
    base = train_classifier(ds, "fastnet", recipe, "cpu", seed=0, progress=False)
    assert base.test_acc >= 0.90
    oracle = Masking(train_ranks=ops.rank(ds.train.masks.float()), test_ranks=ops.rank(ds.test.masks.float()),
                     fraction=0.0625, keep=False)
    removed = train_classifier(ds, "fastnet", recipe, "cpu", seed=0, masking=oracle, progress=False)
    assert removed.test_acc <= 0.10 + 0.05


def _ddp_worker(rank, world, init_file, out_dir):
    from safetensors.torch import save_file

    from tests.ddp import gloo_group

    torch.set_num_threads(1)
    with gloo_group(rank, world, init_file):
        ds = load_dataset("embedded", num_train=120, num_test=40, seed=0)
        result = train_classifier(ds, "fastnet", TINY.replace(epochs=1), "cpu", seed=0, progress=False)
        state = {k: v.contiguous() for k, v in result.model.state_dict().items()}
        save_file(state, str(out_dir / f"rank{rank}.safetensors"),
                  metadata={"val_acc": repr(result.val_acc), "test_acc": repr(result.test_acc)})


def test_data_parallel_ranks_end_identical(tmp_path):
    """Two gloo ranks (DDP on CPU): same weights, BN statistics and accuracies at the end."""
    from safetensors import safe_open

    torch.multiprocessing.spawn(_ddp_worker, args=(2, tmp_path / "init", tmp_path), nprocs=2, join=True)
    opened = [safe_open(str(tmp_path / f"rank{r}.safetensors"), framework="pt") for r in range(2)]
    assert opened[0].metadata() == opened[1].metadata()
    keys = sorted(opened[0].keys())
    assert keys == sorted(opened[1].keys()) and "head.weight" in keys
    for key in keys:
        assert torch.equal(opened[0].get_tensor(key), opened[1].get_tensor(key)), key
    # the ranks trained: weights moved from the common initialization
    fresh = init_model("fastnet", load_dataset("embedded", num_train=120, num_test=40), 0, "cpu", TINY)
    assert not torch.equal(fresh.head.weight, opened[0].get_tensor("head.weight"))


@pytest.mark.parametrize("image_size,train_images,device,expected", [
    (32, 50_000, "cuda", "airbench"), (48, 50_000, "cuda", "fastnet-gpu"), (32, 4_500, "cuda", "fastnet"),
    (32, 50_000, "cpu", "fastnet"),
    (224, 1_000, "cuda", "resnet18"), (224, 1_000, "cpu", "resnet18")])
def test_default_model_by_canvas_data_size_and_device(image_size, train_images, device, expected):
    from types import SimpleNamespace

    from roarfast.recipe import default_model

    dataset = SimpleNamespace(image_size=image_size, train=range(train_images))
    assert default_model(dataset, device) == expected
