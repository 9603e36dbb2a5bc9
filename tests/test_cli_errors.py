"""User mistakes on the command line end in exit code 1 and one line that names the problem and, where
there is one, the fix: a stage run before the one it needs, a bad --device or --split, oracle on a dataset
without masks, ranks of another dataset (both fingerprints named)."""

import pytest
import torch
from click.testing import CliRunner

from roarfast.cli import main
from roarfast.data import load_dataset
from roarfast.rundir.directory import RunDir
from tests.test_data_cifar import fabricate

#: a tiny embedded dataset on the CPU: each command below takes about a second
TINY = ["--data-option", "num_train=10", "--data-option", "num_test=10", "--device", "cpu", "--no-progress"]


def cli_ok(*args) -> str:
    """Runs the CLI; asserts exit code 0; returns its output."""
    result = CliRunner().invoke(main, [*args])
    assert result.exit_code == 0, result.output
    return result.output


def fails_with_one_line(args, exit_code: int = 1) -> str:
    """Runs the CLI; asserts `exit_code` (2: a usage error) and a single 'Error: ...' line; returns that line."""
    result = CliRunner().invoke(main, args)
    assert result.exit_code == exit_code, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.output
    return lines[0]


def test_extract_before_train_says_to_train(tmp_path):
    line = fails_with_one_line(["extract", "--run-dir", str(tmp_path), "--method", "grad", *TINY])
    assert "no base model" in line and f"roarfast train --run-dir {tmp_path}" in line


def test_retrain_before_extract_says_to_extract(tmp_path):
    line = fails_with_one_line(["retrain", "--run-dir", str(tmp_path), "--method", "grad", "--epochs", "1", *TINY])
    assert "no complete ranks" in line and f"roarfast extract --method grad --run-dir {tmp_path}" in line


@pytest.mark.parametrize("device", ["tpu", "cuda:x"])
def test_bad_device_is_named(tmp_path, device):
    line = fails_with_one_line(["extract", "--run-dir", str(tmp_path), "--method", "random", *TINY,
                                "--device", device])
    assert f"--device should be auto, cpu, cuda or cuda:N, got '{device}'" in line


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is there")
def test_cuda_without_a_gpu_is_named(tmp_path):
    line = fails_with_one_line(["extract", "--run-dir", str(tmp_path), "--method", "random", *TINY,
                                "--device", "cuda"])
    assert "--device cuda asked for a GPU but torch sees none" in line


def test_bad_split_is_named_before_any_work(tmp_path):
    line = fails_with_one_line(["extract", "--run-dir", str(tmp_path), "--method", "random", "--split", "train,val",
                                *TINY])
    assert "--split takes train and test, got 'val'" in line
    assert RunDir(tmp_path).rank_store.methods("train") == []  # refused up front, not after extracting train


def test_oracle_on_a_dataset_without_masks(tmp_path):
    fabricate(tmp_path / "cifar")
    line = fails_with_one_line(["extract", "--run-dir", str(tmp_path / "run"), "--method", "oracle", "--dataset",
                                "cifar10", "--data-dir", str(tmp_path / "cifar"), "--device", "cpu", "--no-progress"])
    assert "dataset cifar10 has no ground-truth masks, so it has no 'oracle' method" in line


def test_retrain_on_ranks_of_another_dataset_names_both_fingerprints(tmp_path):
    made = CliRunner().invoke(main, ["extract", "--run-dir", str(tmp_path), "--method", "random", *TINY])
    assert made.exit_code == 0, made.output
    line = fails_with_one_line(["retrain", "--run-dir", str(tmp_path), "--epochs", "1", *TINY,
                                "--data-option", "seed=1"])
    stored = load_dataset("embedded", num_train=10, num_test=10).fingerprint
    current = load_dataset("embedded", num_train=10, num_test=10, seed=1).fingerprint
    assert stored != current
    assert "another dataset" in line and stored in line and current in line
