"""A run directory remembers where its data is (issue 18, item 8): dataset.json records the absolute data
directory and the options, however the base model was trained (`train`, or the sweep that trained it), so
sweep, report, extract and retrain there need no data flags; a tree that moved is named with the flag that
overrides it."""

import json

from roarfast.rundir.directory import RunDir
from tests.test_cli_errors import cli_ok, fails_with_one_line
from tests.test_data_streamed import CROP, RESIZE, _write_tree

COMMON = ["--device", "cpu", "--no-progress"]
GRID = ["--method", "random", "--mode", "roar", "--fraction", "0.5", "--seeds", "1", "--no-control", "--epochs", "1"]


def test_a_sweep_records_the_absolute_tree_and_later_commands_need_no_data_flags(tmp_path, monkeypatch):
    tree = _write_tree(tmp_path / "data" / "jpegs", per_class=(4, 2))
    monkeypatch.chdir(tmp_path / "data")
    run_dir = tmp_path / "run"
    cli_ok("sweep", "--run-dir", str(run_dir), "--dataset", "imagefolder", "--data-dir", "jpegs", "--data-option",
           f"resize={RESIZE}", "--data-option", f"crop={CROP}", *GRID, *COMMON)
    record = RunDir(run_dir).dataset_record()
    assert record["data_dir"] == str(tree.resolve())  # the sweep trained the base model: recorded all the same
    assert (record["name"], record["options"]["resize"], record["options"]["crop"]) == ("imagefolder", RESIZE, CROP)
    monkeypatch.chdir(tmp_path)  # elsewhere: "jpegs" would not resolve from here
    cli_ok("sweep", "--run-dir", str(run_dir), *GRID, "--seeds", "2", *COMMON)
    cli_ok("extract", "--run-dir", str(run_dir), "--method", "sobel", *COMMON)
    cli_ok("retrain", "--run-dir", str(run_dir), "--method", "sobel", "--epochs", "1", "--fraction", "0.5", *COMMON)
    cli_ok("report", "--run-dir", str(run_dir))
    summary = json.loads((RunDir(run_dir).report_dir / "summary.json").read_text())
    assert not any("dataset not opened" in note for note in summary["notes"]), summary["notes"]


def test_a_moved_tree_is_named_with_the_flag_that_overrides_it(tmp_path):
    tree = _write_tree(tmp_path / "jpegs", per_class=(4, 2))
    run_dir = tmp_path / "run"
    cli_ok("train", "--run-dir", str(run_dir), "--dataset", "imagefolder", "--data-dir", str(tree), "--data-option",
           f"resize={RESIZE}", "--data-option", f"crop={CROP}", "--epochs", "1", *COMMON)
    moved = tree.rename(tmp_path / "moved")
    line = fails_with_one_line(["extract", "--run-dir", str(run_dir), "--method", "random", *COMMON])
    assert line == (f"Error: {RunDir(run_dir).dataset_path} records the data in {tree}, which does not exist (moved?): "
                    f"give its new place with --data-dir")
    cli_ok("extract", "--run-dir", str(run_dir), "--method", "random", "--data-dir", str(moved), *COMMON)
