"""The extract stage: what lands in the store equals ranking the maps directly, resumption after a
kill redoes only unfinished chunks, a complete store is a no-op unless forced, and bad input is refused."""

import pytest
import torch

from roarfast import ops

from roarfast.stages import extract

from roarfast.stages import extract_tasks
from roarfast.data import load_dataset
from roarfast.errors import UserError
from roarfast.execution.registry import make_executor
from roarfast.stages.extract import ExtractOptions, run_extract
from roarfast.methods import ExplainBatch, MethodParams, compute_maps, register
from roarfast.methods import batches
from roarfast.methods.compute import rank_maps
from roarfast.methods.declaration import ESTIMATORS
from roarfast.methods.params import black_baseline
from roarfast.methods.selection import Selection
from roarfast.models import build_model
from roarfast.rundir.directory import RunDir


@pytest.fixture(scope="module")
def dataset():
    return load_dataset("embedded", num_train=200, num_test=60)


@pytest.fixture()
def run_dir(tmp_path, dataset, monkeypatch):
    """A run directory holding an (untrained) base model of the dataset; small store chunks, of compute batches of
    32 images (the device's default is 256: one batch a split here)."""
    monkeypatch.setattr(extract, "CHUNK_IMAGES", 64)
    monkeypatch.setattr(batches, "default_batch_size", lambda device, image_size: 32)
    return untrained_base(tmp_path, dataset)


def untrained_base(run_dir, dataset):
    """run_dir with an untrained fastnet of the dataset saved as its base model."""
    torch.manual_seed(0)
    model = build_model("fastnet", dataset.num_classes)
    run = RunDir(run_dir)
    base = run.save_base_model(model, {"model": "fastnet", "num_classes": dataset.num_classes, "image_size": 32,
                                       "in_channels": 3, "dataset_fingerprint": dataset.fingerprint})
    run.update_head("test", base=base, dataset=run.remember_dataset(dataset))
    return run_dir


def extract_quiet(run_dir, dataset, **options):
    options.setdefault("samples", 3)
    options.setdefault("batch_size", 32)
    return run_extract(run_dir, ExtractOptions(**options), dataset_obj=dataset, device="cpu", progress=False)


def test_store_equals_ranking_the_maps_directly(run_dir, dataset):
    extract_quiet(run_dir, dataset, methods="grad,sg-sq,sobel")
    from roarfast.records.checkpoint import load_checkpoint

    model, _ = load_checkpoint(RunDir(run_dir).base_checkpoint)
    store = RunDir(run_dir).rank_store
    split = dataset.split("test")
    rows = torch.arange(50, 60)  # rows of the second store chunk (chunks of 64) and of the second batch (32)
    x = ops.mask_normalize(split.images[rows], None, mean=dataset.mean, std=dataset.std)
    maps = compute_maps(model, ExplainBatch(x=x, target=split.labels[rows], index=rows), ["grad", "sobel"],
                        MethodParams(ig_baseline=black_baseline(dataset.mean, dataset.std)))
    for method in ("grad", "sobel"):
        stored = store.read(method, "test", dataset_fingerprint=dataset.fingerprint).rows(rows)
        assert torch.equal(stored.long(), rank_maps(maps[method], "sum_sq").long()), method
    assert set(store.methods()) == {"grad", "sg-sq-grad", "sobel"}


def extract_killed(run_dir, dataset, monkeypatch, chunks_written: int, **options):
    """An extraction killed (KeyboardInterrupt) as it is about to write chunk number chunks_written + 1."""
    from roarfast.store import RankWriter

    real_write = RankWriter.write_chunk
    written = []

    def dying_write(self, chunk, ranks, maps=None):
        if len(written) == chunks_written:
            raise KeyboardInterrupt("killed")
        written.append(chunk)
        return real_write(self, chunk, ranks, maps)

    monkeypatch.setattr(RankWriter, "write_chunk", dying_write)
    with pytest.raises(KeyboardInterrupt):
        extract_quiet(run_dir, dataset, **options)
    monkeypatch.setattr(RankWriter, "write_chunk", real_write)


def test_resume_after_a_kill_redoes_only_unfinished_chunks(run_dir, dataset, monkeypatch):
    extract_killed(run_dir, dataset, monkeypatch, chunks_written=2, methods="grad", splits=("train",))

    computed = []
    original = extract_tasks.compute_maps

    def counting(model, batch, methods, params=None):
        computed.append(int(batch.index[0]))
        return original(model, batch, methods, params)

    monkeypatch.setattr(extract_tasks, "compute_maps", counting)
    extract_quiet(run_dir, dataset, methods="grad", splits=("train",))
    assert min(computed) >= 128  # chunks 0 and 1 (rows 0..127) were finished before the kill
    resumed = RunDir(run_dir).rank_store.read("grad", "train").tensor()

    extract_quiet(run_dir, dataset, methods="grad", splits=("train",), force=True)
    assert torch.equal(resumed, RunDir(run_dir).rank_store.read("grad", "train").tensor())


def test_resume_with_another_method_computes_each_chunk_once_per_method(run_dir, dataset, monkeypatch):
    """grad killed after 2 of its 4 train chunks (64 rows each), then grad and sobel together (--batch-size 24:
    passes of one compute batch): rows 0..127 are computed for sobel alone, the rest for both, each once; both
    stores equal fresh extractions."""
    extract_killed(run_dir, dataset, monkeypatch, chunks_written=2, methods="grad", splits=("train",))

    original = extract_tasks.compute_maps
    computed = []

    def counting(model, batch, methods, params=None):
        computed.extend((int(i), tuple(sorted(methods.names))) for i in batch.index)  # a Selection
        return original(model, batch, methods, params)

    monkeypatch.setattr(extract_tasks, "compute_maps", counting)
    extract_quiet(run_dir, dataset, methods="grad,sobel", splits=("train",), batch_size=24)
    expected = [(i, ("sobel",)) for i in range(128)] + [(i, ("grad", "sobel")) for i in range(128, 200)]
    assert sorted(computed) == expected
    resumed = {m: RunDir(run_dir).rank_store.read(m, "train").tensor() for m in ("grad", "sobel")}
    monkeypatch.setattr(extract_tasks, "compute_maps", original)
    extract_quiet(run_dir, dataset, methods="grad,sobel", splits=("train",), force=True)
    for m, ranks in resumed.items():
        assert torch.equal(ranks, RunDir(run_dir).rank_store.read(m, "train").tensor()), m


def test_complete_store_is_a_noop_unless_forced(run_dir, dataset, monkeypatch):
    extract_quiet(run_dir, dataset, methods="grad", splits=("test",))
    calls = []
    original = extract_tasks.compute_maps
    monkeypatch.setattr(extract_tasks, "compute_maps", lambda *a, **k: calls.append(1) or original(*a, **k))
    summary = extract_quiet(run_dir, dataset, methods="grad", splits=("test",))
    assert calls == [] and summary[("grad", "test")]["skipped"]
    summary = extract_quiet(run_dir, dataset, methods="grad", splits=("test",), force=True)
    assert calls and not summary[("grad", "test")]["skipped"]


def test_unknown_method_lists_the_known_ones(run_dir, dataset):
    with pytest.raises(UserError, match="sg-sq"):
        extract_quiet(run_dir, dataset, methods="smoothgrad-squared")


def test_checkpoint_of_another_dataset_is_refused(run_dir, dataset):
    other = load_dataset("embedded", num_train=200, num_test=60, seed=1)
    with pytest.raises(UserError, match=f"{dataset.fingerprint}.*{other.fingerprint}"):
        extract_quiet(run_dir, other, methods="grad")


def test_store_made_from_another_dataset_is_refused_on_read(run_dir, dataset):
    extract_quiet(run_dir, dataset, methods="random", splits=("test",))
    with pytest.raises(UserError, match="another dataset"):
        RunDir(run_dir).rank_store.read("random", "test", dataset_fingerprint="0" * 64)


def _nan_corner(model, batch, target, params):
    """Scores = row index, with NaN in the top-left pixel of every image (for the NaN test)."""
    b, _, h, w = batch.x.shape
    maps = torch.arange(h, dtype=torch.float32).view(1, 1, h, 1).expand(b, 1, h, w).clone()
    maps[:, :, 0, 0] = float("nan")
    return maps


def test_nan_maps_are_counted_and_ranked_last(run_dir, dataset, monkeypatch):
    # registered for this test only, so the built-ins stay as the other tests expect them
    assert len(ESTIMATORS)
    monkeypatch.setattr(ESTIMATORS, "_entries", dict(ESTIMATORS._entries))
    register("test-nan-corner", uses_model=False, target_mode="none")(_nan_corner)
    summary = extract_quiet(run_dir, dataset, methods="test-nan-corner", splits=("test",))
    assert summary[("test-nan-corner", "test")]["nonfinite"] == 60
    ranks = RunDir(run_dir).rank_store.read("test-nan-corner", "test").tensor().long()
    assert (ranks[:, 0, 0] == 32 * 32 - 1).all()
    assert (ranks[:, 31, 0] == 0).all()  # highest score (last row), lowest index of that row first


@pytest.mark.slow
def test_compiled_model_gives_the_same_maps(run_dir, dataset):
    import numpy as np

    def maps():
        store = RunDir(run_dir).rank_store
        return {m: np.array(store.read(m, "test").maps, dtype=np.float32) for m in ("grad", "gb")}

    extract_quiet(run_dir, dataset, methods="grad,gb", splits=("test",), keep_maps=True)
    plain = maps()
    extract_quiet(run_dir, dataset, methods="grad,gb", splits=("test",), keep_maps=True, force=True, compile=True)
    compiled = maps()
    for m in ("grad", "gb"):
        scale = float(np.abs(plain[m]).max())
        np.testing.assert_allclose(compiled[m], plain[m], rtol=1e-2, atol=1e-3 * scale, err_msg=m)
    # guided backprop's ReLU hooks still act under torch.compile: its maps are not the plain gradient's
    assert not np.allclose(compiled["gb"], compiled["grad"], rtol=1e-2, atol=1e-3 * float(np.abs(plain["grad"]).max()))


def test_a_new_seed_reuses_only_the_ranks_that_ignore_it(run_dir, dataset, capsys):
    extract_quiet(run_dir, dataset, methods="sobel,grad,random,sg-sq", splits=("test",))
    capsys.readouterr()
    summary = run_extract(run_dir, ExtractOptions(methods="sobel,grad,random,sg-sq", splits=("test",), samples=3,
                                                  batch_size=32), dataset_obj=dataset, device="cpu", seed=1,
                          progress=False)
    assert summary[("sobel", "test")]["skipped"] and summary[("grad", "test")]["skipped"]
    assert not summary[("random", "test")]["skipped"] and not summary[("sg-sq-grad", "test")]["skipped"]
    said = capsys.readouterr().out.splitlines()
    for method in ("random", "sg-sq-grad"):
        assert (f"extract: {method} with other values than its latest ranks (seed 0 -> 1): made beside them, which "
                f"are kept") in said
    run = RunDir(run_dir)
    assert run.rank_store.manifest("random", "test")["params"]["seed"] == 1
    # the seed-0 ranks stay whole beside them, and a seed-0 request reuses them
    assert sorted(rid for method, rid, _ in run.rank_stores() if method == "random") == sorted(
        {run.rank_ids(Selection.resolve("random", ExtractOptions(), seed), dataset.fingerprint)["random"]
         for seed in (0, 1)})
    again = run_extract(run_dir, ExtractOptions(methods="random", splits=("test",), batch_size=32),
                        dataset_obj=dataset, device="cpu", seed=0, progress=False)
    assert again[("random", "test")]["skipped"]


def test_extract_ends_with_one_line_saying_what_it_wrote_or_that_nothing_was_left(run_dir):
    from click.testing import CliRunner

    from roarfast.cli import main

    args = ["extract", "--run-dir", str(run_dir), "--method", "grad,sobel", "--split", "test", "--device", "cpu",
            "--no-progress", "--data-option", "num_train=200", "--data-option", "num_test=60"]
    first = CliRunner().invoke(main, args)
    assert first.exit_code == 0, first.output
    where = str(RunDir(run_dir).ranks_root)
    last = first.output.strip().splitlines()[-1]
    assert last.startswith("extract: wrote the ranks of grad, sobel for test (60 images) into " + where + " in ")
    again = CliRunner().invoke(main, args[:4] + ["grad,sobel,random"] + args[5:])
    last = again.output.strip().splitlines()[-1]
    assert last.startswith("extract: wrote the ranks of random for test (60 images)")
    assert last.endswith("; grad, sobel already there")
    third = CliRunner().invoke(main, args)
    assert third.output.strip().splitlines()[-1] == (
        f"extract: nothing to do: the ranks of grad, sobel for test are already in {where} (--force makes them again)")


def test_a_chunk_size_sets_a_new_stores_chunks_and_a_resumed_store_keeps_its_own(run_dir, dataset, capsys):
    """--chunk-images: the store's chunks (the unit of resumption, and of a task on Ray), rounded up to whole
    compute batches (32 images here) in one line; the ranks do not depend on it."""
    extract_quiet(run_dir, dataset, methods="grad", splits=("test",), chunk_images=16)
    assert ("extract: --chunk-images 16 rounded up to 32: a new store's chunk holds whole compute batches of 32 "
            "images (cpu at 32 px), so that the ranks are the same bytes however the work is cut"
            ) in capsys.readouterr().out.splitlines()
    manifest = RunDir(run_dir).rank_store.manifest("grad", "test")
    assert manifest["chunk_size"] == 32 and manifest["chunks_done"] == [[0, 2]]  # 60 images: one of 32, one of 28
    ranks = RunDir(run_dir).rank_store.read("grad", "test").tensor()
    extract_quiet(run_dir, dataset, methods="grad", splits=("test",), force=True)  # the default chunk: 64 here
    assert RunDir(run_dir).rank_store.manifest("grad", "test")["chunk_size"] == 64
    assert torch.equal(ranks, RunDir(run_dir).rank_store.read("grad", "test").tensor())
    with pytest.raises(UserError, match="--chunk-images"):
        ExtractOptions(chunk_images=0)


def test_on_ray_what_a_worker_cannot_rebuild_is_refused_before_any_work(tmp_path):
    """A Python object given to a Study has no name a Ray worker could load it by: refused in one line, before
    Ray is even asked for (no cluster here)."""
    ds = load_dataset((dataset_tensors(40), dataset_tensors(20)))
    with pytest.raises(UserError, match=r"--executor ray: the dataset object:\S+ was a Python object given to "
                                        r"roarfast.Study"):
        run_extract(tmp_path / "run", ExtractOptions(methods="random"), dataset_obj=ds, device="cpu", progress=False,
                    executor=make_executor("ray"))
    assert not (tmp_path / "run" / "ranks").exists()


def dataset_tensors(n: int) -> tuple:
    return torch.randint(0, 256, (n, 3, 8, 8), dtype=torch.uint8), torch.arange(n) % 2
