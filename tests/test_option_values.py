"""Every option value that does not parse is one line naming the option and the text (issue 30, item 7): a
YAML value such as `[1,` or `{` in --method-arg, --data-option or --recipe (once a 70-line YAML traceback), a
--config file that is not YAML text, click's own types, and the options' checks; exit code 2, no usage banner."""

import pytest
from click.testing import CliRunner

from roarfast.cli import main
from tests.test_cli_errors import fails_with_one_line


@pytest.mark.parametrize("args, option, text", [
    (["train", "--data-option", "num_train=[1,"], "--data-option", "[1,"),
    (["train", "--recipe", "lr={"], "--recipe", "{"),
    (["extract", "--method", "captum:Occlusion", "--method-arg", "sliding_window_shapes=[3,8"], "--method-arg", "[3,8"),
    (["sweep", "--dry-run", "--method", "ig", "--method-arg", "ig_steps={"], "--method-arg", "{"),
    (["retrain", "--fraction", "0.3,abc"], "--fraction", "abc"),
    (["train", "--epochs", "two"], "--epochs", "two"),
    (["retrain", "--fraction", "1.5"], "--fraction", "1.5"),
    (["train", "--data-option", "num_train"], "--data-option", "num_train"),
])
def test_a_value_that_does_not_parse_is_one_line_naming_the_option(tmp_path, args, option, text):
    line = fails_with_one_line([*args, "--run-dir", str(tmp_path / "run")], exit_code=2)
    assert option in line and text in line, line
    assert not (tmp_path / "run").exists()  # refused before anything was done


@pytest.mark.parametrize("content, says", [
    (b"recipe: {lr: [1,\n", "is not valid YAML (expected the node content, but found '<stream end>' at line 2"),
    (b"seed: 0\n\xff\xfe\n", "cannot read"),
])
def test_a_config_file_that_is_not_yaml_is_one_line_naming_it(tmp_path, content, says):
    config = tmp_path / "c.yaml"
    config.write_bytes(content)
    line = fails_with_one_line(["--config", str(config), "train", "--run-dir", str(tmp_path / "run")], exit_code=2)
    assert "'--config'" in line and str(config) in line and says in line, line


def test_no_command_still_shows_the_help():
    result = CliRunner().invoke(main, [])
    assert "Usage:" in result.output and "Commands:" in result.output
