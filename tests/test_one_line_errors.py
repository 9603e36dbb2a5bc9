"""One line, never a traceback (issue 18, item 6), for each fault the issue lists: a damaged results.sqlite,
a truncated checkpoint, an untrusted CIFAR pickle, loader options that are not numbers or are out of range,
and (not a fault any more) a JPEG tree without DALI, which the CPU decoder reads, saying once how to install
DALI. A full disk and a read-only filesystem: tests/test_write_checks.py."""

import pickle
import sqlite3

import pytest
from click.testing import CliRunner

from roarfast.cli import main
from roarfast.data import load_dataset
from roarfast.rundir.directory import RunDir
from tests.test_cli_errors import TINY, cli_ok, fails_with_one_line
from tests.test_data_cifar import _write, fabricate
from tests.test_data_imagefolder import block_dali
from tests.test_data_streamed import CROP, RESIZE, _write_tree
from tests.test_report_sections import fill_run


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("one-line") / "run"
    cli_ok("train", "--run-dir", str(run_dir), "--epochs", "1", *TINY)
    cli_ok("extract", "--run-dir", str(run_dir), "--method", "random", *TINY)
    return run_dir


def test_a_results_file_that_is_no_database_is_named(tmp_path):
    run = RunDir(tmp_path)
    run.results_path.write_bytes(b"these are not the rows you are looking for" * 100)
    for command in (["report"], ["retrain", "--method", "random", "--epochs", "1", *TINY]):
        line = fails_with_one_line([*command, "--run-dir", str(tmp_path)])
        assert f"{run.results_path}: file is not a database; restore it from a copy, or move it aside" in line


def test_a_damaged_page_of_results_is_named(tmp_path):
    run = RunDir(tmp_path)
    fill_run(run)
    with sqlite3.connect(run.results_path) as raw:
        page = raw.execute("PRAGMA page_size").fetchone()[0]
        pages = raw.execute("PRAGMA page_count").fetchone()[0]
    assert pages >= 3
    with open(run.results_path, "r+b") as f:  # the table's pages, past the schema on page 1
        f.seek(page)
        f.write(b"\xa5" * page * (pages - 1))
    line = fails_with_one_line(["report", "--run-dir", str(tmp_path)])
    assert f"{run.results_path}: SQLite's integrity_check failed (" in line and "; restore it from a copy" in line


def test_a_truncated_checkpoint_is_named(trained, tmp_path):
    import shutil

    run_dir = tmp_path / "run"
    shutil.copytree(trained, run_dir)
    weights = RunDir(run_dir).base_checkpoint / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])
    for command in (["extract", "--method", "grad"], ["evaluate", "--method", "random"]):
        line = fails_with_one_line([*command, "--run-dir", str(run_dir), *TINY])
        assert (f"{weights} does not match the sha256 recorded in {weights.parent / 'meta.json'} when it was saved "
                f"(the file changed on disk: damaged, truncated or replaced); retrain the base model (`roarfast train "
                f"--run-dir {run_dir}`) or restore the file") in line


def test_an_untrusted_cifar_pickle_is_named(tmp_path):
    fabricate(tmp_path / "cifar")

    class Evil:
        def __reduce__(self):
            return (print, ("pwned",))

    batch = tmp_path / "cifar" / "cifar-10-batches-py" / "data_batch_1"
    _write(batch, {"data": Evil(), "labels": []})
    line = fails_with_one_line(["train", "--run-dir", str(tmp_path / "run"), "--dataset", "cifar10", "--data-dir",
                                str(tmp_path / "cifar"), "--epochs", "1", "--device", "cpu", "--no-progress"])
    assert f"{batch} is not a CIFAR batch" in line and "found __builtin__.print" in line
    assert pickle.UnpicklingError.__name__ not in line


@pytest.mark.parametrize("option, message", [
    ("num_train=abc", "--data-option num_train should be an int, got 'abc'"),
    ("num_train=0", "--data-option num_train should be an int in [10, 100000] (at least one image per class; at "
                    "most what generating in memory allows), got 0"),
    ("num_test=99999999999", "--data-option num_test should be an int in [10, 100000] (at least one image per "
                             "class; at most what generating in memory allows), got 99999999999"),
    ("copies=1.5", "--data-option copies should be an int, got 1.5"),
    ("seed=-1", "--data-option seed should be a non-negative int, got -1"),
])
def test_embedded_options_that_cannot_be_right_are_named(tmp_path, option, message):
    line = fails_with_one_line(["train", "--run-dir", str(tmp_path), "--epochs", "1", "--device", "cpu",
                                "--data-option", option])
    assert line == f"Error: {message}"


@pytest.fixture(scope="module")
def jpeg_tree(tmp_path_factory):
    return _write_tree(tmp_path_factory.mktemp("jpegs"), per_class=(4, 2))


@pytest.mark.parametrize("option, message", [
    ("resize=abc", "--data-option resize should be a positive int, got 'abc'"),
    ("skip_bad=maybe", "--data-option skip_bad should be true or false, got 'maybe'"),
    ("resize=0", "--data-option resize should be a positive int, got 0"),
    ("resize=16", "imagefolder: crop should be in (0, resize=16], got 32"),
    ("batch_size=abc", "--data-option batch_size should be a positive int, got 'abc'"),
])
def test_imagefolder_options_that_cannot_be_right_are_named(tmp_path, jpeg_tree, option, message):
    line = fails_with_one_line(["train", "--run-dir", str(tmp_path), "--dataset", "imagefolder", "--data-dir",
                                str(jpeg_tree), "--data-option", f"crop={CROP}", "--data-option", option,
                                "--epochs", "1", "--device", "cpu"])
    assert line == f"Error: {message}"


def test_a_jpeg_tree_without_dali_is_read_by_the_cpu_decoder_saying_how_to_install_dali(tmp_path, jpeg_tree,
                                                                                        monkeypatch, caplog):
    from roarfast.data.decode import dali_installed

    with_dali = load_dataset("imagefolder", jpeg_tree, resize=RESIZE, crop=CROP, device="cpu") if dali_installed() \
        else None
    block_dali(monkeypatch)
    data = ["--dataset", "imagefolder", "--data-dir", str(jpeg_tree), "--data-option", f"resize={RESIZE}",
            "--data-option", f"crop={CROP}"]
    with caplog.at_level("WARNING"):
        result = CliRunner().invoke(main, ["train", "--run-dir", str(tmp_path), *data, "--epochs", "1", "--device",
                                           "cpu", "--no-progress"])
        cli_ok("extract", "--run-dir", str(tmp_path), "--method", "random", "--no-progress")  # no data flags
    assert result.exit_code == 0, result.output
    said = [r.getMessage() for r in caplog.records if "pip install nvidia-dali-cuda130 (or roarfast[dali])" in
            r.getMessage()]
    assert len(said) == 1 and "NVIDIA DALI is not installed" in said[0]  # once per process
    without = load_dataset("imagefolder", jpeg_tree, resize=RESIZE, crop=CROP, device="cpu")
    assert RunDir(tmp_path).base_meta()["dataset_fingerprint"] == without.fingerprint
    if with_dali is not None:  # another decoder, another dataset; the canvases a level or so apart
        assert without.fingerprint != with_dali.fingerprint
        assert (without.train.images.int() - with_dali.train.images.int()).abs().float().mean() < 1.0
    line = fails_with_one_line(["train", "--run-dir", str(tmp_path), *data, "--data-option", "device=gpu",
                                "--epochs", "1", "--device", "cpu"])
    assert "device=gpu decodes on the GPU with NVIDIA DALI, which is not installed: pip install " \
           "nvidia-dali-cuda130 (or roarfast[dali]), or device=cpu" in line


def test_a_streamed_tree_without_dali_gives_the_in_memory_batches(tmp_path, jpeg_tree, monkeypatch):
    """The CPU decoder serves the StreamLoader too: row i of the ranks meets canvas i."""
    import torch

    from roarfast.data.loader import split_loader

    block_dali(monkeypatch)
    memory = load_dataset("imagefolder", jpeg_tree, resize=RESIZE, crop=CROP, stream=False)
    streamed = load_dataset("imagefolder", jpeg_tree, resize=RESIZE, crop=CROP, stream=True)
    assert streamed.streamed and streamed.fingerprint == memory.fingerprint
    ranks = torch.stack([torch.randperm(CROP * CROP, generator=torch.Generator().manual_seed(i))
                         for i in range(len(memory.train))]).view(-1, CROP, CROP).to(torch.uint16)
    index = torch.tensor([5, 0, 11, 3])
    batches = [next(split_loader(ds, "train", "cpu", ranks=ranks, fraction=0.5).batches(index, 4, with_index=True))
               for ds in (memory, streamed)]
    assert torch.equal(batches[0][0], batches[1][0]) and torch.equal(batches[0][2], batches[1][2])
