"""The same ranks however the work is cut (roarfast.methods.batches, roarfast.methods.draws): every estimator
(every built-in, read from the registry; plug-ins that draw torch's numbers or none; captum:GradientShap, which
draws numpy's, and captum:Saliency, which draws none) writes the same bytes, under the same id, for any
--chunk-images and --batch-size, because its maps are computed in compute batches aligned to image indices (the
device's default here made 4 images, so that a few images make several); --compute-batch sets that batch and
enters the id; a store begun with chunks that are not whole compute batches says so; a draw is keyed by (seed,
estimator, image index, sample); a store of the release before (keyed per batch: no `keying` in its identity)
keeps its id and stays readable, and a new request makes its store beside it."""

import filecmp

import numpy as np
import pytest
import torch

from roarfast.data import load_dataset
from roarfast.methods import ExplainBatch, MethodParams, batches, compute_maps, known_methods, registry
from roarfast.methods.declaration import KEYING
from roarfast.methods.draws import keyed_per_image
from roarfast.methods.ensembles import noisy_samples
from roarfast.methods.selection import Selection
from roarfast.models import build_model
from roarfast.rundir.directory import RunDir
from roarfast.records.ranks import RankStoreRecord
from roarfast.stages.extract import ExtractOptions, run_extract
from roarfast.store import RankWriter

pytestmark = pytest.mark.golden

#: every built-in, as the registry lists them (a new one is tested here by itself)
BUILTINS = known_methods()
#: every built-in that draws random numbers
SEEDED = [name for name in BUILTINS if registry.get(name).seeded]
#: estimators from outside: one drawing torch's random numbers, one computing a gradient and drawing none
OUTSIDE = ["tests.test_determinism:noisy_scores", "tests.test_determinism:input_gradient"]
try:
    import captum.attr  # noqa: F401

    # GradientShap draws numpy's numbers (n_samples=1: one random baseline scale per image is enough to show);
    # Saliency draws none and goes through the whole batch
    OUTSIDE += ["captum:GradientShap", "captum:Saliency"]
except ImportError:  # captum is optional; the plug-ins cover the outside path
    pass
#: the outside estimators' own arguments: each draw made once, to keep the test short
ARGS = {"n_samples": 1} if "captum:GradientShap" in OUTSIDE else {}
#: the compute batch the device's default is made here
BATCH = 4
#: ways of cutting 14 images (store chunk, --batch-size; None: the default): the defaults (chunks of 512, passes of
#: one batch), both rounded up (chunks of 8, passes of 4: without compute batches, a chunk of 7 in passes of 3 ends
#: in a batch of one image, whose convolutions round otherwise), a pass of three batches in chunks of one, and a
#: pass of two batches in chunks of three
CUTS = [(None, None), (7, 3), (4, 12), (12, 8)]


def noisy_scores(model, images, target):
    """A plug-in whose maps are mostly its random draws: any batch-keyed draw shows in its ranks."""
    return torch.rand(images.shape) + 0.01 * images.abs()


def input_gradient(model, images, target):
    """A plug-in that draws nothing: the gradient of the explained logits, whose last bits depend on the batch's
    shape as grad's do."""
    images = images.detach().requires_grad_(True)
    (grad,) = torch.autograd.grad(model(images).gather(1, target[:, None]).sum(), images)
    return grad


@pytest.fixture(scope="module")
def dataset():
    return load_dataset("embedded", num_train=10, num_test=14)


@pytest.fixture()
def small_batches(monkeypatch):
    """The device's default compute batch made BATCH images."""
    monkeypatch.setattr(batches, "default_batch_size", lambda device, image_size: BATCH)


def untrained_base(run_dir, dataset):
    """run_dir with an untrained fastnet-small of the dataset as its base model."""
    torch.manual_seed(0)
    run = RunDir(run_dir)
    base = run.save_base_model(build_model("fastnet-small", dataset.num_classes),
                               {"model": "fastnet-small", "num_classes": dataset.num_classes, "image_size": 32,
                                "in_channels": 3, "dataset_fingerprint": dataset.fingerprint})
    run.update_head("test", base=base, dataset=run.remember_dataset(dataset))
    return run_dir


def cut_options(methods, chunk=None, batch=None, **options) -> ExtractOptions:
    return ExtractOptions(methods=",".join(methods), splits=("test",), samples=2, chunk_images=chunk,
                          batch_size=batch, **options)


@pytest.fixture(scope="module")
def stores(tmp_path_factory, dataset):
    """{cut: (run directory, rank ids)} of every estimator's test ranks, extracted under each cut, the device's
    compute batch made BATCH images."""
    out = {}
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(batches, "default_batch_size", lambda device, image_size: BATCH)
        for chunk, batch in CUTS:
            run_dir = untrained_base(tmp_path_factory.mktemp(f"cut{chunk}-{batch}"), dataset)
            options = cut_options(BUILTINS + OUTSIDE, chunk, batch, ig_steps=2, method_args=ARGS)
            run_extract(run_dir, options, dataset_obj=dataset, device="cpu", seed=3, progress=False)
            selection = Selection.resolve(BUILTINS + OUTSIDE, options, 3)
            out[(chunk, batch)] = (run_dir, RunDir(run_dir).rank_ids(selection, dataset.fingerprint))
    return out


def ranks_file(run_dir, method: str, rank_id: str):
    return RunDir(run_dir).ranks_for({method: rank_id}).path(method, "test") / "ranks.npy"


@pytest.mark.parametrize("method", BUILTINS + OUTSIDE)
def test_every_estimator_writes_the_same_bytes_under_the_same_id_however_the_work_is_cut(stores, method):
    (first, first_ids), *others = stores.values()
    for other, other_ids in others:
        assert other_ids[method] == first_ids[method]
        assert filecmp.cmp(ranks_file(first, method, first_ids[method]), ranks_file(other, method, other_ids[method]),
                           shallow=False), other


def test_the_cut_is_rounded_to_whole_compute_batches_in_one_line_each(tmp_path, dataset, small_batches, capsys):
    run_dir = untrained_base(tmp_path, dataset)
    run_extract(run_dir, cut_options(["sobel"], 7, 3), dataset_obj=dataset, device="cpu", progress=False)
    why = "whole compute batches of 4 images (cpu at 32 px), so that the ranks are the same bytes however the work is cut"
    said = capsys.readouterr().out.splitlines()
    assert said == [f"extract: --batch-size 3 taken as 4: a pass reads {why}",
                    f"extract: --chunk-images 7 rounded up to 8: a new store's chunk holds {why}"]
    assert RunDir(run_dir).rank_store.manifest("sobel", "test")["chunk_size"] == 8


def test_a_compute_batch_a_request_sets_is_part_of_the_ranks_id_and_computes_what_the_default_does(
        tmp_path, dataset, small_batches):
    """--compute-batch 4: the maps of the device's default of 4 (the same passes), under an id of its own."""
    made = {}
    for name, options in (("default", cut_options(["grad"])), ("set", cut_options(["grad"], compute_batch=BATCH))):
        run_dir = untrained_base(tmp_path / name, dataset)
        run_extract(run_dir, options, dataset_obj=dataset, device="cpu", progress=False)
        made[name] = (run_dir, RunDir(run_dir).head().ranks["grad"])
    assert made["default"][1] != made["set"][1]
    assert RunDir(made["set"][0]).rank_store.manifest("grad", "test")["params"]["compute_batch"] == BATCH
    assert "compute_batch" not in RunDir(made["default"][0]).rank_store.manifest("grad", "test")["params"]
    assert filecmp.cmp(ranks_file(made["default"][0], "grad", made["default"][1]),
                       ranks_file(made["set"][0], "grad", made["set"][1]), shallow=False)


def test_a_store_begun_with_chunks_of_partial_compute_batches_says_so_when_resumed(
        tmp_path, dataset, monkeypatch, capsys):
    """A store begun where the compute batch was 2 (another device kind, or an earlier release's cut), resumed where
    it is 4: its chunks of 6 images are not whole batches, and one line says what that means."""
    run_dir = untrained_base(tmp_path, dataset)
    monkeypatch.setattr(batches, "default_batch_size", lambda device, image_size: 2)
    real_write = RankWriter.write_chunk

    def dying_write(self, chunk, ranks, maps=None):
        if chunk > 0:
            raise KeyboardInterrupt("killed")
        return real_write(self, chunk, ranks, maps)

    monkeypatch.setattr(RankWriter, "write_chunk", dying_write)
    with pytest.raises(KeyboardInterrupt):
        run_extract(run_dir, cut_options(["sobel"], 6), dataset_obj=dataset, device="cpu", progress=False)
    monkeypatch.setattr(RankWriter, "write_chunk", real_write)
    monkeypatch.setattr(batches, "default_batch_size", lambda device, image_size: BATCH)
    capsys.readouterr()
    run_extract(run_dir, cut_options(["sobel"]), dataset_obj=dataset, device="cpu", progress=False)
    assert capsys.readouterr().out.splitlines() == [
        "extract: sobel's test store was begun with chunks of 6 images, not whole compute batches of 4: its chunks "
        "left are computed in batches cut at their bounds, whose maps may round otherwise (--force makes it again)"]
    assert RunDir(run_dir).rank_store.manifest("sobel", "test")["complete"]


def batch_of(x, index, seed=None):
    return ExplainBatch(x=x, target=torch.zeros(len(index), dtype=torch.int64),
                        index=torch.tensor(index, dtype=torch.int64), seed=seed)


def test_noise_is_keyed_by_seed_family_image_and_sample():
    x = torch.randn(3, 3, 4, 4, generator=torch.Generator().manual_seed(0))
    params = MethodParams(samples=4)
    whole = noisy_samples(batch_of(x, [7, 8, 9]), params, "grad", 4).view(4, 3, 3, 4, 4)
    # image 9 alone, samples 2-3 alone: the same draws as inside the batch
    assert torch.equal(noisy_samples(batch_of(x[2:], [9]), params, "grad", 2, offset=2).view(2, 3, 4, 4),
                       whole[2:, 2])
    # the same pixels at another index, under another seed or for another family: other draws
    for batch, base in ((batch_of(x, [7, 8, 10]), "grad"), (batch_of(x, [7, 8, 9], seed=1), "grad"),
                        (batch_of(x, [7, 8, 9]), "ig")):
        again = noisy_samples(batch, params, base, 4).view(4, 3, 3, 4, 4)
        assert not torch.equal(again[:, 2], whole[:, 2])
    # the statistics of one family share one set of samples whichever of them is asked for
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(48, 2), torch.nn.Tanh())
    both = compute_maps(model, batch_of(x, [7, 8, 9]), ["sg", "sg-sq"], params)
    alone = compute_maps(model, batch_of(x, [7, 8, 9]), ["sg-sq"], params)
    assert torch.equal(both["sg-sq-grad"], alone["sg-sq-grad"])


def test_an_outside_estimator_goes_image_by_image_only_when_it_draws():
    x = torch.randn(4, 1, 2, 2)
    params, calls = MethodParams(), []

    def plain(rows):
        calls.append(x[rows].shape[0])
        return x[rows] * 2

    assert torch.equal(keyed_per_image(plain, batch_of(x, [0, 1, 2, 3]), params, stream=11), x * 2)
    assert calls == [4]
    calls.clear()

    def drawing(rows):
        calls.append(x[rows].shape[0])
        return torch.rand(x[rows].shape)

    state = torch.random.get_rng_state()
    out = keyed_per_image(drawing, batch_of(x, [0, 1, 2, 3]), params, stream=12)
    assert calls == [4, 1, 1, 1, 1]  # the whole batch tried, then each image under its own key
    assert torch.equal(torch.random.get_rng_state(), state)  # the caller's generator left as it was
    calls.clear()
    assert torch.equal(keyed_per_image(drawing, batch_of(x[2:], [2, 3]), params, stream=12), out[2:])
    assert calls == [1, 1]  # known to draw: image by image at once


def test_the_keying_is_part_of_a_drawing_estimator_s_identity_alone():
    selection = Selection.resolve(SEEDED + ["grad", "sobel"], ExtractOptions(), 0)
    keyed = {name for name in selection.names if "keying" in selection.ranks_identity(name)}
    # random was keyed per image before the field existed: its stores keep their ids
    assert keyed == {name for name in SEEDED if name != "random"}
    assert {selection.ranks_identity(name)["keying"] for name in keyed} == {KEYING}


def test_a_store_keyed_per_batch_keeps_its_id_stays_readable_and_a_new_one_is_made_beside_it(
        tmp_path, dataset, monkeypatch, capsys):
    run_dir = untrained_base(tmp_path, dataset)
    options = ExtractOptions(methods="sg-sq", splits=("test",), samples=2, batch_size=8)
    plain_identity = Selection.ranks_identity

    def before_keying(self, name):  # what the release before recorded: no keying
        return {k: v for k, v in plain_identity(self, name).items() if k != "keying"}

    monkeypatch.setattr(Selection, "ranks_identity", before_keying)
    run_extract(run_dir, options, dataset_obj=dataset, device="cpu", progress=False)
    run = RunDir(run_dir)
    old = run.rank_store.manifest("sg-sq-grad", "test")
    old_id = RankStoreRecord.from_record(old).id
    assert "keying" not in old["params"]
    assert old_id == RankStoreRecord("sg-sq-grad", before_keying(Selection.resolve("sg-sq", options), "sg-sq-grad"),
                                     old["checkpoint_sha256"], dataset.fingerprint).id
    monkeypatch.undo()
    capsys.readouterr()

    run_extract(run_dir, options, dataset_obj=dataset, device="cpu", progress=False)
    assert (f"extract: sg-sq-grad with other values than its latest ranks (keying none -> {KEYING}): made beside "
            f"them, which are kept") in capsys.readouterr().out.splitlines()
    new_id = run.rank_ids(Selection.resolve("sg-sq", options), dataset.fingerprint)["sg-sq-grad"]
    assert new_id != old_id
    assert sorted(rid for method, rid, _ in run.rank_stores() if method == "sg-sq-grad") == sorted([old_id, new_id])
    assert run.read_ranks("sg-sq-grad", "test", dataset.fingerprint, rank_id=old_id).tensor().shape == (len(dataset.test), 32, 32)
