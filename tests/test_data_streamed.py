"""A JPEG tree streamed from disk (FileSets + StreamLoader) is the same dataset as the tree decoded into
memory: same fingerprint, statistics, labels; training, extraction and retraining give identical results
on CPU; the measurement cache is reused and invalidated by a changed file; the `stream` option, corrupt
files and the CLI's remembered dataset behave as for the in-memory path."""

import numpy as np
import pytest
import torch
from click.testing import CliRunner
from PIL import Image

from roarfast.data import FileSet, ImageSet, load_dataset
from roarfast.data import imagefolder, in_memory
from roarfast.errors import UserError

RESIZE, CROP = 36, 32  # 32 px canvases: the fast 32px network trains on them
CLASSES = ("red", "green", "blue")


def _write_tree(root, per_class=(10, 4), seed=0):
    """train/ and val/ with one dominant colour channel per class over noise, sizes and aspect ratios varied."""
    rng = np.random.default_rng(seed)
    for split, count in zip(("train", "val"), per_class):
        for label, name in enumerate(CLASSES):
            (root / split / name).mkdir(parents=True, exist_ok=True)
            for i in range(count):
                height, width = rng.integers(RESIZE, RESIZE + 20, 2)
                pixels = rng.integers(0, 120, (height, width, 3), dtype=np.uint8)
                pixels[..., label] += 120
                Image.fromarray(pixels).save(root / split / name / f"{i:02d}.jpg", quality=90)
    return root


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    return _write_tree(tmp_path_factory.mktemp("streamed-tree"))


def _load(root, stream, **options):
    return load_dataset("imagefolder", root, resize=RESIZE, crop=CROP, device="cpu", stream=stream, **options)


@pytest.fixture(scope="module")
def both(tree):
    return _load(tree, False), _load(tree, True)


def test_streamed_and_in_memory_are_one_dataset(both):
    memory, streamed = both
    assert isinstance(memory.train, ImageSet) and isinstance(streamed.train, FileSet)
    assert not memory.streamed and streamed.streamed
    assert streamed.fingerprint == memory.fingerprint
    assert streamed.read_options["stream"] is True and memory.read_options["stream"] is False
    for split in ("train", "test"):
        assert len(streamed.split(split)) == len(memory.split(split))
        assert torch.equal(streamed.split(split).labels, memory.split(split).labels)
    assert streamed.train.classes == memory.train.classes == sorted(CLASSES)
    assert (streamed.channels, streamed.image_size) == (memory.channels, memory.image_size) == (3, CROP)
    assert torch.equal(streamed.val_index, memory.val_index)
    np.testing.assert_allclose(streamed.mean, memory.mean, rtol=1e-12)
    np.testing.assert_allclose(streamed.std, memory.std, rtol=1e-12)
    # the statistics are the canvases' own: the colour that marks each class raises its channel's mean
    assert all(0.3 < m < 0.6 for m in memory.mean)


def test_fingerprint_follows_the_file_bytes(tmp_path):
    root = _write_tree(tmp_path / "a")
    before = _load(root, True).fingerprint
    target = root / "val" / "red" / "00.jpg"
    Image.fromarray(np.zeros((40, 40, 3), dtype=np.uint8)).save(target, quality=90)
    streamed, memory = _load(root, True), _load(root, False)
    assert streamed.fingerprint == memory.fingerprint != before


def test_auto_streams_only_what_would_not_fit(tree, monkeypatch):
    assert not _load(tree, "auto").streamed
    needed = (30 + 12) * 3 * CROP * CROP
    monkeypatch.setattr(in_memory, "available_memory", lambda: int(needed / in_memory.IN_MEMORY_SHARE) - 1)
    assert _load(tree, "auto").streamed


@pytest.mark.parametrize("bad", ["yes", 1, "sometimes"])
def test_bad_stream_option(tree, bad):
    with pytest.raises(UserError, match="stream should be auto, true or false"):
        _load(tree, bad)


def split_calls(monkeypatch, name: str) -> list:
    """The names of the split folders imagefolder's function `name` (decode_split, measure_split) is called on,
    one entry a call, as the calls come."""
    calls = []
    original = getattr(imagefolder, name)

    def counted(split_dir, files, *args, **kwargs):
        calls.append(split_dir.name)
        return original(split_dir, files, *args, **kwargs)

    monkeypatch.setattr(imagefolder, name, counted)
    return calls


def test_measurements_are_cached_until_a_file_changes(tmp_path, monkeypatch):
    root = _write_tree(tmp_path / "b")
    calls = split_calls(monkeypatch, "measure_split")
    first = _load(root, True)
    assert calls == ["train", "val"]
    again = _load(root, True)
    assert calls == ["train", "val"] and again.fingerprint == first.fingerprint and again.mean == first.mean
    (root / "train" / "blue" / "03.jpg").unlink()
    changed = _load(root, True)
    assert calls == ["train", "val", "train"]  # only the split whose files changed is measured again
    assert len(changed.train) == len(first.train) - 1 and changed.fingerprint != first.fingerprint


def test_corrupt_file_named_or_skipped(tmp_path):
    root = _write_tree(tmp_path / "c")
    (root / "train" / "green" / "02.jpg").write_bytes(b"\xff\xd8\xff\xe0 this is no JPEG")
    with pytest.raises(UserError, match=r"cannot decode 1 image\(s\) in .*train: green/02.jpg"):
        _load(root, True)
    skipped = _load(root, True, skip_bad=True)
    assert "green/02.jpg" not in skipped.train.files and len(skipped.train) == 29
    labels = {name: int(label) for name, label in zip(skipped.train.files, skipped.train.labels)}
    assert (labels["blue/09.jpg"], labels["green/03.jpg"], labels["red/00.jpg"]) == (0, 1, 2)  # sorted classes
    assert skipped.fingerprint == _load(root, False, skip_bad=True).fingerprint
    with pytest.raises(UserError, match="green/02.jpg"):  # the cached record still names it
        _load(root, True)


def test_training_streamed_equals_training_in_memory(both):
    from roarfast.recipe import Recipe
    from roarfast.train import train_classifier

    recipe = Recipe(epochs=2, batch_size=8, lr=0.05, eval_batch_size=16)
    results = [train_classifier(ds, "fastnet", recipe, "cpu", seed=3, progress=False) for ds in both]
    (memory, streamed) = results
    assert [h["train_loss"] for h in streamed.history] == [h["train_loss"] for h in memory.history]
    assert (streamed.val_acc, streamed.test_acc) == (memory.val_acc, memory.test_acc)
    for name, value in memory.model.state_dict().items():
        assert torch.equal(streamed.model.state_dict()[name], value), name


def test_extract_and_retrain_streamed_equal_in_memory(both, tmp_path, monkeypatch):
    from roarfast.stages import extract
    from roarfast.stages.extract import ExtractOptions, run_extract
    from roarfast.orchestration.retrain import RetrainOptions, run_retrain
    from roarfast.rundir.directory import RunDir
    from roarfast.stages.basemodel import TrainOptions, run_train

    monkeypatch.setattr(extract, "CHUNK_IMAGES", 7)  # batches of 4 straddle chunk boundaries
    out = {}
    for kind, ds in zip(("memory", "streamed"), both):
        run_dir = tmp_path / kind
        run_train(run_dir, TrainOptions(model="fastnet", epochs=1, batch_size=8), dataset_obj=ds, device="cpu",
                  progress=False)
        run_extract(run_dir, ExtractOptions(methods="grad,sg-sq,random", samples=2, batch_size=4), dataset_obj=ds,
                    device="cpu", progress=False)
        rows = run_retrain(run_dir, RetrainOptions(fractions=(0.5,), methods="sg-sq", epochs=1), dataset_obj=ds,
                           device="cpu", progress=False)
        store = RunDir(run_dir).rank_store
        out[kind] = ({(m, s): store.read(m, s).tensor() for m in ("grad", "sg-sq-grad", "random")
                      for s in ("train", "test")},
                     {row["method"]: row["test_acc"] for row in rows})
    (memory_ranks, memory_acc), (streamed_ranks, streamed_acc) = out["memory"], out["streamed"]
    for key, ranks in memory_ranks.items():
        assert torch.equal(streamed_ranks[key], ranks), key
    assert streamed_acc == memory_acc and set(memory_acc) == {"random", "sg-sq-grad"}


def test_cli_session_on_a_streamed_tree(tree, tmp_path):
    from roarfast.cli import main
    from roarfast.rundir.directory import RunDir

    run_dir = tmp_path / "run"
    common = ["--run-dir", str(run_dir), "--device", "cpu", "--no-progress"]
    result = CliRunner().invoke(main, ["train", *common, "--dataset", "imagefolder", "--data-dir", str(tree),
                                       "--data-option", f"resize={RESIZE}", "--data-option", f"crop={CROP}",
                                       "--data-option", "device=cpu", "--data-option", "stream=true",
                                       "--epochs", "1", "--batch-size", "8"])
    assert result.exit_code == 0, result.output
    remembered = RunDir(run_dir).dataset_record()
    assert remembered["options"]["stream"] is True and remembered["name"] == "imagefolder"
    result = CliRunner().invoke(main, ["extract", *common, "--method", "random"])
    assert result.exit_code == 0, result.output
    result = CliRunner().invoke(main, ["retrain", *common, "--fraction", "0.5", "--epochs", "1"])
    assert result.exit_code == 0, result.output
    assert "random" in result.output and "roar 0.5" in result.output


def _ddp_worker(rank, world, init_file, root, out_dir):
    from safetensors.torch import save_file

    from roarfast.recipe import Recipe
    from roarfast.train import train_classifier
    from tests.ddp import gloo_group

    torch.set_num_threads(1)
    with gloo_group(rank, world, init_file):
        recipe = Recipe(epochs=1, batch_size=8, lr=0.05, eval_batch_size=16)
        for kind, stream in (("memory", False), ("streamed", True)):
            result = train_classifier(_load(root, stream), "fastnet", recipe, "cpu", seed=1, progress=False)
            state = {k: v.contiguous() for k, v in result.model.state_dict().items()}
            save_file(state, str(out_dir / f"{kind}{rank}.safetensors"),
                      metadata={"val_acc": repr(result.val_acc), "test_acc": repr(result.test_acc)})


def test_data_parallel_streamed_equals_in_memory(tree, tmp_path):
    """Two gloo ranks, each decoding only its share of every streamed batch, end with the weights and
    accuracies of two ranks training on the in-memory copy."""
    from safetensors import safe_open

    torch.multiprocessing.spawn(_ddp_worker, args=(2, tmp_path / "init", tree, tmp_path), nprocs=2, join=True)
    opened = {name: safe_open(str(tmp_path / f"{name}.safetensors"), framework="pt")
              for name in ("memory0", "memory1", "streamed0", "streamed1")}
    reference = opened["memory0"]
    for name, other in opened.items():
        assert other.metadata() == reference.metadata(), name
        for key in reference.keys():
            assert torch.equal(other.get_tensor(key), reference.get_tensor(key)), (name, key)
