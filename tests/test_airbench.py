"""The airbench-class model and its training: the whitening stem whitens and stays frozen, identity-initialized
convolutions, the stem fitted on a cell's own masked images, alternating flips, test-time views, the
piecewise-linear schedule and lookahead, the bias learning rate, the recipe fields that leave earlier
configuration hashes alone, what guided backprop and Grad-CAM need, and (slow) a tiny CPU training."""

from functools import partial

import pytest
import torch
from torch import nn

from roarfast import ops
from roarfast.data import load_dataset
from roarfast.models import build_model
from roarfast.models.airbench import WHITEN_BIAS_EPOCHS, WHITEN_EPS, AirbenchNet, Whitening, identity_conv
from roarfast.models.spec import ModelSpec
from roarfast.recipe import LATER_FIELDS, DataSize, Recipe, effective_recipe
from roarfast.train import Masking, train_classifier
from roarfast.train.classifier import new_member
from roarfast.train.loop import train_step
from roarfast.train.state import lr_at, new_state
from roarfast.train.views import alternate_flips, tta_logits

#: airbench's CPU recipe
AIRBENCH_CPU = effective_recipe("airbench", "cpu", DataSize(4500, 32))


def _patches(images: torch.Tensor, k: int = 2) -> torch.Tensor:
    """Every k x k patch of images as rows (C, kh, kw order), in float64."""
    c = images.shape[1]
    return images.double().unfold(2, k, 1).unfold(3, k, 1).permute(0, 2, 3, 1, 4, 5).reshape(-1, c * k * k)


def test_the_whitening_stem_whitens_its_patches_and_is_frozen():
    """On correlated images the first half of the filters maps the patches to second moments diag(l / (l + eps))
    (eigenvalues l): the identity wherever a direction holds energy well above eps; the second half is its
    negative. The weights take no gradient."""
    g = torch.Generator().manual_seed(0)
    base = torch.randn(64, 1, 16, 16, generator=g)
    images = torch.cat([base, 0.5 * base + 0.3 * torch.randn(64, 1, 16, 16, generator=g),
                        torch.randn(64, 1, 16, 16, generator=g)], 1)
    stem = Whitening(3)
    stem.fit(images)
    assert not stem.weight.requires_grad and stem.bias.requires_grad
    half = stem.weight.shape[0] // 2
    torch.testing.assert_close(stem.weight[half:], -stem.weight[:half])
    patches = _patches(images)
    outputs = patches @ stem.weight[:half].double().reshape(half, -1).T
    moment = outputs.T @ outputs / outputs.shape[0]
    eigenvalues = torch.linalg.eigvalsh(patches.T @ patches / patches.shape[0]).flip(0)
    torch.testing.assert_close(moment, torch.diag(eigenvalues / (eigenvalues + WHITEN_EPS)), rtol=1e-6, atol=1e-6)
    assert eigenvalues.min() > 100 * WHITEN_EPS  # so every direction is whitened: moment ~ identity
    torch.testing.assert_close(moment, torch.eye(half, dtype=torch.float64), rtol=0, atol=1e-2)


def test_identity_initialized_convolutions_pass_their_input_through():
    x = torch.randn(2, 8, 9, 9)
    with torch.no_grad():
        torch.testing.assert_close(identity_conv(8, 8)(x), x)
        wider = identity_conv(8, 24)(x)
    torch.testing.assert_close(wider[:, :8], x)
    assert wider[:, 8:].abs().sum() > 0  # the rest keeps torch's random initialization


def test_airbench_batch_norm_settings_and_what_attribution_needs():
    """BN with fast statistics, a tiny eps and frozen scales; nn.ReLU modules (guided backprop) and a cam_layer
    (Grad-CAM) that the estimators' checks accept; GELU on request."""
    from roarfast.methods.registry import resolve_methods
    from roarfast.methods.requirements import check_model

    model = build_model("airbench", 10)
    norms = [m for m in model.modules() if isinstance(m, nn.BatchNorm2d)]
    assert norms and all((m.momentum, m.eps, m.weight.requires_grad, m.bias.requires_grad) == (0.4, 1e-12, False, True)
                         for m in norms)
    relus = [m for m in model.modules() if isinstance(m, nn.ReLU)]
    assert len(relus) == 7 and len({id(m) for m in relus}) == 7 and not any(m.inplace for m in relus)
    assert model.cam_layer == "block3" and isinstance(model.get_submodule("block3"), nn.Module)
    check_model(model, resolve_methods("gb,gradcam").values())
    gelu = AirbenchNet(10, activation="gelu")
    kinds = {type(m) for m in gelu.modules()}
    assert nn.GELU in kinds and nn.ReLU not in kinds


def test_the_stem_is_fitted_on_the_cells_own_masked_images():
    """A cell's network fits its stem on its first init_images training images masked as it trains (here: all
    of them), so a ROAR cell's stem differs from the unmasked one's and equals a fit on the masked images."""
    ds = load_dataset("embedded", num_train=120, num_test=20, seed=0)
    spec = ModelSpec("airbench", partial(build_model, "airbench"), builtin=True)
    recipe = AIRBENCH_CPU
    ranks = [ops.rank(torch.rand(len(p), 32, 32, generator=torch.Generator().manual_seed(s)))
             for s, p in enumerate((ds.train, ds.test))]
    plain = new_member(ds, spec, recipe, torch.device("cpu"), 0, None)
    masked = new_member(ds, spec, recipe, torch.device("cpu"), 0, Masking(*ranks, fraction=0.5))
    assert not torch.allclose(plain.net.whiten.weight, masked.net.whiten.weight)
    expected = Whitening(3)
    expected.fit(masked.loaders["train"].gather(ds.train_index))
    torch.testing.assert_close(masked.net.whiten.weight, expected.weight.to(memory_format=torch.channels_last))


def test_the_stem_stays_frozen_and_its_bias_trains_for_the_first_epochs_only():
    model = AirbenchNet(10)
    model.start_epoch(WHITEN_BIAS_EPOCHS)
    assert model.whiten.bias.requires_grad
    model.start_epoch(WHITEN_BIAS_EPOCHS + 1)
    assert not model.whiten.bias.requires_grad and not model.whiten.weight.requires_grad


def test_a_step_leaves_the_frozen_stem_as_it_was():
    ds = load_dataset("embedded", num_train=120, num_test=20, seed=0)
    recipe = AIRBENCH_CPU.replace(batch_size=16)
    member = new_member(ds, "airbench", recipe, torch.device("cpu"), 0, None)
    state = new_state(member.net, [member], recipe, torch.device("cpu"), total_steps=10)
    weight = member.net.whiten.weight.clone()
    x, y = member.loaders["train"].gather(ds.train_index[:16]), ds.train.labels[ds.train_index[:16]]
    train_step(state, [(x, y)])
    assert torch.equal(member.net.whiten.weight, weight)


def test_alternating_flips_flip_complementary_halves_epoch_to_epoch():
    """Each image is flipped in every other epoch: epoch 1 flips the drawn half, epoch 2 the other half."""
    x = torch.arange(6 * 4, dtype=torch.float32).view(6, 1, 1, 4)
    rows = torch.arange(6)
    flips = torch.tensor([True, False, True, True, False, False])
    batches = lambda: iter([(x, rows % 2, rows)])  # noqa: E731

    def flipped(epoch):
        (out, _), = list(alternate_flips(batches(), flips, epoch))
        return torch.tensor([torch.equal(o, i.flip(2)) for o, i in zip(out, x)])

    assert torch.equal(flipped(1), flips) and torch.equal(flipped(2), ~flips) and torch.equal(flipped(3), flips)
    (same, _), = list(alternate_flips(batches(), None, 2))
    assert torch.equal(same, x)


def test_test_time_views_average_as_written_out_by_hand():
    """Level 1: the image and its mirror image; level 2: half that plus a quarter each of the same on the image
    shifted one pixel down-right and up-left (zero padded)."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Flatten(), nn.Linear(2 * 5 * 5, 3))
    x = torch.randn(4, 2, 5, 5)
    mirror = lambda v: 0.5 * model(v) + 0.5 * model(v.flip(3))  # noqa: E731
    down_right = torch.zeros_like(x)
    down_right[:, :, 1:, 1:] = x[:, :, :-1, :-1]
    up_left = torch.zeros_like(x)
    up_left[:, :, :-1, :-1] = x[:, :, 1:, 1:]
    with torch.no_grad():
        torch.testing.assert_close(tta_logits(model, x, 0), model(x))
        torch.testing.assert_close(tta_logits(model, x, 1), mirror(x))
        torch.testing.assert_close(tta_logits(model, x, 2),
                                   0.5 * mirror(x) + 0.25 * mirror(down_right) + 0.25 * mirror(up_left))


def test_the_linear_schedule_and_the_bias_learning_rate():
    recipe = AIRBENCH_CPU
    total = 100
    assert lr_at(0, total, recipe) == pytest.approx(0.2)
    assert lr_at(23, total, recipe) == pytest.approx(1.0)
    assert lr_at(total, total, recipe) == pytest.approx(0.07)
    assert lr_at(11, total, recipe) == pytest.approx(0.2 + 0.8 * 11 / 23)
    state = new_state(AirbenchNet(10), [], recipe, torch.device("cpu"), total)
    weights, biases = state.optimizer.param_groups
    assert (biases["initial_lr"], biases["weight_decay"]) == pytest.approx((recipe.lr * 64, recipe.weight_decay / 64))
    # as much decay per step on a bias as on a weight, and the schedule scales both groups alike
    assert biases["lr"] * biases["weight_decay"] == pytest.approx(weights["lr"] * weights["weight_decay"])
    assert biases["lr"] / biases["initial_lr"] == weights["lr"] / weights["initial_lr"] == pytest.approx(0.2)


def test_lookahead_leaves_the_weights_at_their_slow_copy_after_the_last_step():
    ds = load_dataset("embedded", num_train=120, num_test=20, seed=0)
    recipe = AIRBENCH_CPU.replace(batch_size=16)
    member = new_member(ds, "airbench", recipe, torch.device("cpu"), 0, None)
    state = new_state(member.net, [member], recipe, torch.device("cpu"), total_steps=3)
    index = ds.train_index[:16]
    batch = (member.loaders["train"].gather(index), ds.train.labels[index])
    start = member.net.head.weight.detach().clone()
    for _ in range(2):
        train_step(state, [batch])
    assert not torch.equal(member.net.head.weight, state.lookahead["head.weight"])  # not pulled before step 5
    train_step(state, [batch])
    for name, slow in state.lookahead.items():
        assert torch.equal(member.net.state_dict()[name], slow), name
    torch.testing.assert_close(member.net.head.weight, start)  # never pulled: the slow copy is the start


def test_new_recipe_fields_leave_earlier_configuration_hashes_alone():
    """A row's configuration holds Recipe.to_dict: the fields added for airbench appear only when set."""
    assert set(Recipe().to_dict()) == {"epochs", "batch_size", "lr", "momentum", "weight_decay", "label_smoothing",
                                       "warmup", "ema_decay", "flip", "translate", "amp", "channels_last",
                                       "eval_batch_size"}
    airbench = AIRBENCH_CPU.to_dict()
    # the airbench fields it sets are recorded; pad and select, at their defaults, are not (airbench's ids hold)
    assert set(LATER_FIELDS) - {"pad", "select"} <= set(airbench) and airbench["tta"] == 2
    assert not {"pad", "select"} & set(airbench)
    assert Recipe(**airbench) == AIRBENCH_CPU


def test_airbench_gpu_recipe_is_airbench94s_batch_and_learning_rate():
    """On a GPU with CIFAR-10's 45,000 training images: batch 1,024 at lr 1.5 (airbench's 11.5 per 1,024
    images over a summed loss, momentum 0.85)."""
    gpu = effective_recipe("airbench", "cuda", DataSize(45_000, 32))
    assert (gpu.batch_size, gpu.lr, gpu.momentum, gpu.amp) == (1024, pytest.approx(1.5), 0.85, "bf16")


def test_airbench_is_deterministic_under_a_seed():
    ds = load_dataset("embedded", num_train=120, num_test=40, seed=0)
    small = ModelSpec("airbench-small", lambda c, s, i: AirbenchNet(c, i, widths=(8, 16, 16)), builtin=True)
    recipe = AIRBENCH_CPU.replace(epochs=2, batch_size=32)
    a, b = (train_classifier(ds, small, recipe, "cpu", seed=3, progress=False) for _ in range(2))
    assert (a.test_acc, a.val_acc) == (b.test_acc, b.val_acc)
    for key, value in a.model.state_dict().items():
        assert torch.equal(value, b.model.state_dict()[key]), key


@pytest.mark.slow
def test_a_tiny_airbench_learns_the_embedded_dataset_on_cpu():
    """airbench's recipe (whitening from the data, lookahead, alternating flips, TTA) at reduced widths, 4
    epochs on 1,000 images: far above the 10% chance (about 85% measured)."""
    ds = load_dataset("embedded", num_train=1000, num_test=300, seed=0)
    small = ModelSpec("airbench-small", lambda c, s, i: AirbenchNet(c, i, widths=(16, 32, 32)), builtin=True)
    recipe = AIRBENCH_CPU.replace(epochs=4, batch_size=64, lr=0.375 * 64 / 256)
    result = train_classifier(ds, small, recipe, "cpu", seed=0, progress=False)
    assert result.test_acc >= 0.5
