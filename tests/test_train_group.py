"""Cells trained together (roarfast.train.group): a group of runs gives each run's results as if trained alone
(bit for bit as a loop of states, or on CUDA streams on a CPU; within float tolerance fused), one run's
failure ends only that run, and a group of one is train_classifier."""

import pytest
import torch

from roarfast import ops
from roarfast.data import load_dataset
from roarfast.errors import UserError
from roarfast.recipe import Recipe
from roarfast.train import Grouping, Masking, Run, train_classifier, train_group
from roarfast.train import loop
from roarfast.train.fused import NotFusable, fuse, member_weights, stack_weights

TINY = Recipe(epochs=2, batch_size=32, lr=0.05)


@pytest.fixture(scope="module")
def tiny():
    return load_dataset("embedded", num_train=200, num_test=60, seed=0)


def _ranks(n: int, seed: int) -> torch.Tensor:
    return ops.rank(torch.rand(n, 32, 32, generator=torch.Generator().manual_seed(seed)))


@pytest.fixture(scope="module")
def mixed(tiny):
    """A mask-only control, a KAR cell and a ROAR cell of other fractions, each its own seed and ranks."""
    ranks = [(_ranks(len(tiny.train), 2 * s), _ranks(len(tiny.test), 2 * s + 1)) for s in range(3)]
    return [Run(seed=0, masking=Masking(*ranks[0], fraction=0.5, mask_only=True)),
            Run(seed=1, masking=Masking(*ranks[1], fraction=0.3, keep=True, fill=(0.5, -0.5, 0.0))),
            Run(seed=2, masking=Masking(*ranks[2], fraction=0.7))]


@pytest.fixture(scope="module")
def alone(tiny, mixed):
    return [train_classifier(tiny, "fastnet", TINY, "cpu", seed=run.seed, masking=run.masking, progress=False)
            for run in mixed]


def _assert_same(result, reference):
    assert (result.val_acc, result.test_acc, result.best_epoch) == (reference.val_acc, reference.test_acc,
                                                                     reference.best_epoch)
    assert result.history == [{**h, "seconds": e["seconds"]} for h, e in zip(reference.history, result.history)]
    got, expected = result.model.state_dict(), reference.model.state_dict()
    assert got.keys() == expected.keys()
    for key, value in expected.items():
        assert torch.equal(got[key], value), key


@pytest.mark.parametrize("how", ["loop", "streams"])
def test_a_mixed_group_gives_each_run_its_result_alone_bit_for_bit(tiny, mixed, alone, how):
    """A control, a KAR cell and a ROAR cell (other seeds, fractions, fill) in one loop: the same accuracies,
    selected epochs, history and weights as each trained alone (on a CPU, streams are the loop)."""
    results = train_group(tiny, "fastnet", TINY, "cpu", mixed, Grouping(size=3, how=how))
    for result, reference in zip(results, alone):
        _assert_same(result, reference)
    assert {r.trained_as for r in results} == {"loop"}
    assert len({r.seconds for r in results}) == 1  # each its share of the group's wall time


def test_a_group_of_one_is_train_classifier(tiny, mixed, alone):
    _assert_same(train_group(tiny, "fastnet", TINY, "cpu", mixed[2:], Grouping(size=1, how="fused"))[0], alone[2])


def test_fused_networks_compute_each_member_and_slice_back(tiny):
    """The fused forward equals each member's on its own channels; a member's weights slice back out of the
    fused state dict unchanged."""
    from roarfast.train.classifier import init_model

    nets = [init_model("fastnet", tiny, seed, "cpu", TINY) for seed in range(3)]
    fused = fuse(nets, 3, 32).eval()
    xs = [torch.randn(4, 3, 32, 32, generator=torch.Generator().manual_seed(s)) for s in range(3)]
    with torch.no_grad():
        out = fused(torch.cat(xs, 1))
        for k, (net, x) in enumerate(zip(nets, xs)):
            torch.testing.assert_close(out[:, k], net.eval()(x), rtol=1e-5, atol=1e-5)
    state = fused.state_dict()
    for k, net in enumerate(nets):
        for key, value in net.state_dict().items():
            assert torch.equal(member_weights(state, k, 3)[key], value), key
    assert stack_weights([net.state_dict() for net in nets]).keys() == state.keys()


def test_one_fused_step_moves_each_member_as_alone_within_float_tolerance(tiny, mixed):
    """One epoch of one step: fused weights equal the members' alone to float tolerance (a grouped convolution
    sums the same products in another order: differences of a few ulp, far below the step's own size)."""
    one_step = TINY.replace(epochs=1, batch_size=len(tiny.train_index))
    alone = [train_classifier(tiny, "fastnet", one_step, "cpu", seed=r.seed, masking=r.masking, progress=False)
             for r in mixed]
    fused = train_group(tiny, "fastnet", one_step, "cpu", mixed, Grouping(size=3, how="fused"))
    assert {r.trained_as for r in fused} == {"fused"}
    for result, reference in zip(fused, alone):
        for key, value in reference.model.state_dict().items():
            torch.testing.assert_close(result.model.state_dict()[key].float(), value.float(), rtol=1e-4, atol=1e-5,
                                       msg=key)


def test_fused_training_reaches_the_accuracies_alone_within_a_few_test_images(tiny, mixed, alone):
    """Rounding differences grow over the steps of a chaotic training, so accuracies are compared, not bits:
    within 3 of the 60 test images (5%) per run, the same selected epochs' validation within 3 of 20."""
    fused = train_group(tiny, "fastnet", TINY, "cpu", mixed, Grouping(size=3, how="fused"))
    for result, reference in zip(fused, alone):
        assert abs(result.test_acc - reference.test_acc) * 60 <= 3
        assert abs(result.val_acc - reference.val_acc) * len(tiny.val_index) <= 3


def test_a_run_that_fails_to_set_up_fails_alone(tiny, mixed, alone):
    broken = Run(seed=5, masking=Masking(_ranks(7, 0), _ranks(7, 1), fraction=0.5))  # ranks of another split
    for how in ("loop", "fused"):
        results = train_group(tiny, "fastnet", TINY, "cpu", [mixed[0], broken, mixed[2]], Grouping(size=3, how=how))
        assert isinstance(results[1], ValueError) and "aligned with the images" in str(results[1])
        if how == "loop":
            _assert_same(results[0], alone[0])
            _assert_same(results[2], alone[2])
        assert [r.trained_as for r in (results[0], results[2])] == [how, how]


@pytest.mark.parametrize("how", ["loop", "fused"])
def test_a_run_that_fails_in_training_fails_alone(tiny, mixed, alone, monkeypatch, how):
    """The KAR run's third step raises: it alone is an error, the others are their results alone (a fused
    group is trained again as a loop, so the failure finds its run)."""
    real_step, calls = loop.train_step, {}

    def step(state, batches):
        if any(m.loaders["train"].fraction == 0.3 for m in state.members):
            calls[state] = calls.get(state, 0) + 1
            if calls[state] == 3:
                raise RuntimeError("out of memory")
        return real_step(state, batches)

    monkeypatch.setattr(loop, "train_step", step)
    results = train_group(tiny, "fastnet", TINY, "cpu", mixed, Grouping(size=3, how=how))
    assert isinstance(results[1], RuntimeError) and len(calls) == (2 if how == "fused" else 1)
    for k in (0, 2):
        _assert_same(results[k], alone[k])


def test_user_errors_end_the_whole_group(tiny, mixed, monkeypatch):
    def refuse(state, batches):
        raise UserError("refused")

    monkeypatch.setattr(loop, "train_step", refuse)
    with pytest.raises(UserError, match="refused"):
        train_group(tiny, "fastnet", TINY, "cpu", mixed, Grouping(size=3, how="loop"))


def test_a_network_that_mixes_channels_is_not_fused():
    class Mixer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv2d(3, 4, 3)
            self.head = torch.nn.Linear(4, 2)

        def forward(self, x):  # reversing the channels hands each member another member's images
            return self.head(self.conv(x.flip(1)).mean((2, 3)))

    with pytest.raises(NotFusable, match="mixes channels"):
        fuse([Mixer(), Mixer()], 3, 16)
    with pytest.raises(NotFusable, match="LayerNorm"):
        fuse([torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.LayerNorm(4)) for _ in range(2)], 3, 16)


def test_grouping_is_checked():
    with pytest.raises(UserError, match="--group-size should be a positive int, got 0"):
        Grouping(size=0)
    with pytest.raises(UserError, match="group implementation should be one of loop, fused, streams"):
        Grouping(size=2, how="threads")
