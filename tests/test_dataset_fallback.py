"""Where a stage loads the embedded dataset for want of another (no --dataset, and a run directory that holds work
but whose HEAD records no dataset), one line says it fell back and what to pass: options that load the data the
base model was trained on. Nothing is said where nothing fell back: a dataset named, one recorded, or a new run
directory, whose default the embedded dataset is."""

import shlex

import pytest
import torch
from click.testing import CliRunner

from roarfast.cli import main
from roarfast.common.options import parse_pairs
from roarfast.data import load_dataset
from roarfast.models import build_model
from roarfast.rundir import fallback
from roarfast.rundir.directory import RunDir

SMALL = {"num_train": 64, "num_test": 32}  # not the embedded dataset's defaults: another fingerprint


@pytest.fixture(autouse=True)
def unsaid(monkeypatch):
    monkeypatch.setattr(fallback, "_said", set())  # each test's run directory said anew


@pytest.fixture(scope="module")
def small():
    return load_dataset("embedded", **SMALL)


def worked(root, dataset, head_dataset: bool = False) -> RunDir:
    """A run directory holding a base model of `dataset` (its data's record kept in datasets/), whose HEAD names
    that dataset only when head_dataset."""
    run = RunDir(root)
    torch.manual_seed(0)
    base = run.save_base_model(build_model("fastnet", dataset.num_classes), {
        "model": "fastnet", "num_classes": dataset.num_classes, "image_size": 32, "in_channels": 3,
        "dataset_fingerprint": dataset.fingerprint})
    record = run.remember_dataset(dataset)
    run.update_head("test", base=base, **({"dataset": record} if head_dataset else {}))
    return run


def notes(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == fallback.__name__]


def test_the_fallback_is_said_once_with_options_that_load_the_base_model_s_data(tmp_path, small, caplog):
    run = worked(tmp_path / "run", small)
    with caplog.at_level("WARNING"):
        assert run.dataset_spec() == ("embedded", None, {})
        run.dataset_spec()  # a dry run asks again: said once
    [said] = notes(caplog)
    assert said.startswith(f"note: {run.root} records no dataset (its HEAD names none) and no --dataset was given: "
                           f"loading the embedded dataset with its defaults; if its work was made from other data, "
                           f"pass `")
    # what it says to pass, read as the command line reads it, loads the data the base model was trained on
    words = shlex.split(said.split("`")[1])
    named = dict(zip(words[::2], words[1::2]))
    options = parse_pairs([value for flag, value in zip(words[::2], words[1::2]) if flag == "--data-option"])
    assert run.open_dataset(named["--dataset"], named.get("--data-dir"), options).fingerprint == small.fingerprint


def test_nothing_is_said_where_nothing_fell_back(tmp_path, small, caplog):
    with caplog.at_level("WARNING"):
        assert RunDir(tmp_path / "new").dataset_spec() == ("embedded", None, {})  # a new run directory's default
        worked(tmp_path / "named", small).dataset_spec("embedded", None, SMALL)  # a dataset named
        recorded = worked(tmp_path / "recorded", small, head_dataset=True)
        assert recorded.dataset_spec()[0] == "embedded" and recorded.dataset_spec()[2]["num_train"] == 64
    assert notes(caplog) == []


def test_without_the_data_s_record_it_still_says_what_to_pass(tmp_path, small, caplog):
    run = worked(tmp_path / "run", small)
    run.dataset_record_path(small.fingerprint).unlink()
    with caplog.at_level("WARNING"):
        run.dataset_spec()
    [said] = notes(caplog)
    assert said.endswith("pass --dataset NAME with --data-dir DIR and --data-option KEY=VALUE as the base model "
                         "was trained")


def test_a_stage_that_falls_back_says_so_before_it_refuses(tmp_path, small, caplog):
    run = worked(tmp_path / "run", small)
    with caplog.at_level("WARNING"):
        result = CliRunner().invoke(main, ["extract", "--run-dir", str(run.root), "--method", "grad", "--device",
                                           "cpu"])
    [said] = notes(caplog)
    assert said.startswith(f"note: {run.root} records no dataset") and "--data-option num_train=64" in said
    assert result.exit_code == 1 and result.output.startswith("Error: the base model in ")
    assert "was trained on dataset" in result.output and len(result.output.strip().splitlines()) == 1
