"""The selection (roarfast.methods.selection): names resolved once where a stage begins, and nothing it makes
changed by that. Guarded against main f78a511, the commit before the selection existed: every built-in's ranks
identity, under the default options and under others, equals what that commit's `extract.store_params`
recorded (tests/selection_f78a511.json, with the sha256 of its model-free ranks on a small embedded dataset);
the extract stage's ranks equal ranking compute_maps' maps with ops.rank; an extraction looks each method up
once."""

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from roarfast import ops
from roarfast.records.checkpoint import load_checkpoint
from roarfast.data import load_dataset
from roarfast.errors import UserError
from roarfast.stages.extract import ExtractOptions, explained_model, run_extract
from roarfast.methods import ExplainBatch, MethodParams, compute_maps, known_methods, registry
from roarfast.methods.declaration import BUILTIN_CODE, KEYING
from roarfast.methods.params import black_baseline
from roarfast.methods.selection import Selection
from roarfast.rundir.directory import RunDir
from tests.test_extract import untrained_base

RECORDED = json.loads((Path(__file__).parent / "selection_f78a511.json").read_text())


def recorded_identities(key: str) -> dict:
    """The identities main recorded, its version (in every built-in's code identity) read as this one's, and
    the keying of draws (per image, since) added to those that draw (a seed recorded) but random, keyed per image
    from the start."""
    out = {}
    for method, identity in RECORDED[key].items():
        assert identity["code"] == {"roarfast": RECORDED["version"]}
        keying = {"keying": KEYING} if "seed" in identity and method != "random" else {}
        out[method] = {**identity, "code": dict(BUILTIN_CODE), **keying}
    return out


@pytest.mark.parametrize("key, options, seed", [("default", {}, 0), ("varied", RECORDED["varied_options"], 3)])
def test_every_builtin_s_ranks_identity_is_main_s(key, options, seed):
    selection = Selection.resolve("all", ExtractOptions(**options), seed)
    # every built-in main had (a newer one has no recorded identity to keep)
    assert selection.names == known_methods() and set(RECORDED[key]) <= set(selection.names)
    assert {m: selection.ranks_identity(m) for m in RECORDED[key]} == recorded_identities(key)


def test_a_narrowed_selection_keeps_each_identity_and_the_arguments_its_methods_take():
    selection = Selection.resolve("ig,sg-sq,random", ExtractOptions(method_args={"ig_steps": 6, "samples": 4}), 0)
    alone = selection.only(["sg-sq-grad"])
    assert alone.names == ["sg-sq-grad"] and dict(alone.args) == {"samples": 4}
    assert alone.ranks_identity("sg-sq-grad") == selection.ranks_identity("sg-sq-grad")
    assert selection.model_free == ["random"] and selection.explained == ["ig", "sg-sq-grad"]
    manifest = {"params": selection.ranks_identity("ig"), "checkpoint_sha256": "a"}
    assert selection.ranks_change("ig", manifest, "a") is None
    assert selection.ranks_change("ig", manifest, "b") == "base checkpoint a -> b"
    other = Selection.resolve("ig", ExtractOptions(ig_steps=9, method_args={}), 0)
    assert other.ranks_change("ig", manifest, "a") == "ig_steps 6 -> 9"
    # model-free ranks are stored without a checkpoint: another base model leaves them as they are
    assert selection.ranks_change("random", {"params": selection.ranks_identity("random")}, "b") is None


def test_a_method_reading_masks_the_data_lacks_is_refused():
    selection = Selection.resolve("oracle,grad", ExtractOptions(), 0)
    selection.check_ground_truth("embedded", True)
    with pytest.raises(UserError, match="dataset plain has no ground-truth masks, so it has no 'oracle' method"):
        selection.check_ground_truth("plain", False)


def ranks_sha256(run_dir, method: str, split: str) -> str:
    ranks = RunDir(run_dir).rank_store.read(method, split).ranks
    return hashlib.sha256(np.ascontiguousarray(ranks).tobytes()).hexdigest()


#: how far apart in float64 two pixels' Sobel magnitudes may be (relative to the image's largest) and still be
#: ranked either way: float32 convolutions round differently on each CPU code path (measured: up to ~1e-8)
SOBEL_RTOL = 1e-5


def sobel_float64(images: torch.Tensor) -> torch.Tensor:
    """Sobel magnitude summed over channels in float64, written here apart from the estimator: [B, H, W]."""
    kernel = torch.tensor([[-1.0, 0.0, 1.0], [-2.0, 0.0, 2.0], [-1.0, 0.0, 1.0]], dtype=torch.float64)
    padded = torch.nn.functional.pad(images.double(), (1, 1, 1, 1), mode="replicate")
    channels = images.shape[1]
    weight = torch.stack([kernel, kernel.t()]).repeat(channels, 1, 1).unsqueeze(1)
    grads = torch.nn.functional.conv2d(padded, weight, groups=channels)
    return (grads[:, 0::2] ** 2 + grads[:, 1::2] ** 2).sqrt().sum(1)


@pytest.mark.golden
def test_model_free_ranks_are_main_s(tmp_path):
    """random and oracle bit for bit (exact scores: a per-image generator's uniform draws, a mask: main's digests
    hold on any CPU); sobel's, made by float32 convolutions whose last bits differ with the CPU's code path, in
    the order of their float64 magnitudes up to SOBEL_RTOL (no pixel ranked above one larger by more)."""
    recorded = RECORDED["model_free_ranks"]
    ds = load_dataset("embedded", **recorded["dataset"])
    run_extract(tmp_path, ExtractOptions(methods="random,sobel,oracle"), dataset_obj=ds, device="cpu",
                seed=recorded["seed"], progress=False)
    exact = {key: digest for key, digest in recorded["sha256"].items() if not key.startswith("sobel/")}
    assert {key: ranks_sha256(tmp_path, *key.split("/")) for key in exact} == exact
    for split in ("train", "test"):
        ranks = torch.from_numpy(np.asarray(RunDir(tmp_path).rank_store.read("sobel", split).ranks).astype(np.int64))
        part = ds.split(split)
        magnitude = sobel_float64(ops.mask_normalize(part.images, None, mean=ds.mean, std=ds.std)).flatten(1)
        in_rank_order = torch.empty_like(magnitude).scatter_(1, ranks.flatten(1), magnitude)
        # the largest magnitude ranked below each position: none may exceed the one there by more than the tolerance
        below = in_rank_order.flip(1).cummax(1).values.flip(1)[:, 1:]
        excess = (below - in_rank_order[:, :-1]) / magnitude.amax(1, keepdim=True)
        assert float(excess.max()) <= SOBEL_RTOL, split


@pytest.fixture(scope="module")
def dataset():
    return load_dataset("embedded", num_train=10, num_test=20)


def test_extracted_ranks_equal_ranking_the_maps_directly(tmp_path, dataset, monkeypatch):
    """Values besides the defaults (the samples, the IG steps as --method-arg, the label as target, the max over
    channels), ranks of a shared family and of a one-channel map; each method looked up once."""
    run_dir = untrained_base(tmp_path, dataset)
    lookups = []
    real = registry.get
    monkeypatch.setattr(registry, "get", lambda spec: lookups.append(spec) or real(spec))
    options = ExtractOptions(methods="sg-sq,ig,sobel", splits=("test",), samples=3, target="label", reduction="max",
                             method_args={"ig_steps": 4}, batch_size=8)
    run_extract(run_dir, options, dataset_obj=dataset, device="cpu", seed=5, progress=False)
    assert sorted(lookups) == ["ig", "sg-sq", "sobel"]

    model = explained_model(load_checkpoint(RunDir(run_dir).base_checkpoint)[0], "cpu")
    split = dataset.split("test")
    params = MethodParams(samples=3, ig_steps=4, target="label", seed=5,
                          ig_baseline=black_baseline(dataset.mean, dataset.std))
    maps = {}
    for rows in torch.arange(len(split)).split(8):  # any batches: draws are keyed per image (test_determinism)
        x = ops.mask_normalize(split.images[rows], None, mean=dataset.mean, std=dataset.std)
        batch = ExplainBatch(x=x, target=split.labels[rows], index=rows)
        for method, part in compute_maps(model, batch, "sg-sq-grad,ig,sobel", params).items():
            maps[method] = torch.cat([maps[method], part]) if method in maps else part
    expected = {"sg-sq-grad": ops.rank(maps["sg-sq-grad"].contiguous(), "max"),
                "ig": ops.rank(maps["ig"].contiguous(), "max"),
                "sobel": ops.rank(maps["sobel"][:, 0].contiguous(), "none")}  # one channel: its pixels ranked
    for method, ranks in expected.items():
        stored = RunDir(run_dir).rank_store.read(method, "test", dataset_fingerprint=dataset.fingerprint).tensor()
        assert torch.equal(stored.long(), ranks.long()), method
