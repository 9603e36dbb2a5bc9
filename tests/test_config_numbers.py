"""Number options from a --config file are checked as their flags are (issue 24, item 6): `epochs: 1.7` was
truncated to 1 silently; every integer option of every command now refuses a value that is not an integer
(a float, a bool, text that is not one) in one line naming the option and the file, as `--epochs 1.7` is
refused, and every float option refuses a bool; a config mapping of loader options reaches the loader's
checks whole."""

import click
import pytest
from click.testing import CliRunner

from roarfast.cli import main


def _numbers(kind) -> list:
    """(command, option) of every option of `kind` (click's param type) on every command."""
    return [(name, param.opts[0].lstrip("-")) for name, command in sorted(main.commands.items())
            for param in command.params if isinstance(param, click.Option) and isinstance(param.type, kind)]


INTEGERS = _numbers(click.types.IntParamType)
FLOATS = _numbers(click.types.FloatParamType)


def test_the_integer_options_are_all_found():
    assert {option for _, option in INTEGERS} >= {"seed", "epochs", "batch-size", "samples", "ig-steps", "seeds",
                                                  "control-seeds", "max-images"}
    assert ("train", "epochs") in INTEGERS and ("sweep", "control-seeds") in INTEGERS


def _invoke(tmp_path, text: str, command: str):
    config = tmp_path / "config.yaml"
    config.write_text(text)
    return CliRunner().invoke(main, ["--config", str(config), command, "--help"]), config


@pytest.mark.parametrize("command, option", INTEGERS)
@pytest.mark.parametrize("value, shown", [("1.7", "1.7"), ("true", "True"), ("'1.7'", "'1.7'"), ("[3]", "[3]")])
def test_an_integer_option_refuses_what_its_flag_refuses(tmp_path, command, option, value, shown):
    result, config = _invoke(tmp_path, f"{command}:\n  {option}: {value}\n", command)
    assert result.exit_code == 2
    assert (f"Invalid value for '--config': {config}: {option} should be an integer (as --{option} takes it), got "
            f"{shown}") in result.output
    flag = CliRunner().invoke(main, [command, f"--{option}", "1.7"])  # refused while parsing: nothing runs
    assert flag.exit_code == 2 and "is not a valid integer" in flag.output


@pytest.mark.parametrize("command, option", INTEGERS)
def test_an_integer_option_takes_an_integer_or_its_text(tmp_path, command, option):
    for value in ("3", "'3'"):
        result, _ = _invoke(tmp_path, f"{command}:\n  {option}: {value}\n", command)
        assert result.exit_code == 0, result.output


@pytest.mark.parametrize("command, option", FLOATS)
def test_a_float_option_refuses_a_bool_and_takes_a_number(tmp_path, command, option):
    result, config = _invoke(tmp_path, f"{command}:\n  {option}: yes\n", command)
    assert result.exit_code == 2 and f"{config}: {option} should be a number" in result.output
    for value in ("0.25", "1", "'0.25'"):
        assert _invoke(tmp_path, f"{command}:\n  {option}: {value}\n", command)[0].exit_code == 0


def test_a_top_level_integer_applies_to_every_command_and_is_checked_as_well(tmp_path):
    result, config = _invoke(tmp_path, "epochs: 1.7\n", "train")
    assert result.exit_code == 2 and f"{config}: epochs should be an integer" in result.output


def test_loader_options_from_a_config_mapping_are_checked_as_the_flag_s(tmp_path):
    config = tmp_path / "config.yaml"
    config.write_text("data-option:\n  num_train: 1.7\n")
    from_file = CliRunner().invoke(main, ["--config", str(config), "train", "--run-dir", str(tmp_path / "run"),
                                          "--device", "cpu", "--no-progress"])
    from_flag = CliRunner().invoke(main, ["train", "--run-dir", str(tmp_path / "run"), "--device", "cpu",
                                          "--no-progress", "--data-option", "num_train=1.7"])
    assert from_file.exit_code == from_flag.exit_code == 1
    assert from_file.output == from_flag.output == "Error: --data-option num_train should be an int, got 1.7\n"
