"""A run directory remembers its dataset: extract and retrain after train need no repeated flags, and a
different dataset is refused with both fingerprints."""

import json

from click.testing import CliRunner

from roarfast.cli import main


def test_extract_after_train_uses_the_recorded_dataset(tmp_path):
    run = str(tmp_path / "run")
    runner = CliRunner()
    small = ["--data-option", "num_train=200", "--data-option", "num_test=40"]
    result = runner.invoke(main, ["train", "--run-dir", run, "--epochs", "1", "--no-progress", *small])
    assert result.exit_code == 0, result.output
    recorded = json.loads((tmp_path / "run" / "dataset.json").read_text())
    assert recorded["name"] == "embedded" and recorded["options"]["num_train"] == 200

    result = runner.invoke(main, ["extract", "--run-dir", run, "--method", "grad", "--no-progress"])
    assert result.exit_code == 0, result.output
    manifest = json.loads((tmp_path / "run" / "attributions" / "grad" / "test" / "manifest.json").read_text())
    assert manifest["shape"] == [40, 32, 32]

    # the default embedded dataset (other sizes) is not the one the model was trained on
    result = runner.invoke(main, ["extract", "--run-dir", run, "--method", "gb", "--dataset", "embedded",
                                  "--no-progress"])
    assert result.exit_code == 1
    assert recorded["fingerprint"] in result.output and "Traceback" not in result.output


def test_bad_data_option_is_a_usage_error():
    result = CliRunner().invoke(main, ["train", "--data-option", "num_train"])
    assert result.exit_code == 2 and "KEY=VALUE" in result.output


def test_unknown_data_option_names_the_known_ones(tmp_path):
    result = CliRunner().invoke(main, ["train", "--run-dir", str(tmp_path), "--data-option", "colour=red"])
    assert result.exit_code == 1 and "num_train" in result.output
