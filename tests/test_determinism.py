"""The same ranks however the work is cut (roarfast.methods.draws): every estimator that draws random numbers
(every seeded built-in, read from the registry; a plug-in drawing torch's numbers; captum:GradientShap, which
draws numpy's) writes
the same bytes, under the same id, for any --chunk-images and --batch-size; a draw is keyed by (seed,
estimator, image index, sample); a store of the release before (keyed per batch: no `keying` in its identity)
keeps its id and stays readable, and a new request makes its store beside it."""

import numpy as np
import pytest
import torch

from roarfast.data import load_dataset
from roarfast.methods import ExplainBatch, MethodParams, compute_maps, known_methods, registry
from roarfast.methods.declaration import KEYING
from roarfast.methods.draws import keyed_per_image
from roarfast.methods.ensembles import noisy_samples
from roarfast.methods.selection import Selection
from roarfast.models import build_model
from roarfast.rundir.directory import RunDir
from roarfast.records.ranks import RankStoreRecord
from roarfast.stages.extract import ExtractOptions, run_extract

pytestmark = pytest.mark.golden

#: every built-in that draws random numbers, as the registry declares them (a new one is tested here by itself)
SEEDED = [name for name in known_methods() if registry.get(name).seeded]
#: estimators from outside that draw torch's random numbers
OUTSIDE = ["tests.test_determinism:noisy_scores"]
try:
    import captum.attr  # noqa: F401

    OUTSIDE.append("captum:GradientShap")  # n_samples=1: one random baseline scale per image is enough to show
except ImportError:  # captum is optional; the plug-in covers the outside path
    pass
#: the outside estimators' own arguments: each draw made once, to keep the test short
ARGS = {"n_samples": 1} if "captum:GradientShap" in OUTSIDE else {}
#: two ways of cutting 10 images: (store chunk, images per pass)
CUTS = [(512, 32), (7, 3)]


def noisy_scores(model, images, target):
    """A plug-in whose maps are mostly its random draws: any batch-keyed draw shows in its ranks."""
    return torch.rand(images.shape) + 0.01 * images.abs()


@pytest.fixture(scope="module")
def dataset():
    return load_dataset("embedded", num_train=10, num_test=10)


def untrained_base(run_dir, dataset):
    """run_dir with an untrained fastnet-small of the dataset as its base model."""
    torch.manual_seed(0)
    run = RunDir(run_dir)
    base = run.save_base_model(build_model("fastnet-small", dataset.num_classes),
                               {"model": "fastnet-small", "num_classes": dataset.num_classes, "image_size": 32,
                                "in_channels": 3, "dataset_fingerprint": dataset.fingerprint})
    run.update_head("test", base=base, dataset=run.remember_dataset(dataset))
    return run_dir


@pytest.fixture(scope="module")
def stores(tmp_path_factory, dataset):
    """{cut: (run directory, rank ids)} of every drawing estimator's test ranks, extracted under each cut."""
    out = {}
    for chunk, batch in CUTS:
        run_dir = untrained_base(tmp_path_factory.mktemp(f"cut{chunk}-{batch}"), dataset)
        options = ExtractOptions(methods=",".join(SEEDED + OUTSIDE), splits=("test",), samples=2, chunk_images=chunk,
                                 batch_size=batch, method_args={"ig_steps": 2, **ARGS})
        run_extract(run_dir, options, dataset_obj=dataset, device="cpu", seed=3, progress=False)
        selection = Selection.resolve(SEEDED + OUTSIDE, options, 3)
        out[(chunk, batch)] = (run_dir, RunDir(run_dir).rank_ids(selection, dataset.fingerprint))
    return out


def store_bytes(run_dir, method: str) -> bytes:
    return np.ascontiguousarray(RunDir(run_dir).rank_store.read(method, "test").ranks).tobytes()


@pytest.mark.parametrize("method", SEEDED + OUTSIDE)
def test_a_drawing_estimator_writes_the_same_bytes_under_the_same_id_however_the_work_is_cut(stores, method):
    (first, first_ids), (other, other_ids) = stores.values()
    assert store_bytes(first, method) == store_bytes(other, method)
    assert first_ids[method] == other_ids[method]


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
    assert run.read_ranks("sg-sq-grad", "test", dataset.fingerprint, rank_id=old_id).tensor().shape == (10, 32, 32)
