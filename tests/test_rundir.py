"""The run directory (roarfast.rundir.directory.RunDir): the documented layout, its base model refused for another
dataset, the stage-time record, and the dataset it remembers, so that extract and retrain after train need
no repeated flags and a different dataset is refused with both fingerprints."""

import pytest
from click.testing import CliRunner

from roarfast.cli import main
from roarfast.errors import UserError
from roarfast.records.head import Head
from roarfast.rundir.directory import RunDir


def test_the_layout_is_the_documented_one(tmp_path):
    """roarfast.rundir.directory's docstring and the README name these paths; every module reaches them through RunDir."""
    run = RunDir(tmp_path)
    assert run.head_path == run.dataset_path == tmp_path / "HEAD.json"
    assert run.model_dir("0123456789abcdef") == tmp_path / "models" / "0123456789abcdef"
    assert run.rank_dir("grad", "0123456789abcdef") == tmp_path / "ranks" / "grad" / "0123456789abcdef"
    assert run.ranks_for({"grad": "0123456789abcdef"}).path("grad", "test") == tmp_path / "ranks" / "grad" / \
        "0123456789abcdef" / "test"
    assert run.configuration_path("0123456789abcdef") == tmp_path / "configurations" / "0123456789abcdef.json"
    assert run.dataset_record_path("f" * 64) == tmp_path / "datasets" / f"{'f' * 16}.json"
    assert run.results_path == tmp_path / "results.sqlite"
    assert run.stage_times_path == tmp_path / "stages.json"
    assert run.report_dir == tmp_path / "report"
    assert run.legacy_fill_leakage_path == tmp_path / "leakage.json"
    # format 1's places, read as they are and migrated by the first command that writes
    assert run.legacy_base_checkpoint == tmp_path / "checkpoints" / "base"
    assert run.legacy_rank_root == tmp_path / "attributions"
    assert run.legacy_dataset_path == tmp_path / "dataset.json"


def test_stage_times_merge_parts_and_replace_totals(tmp_path):
    run = RunDir(tmp_path / "run")
    assert run.stage_times() is None
    run.record_stage_time("train", 12.5)
    run.record_stage_time("extract", {"grad": 3.0})
    run.record_stage_time("extract", {"sobel": 1.0})
    run.record_stage_time("train", 10.0)
    assert run.stage_times() == {"train": 10.0, "extract": {"grad": 3.0, "sobel": 1.0}}


def test_dataset_spec_explicit_arguments_win_over_the_record(tmp_path):
    run = RunDir(tmp_path)
    assert run.dataset_spec() == ("embedded", None, {})
    data = tmp_path / "data"
    data.mkdir()
    run.records.put(Head(dataset={"name": "cifar10", "data_dir": str(data), "options": {"download": False},
                                  "fingerprint": "f"}))
    assert run.dataset_spec(options={"download": True}) == ("cifar10", str(data), {"download": True})
    assert run.dataset_spec("embedded") == ("embedded", None, {})


def test_the_base_model_is_loaded_only_for_its_dataset(tmp_path):
    from roarfast.data import load_dataset
    from roarfast.stages.basemodel import TrainOptions, run_train

    run = RunDir(tmp_path)
    small = load_dataset("embedded", num_train=64, num_test=16)
    with pytest.raises(UserError, match=f"no base model in .*: run `roarfast train --run-dir {tmp_path}` first"):
        run.load_base_model(small)
    run_train(tmp_path, TrainOptions(epochs=1), dataset_obj=small, device="cpu", progress=False)
    model, meta = run.load_base_model(small)
    assert meta == run.base_meta() and meta["dataset_fingerprint"] == small.fingerprint and not model.training
    other = load_dataset("embedded", num_train=64, num_test=16, seed=1)
    with pytest.raises(UserError, match=f"trained on dataset {small.fingerprint} but this dataset is "
                                        f"{other.fingerprint}"):
        run.load_base_model(other)


def test_extract_after_train_uses_the_recorded_dataset(tmp_path):
    run = RunDir(tmp_path / "run")
    runner = CliRunner()
    small = ["--data-option", "num_train=200", "--data-option", "num_test=40"]
    result = runner.invoke(main, ["train", "--run-dir", str(run.root), "--epochs", "1", "--no-progress", *small])
    assert result.exit_code == 0, result.output
    recorded = run.dataset_record()
    assert recorded["name"] == "embedded" and recorded["options"]["num_train"] == 200

    result = runner.invoke(main, ["extract", "--run-dir", str(run.root), "--method", "grad", "--no-progress"])
    assert result.exit_code == 0, result.output
    assert run.rank_store.manifest("grad", "test")["shape"] == [40, 32, 32]

    # the default embedded dataset (other sizes) is not the one the model was trained on
    result = runner.invoke(main, ["extract", "--run-dir", str(run.root), "--method", "gb", "--dataset", "embedded",
                                  "--no-progress"])
    assert result.exit_code == 1
    assert recorded["fingerprint"] in result.output and "Traceback" not in result.output


def test_bad_data_option_is_a_usage_error():
    result = CliRunner().invoke(main, ["train", "--data-option", "num_train"])
    assert result.exit_code == 2 and "KEY=VALUE" in result.output


def test_unknown_data_option_names_the_known_ones(tmp_path):
    result = CliRunner().invoke(main, ["train", "--run-dir", str(tmp_path), "--data-option", "colour=red"])
    assert result.exit_code == 1 and "num_train" in result.output
