"""The CLI's surface: fast --help (no torch import), every subcommand's help, --config, usage errors."""

import json
import subprocess
import sys

import pytest
from click.testing import CliRunner

from roarfast.cli import main

SUBCOMMANDS = ["train", "extract", "retrain", "sweep", "report", "run", "evaluate", "leakage", "doctor", "compare", "list",
               "paper"]


#: what a --help must not import: torch alone takes seconds, the others are as heavy or optional
HEAVY = ("torch", "numpy", "scipy", "matplotlib", "ray", "captum", "nvidia.dali", "pandas", "roarfast._C")

#: in a fresh interpreter: every command's --help, each followed by the heavy libraries imported so far
_EVERY_HELP = """
import json, sys
from click.testing import CliRunner
from roarfast.cli import main
seen = {}
for command in [None, *main.commands]:
    result = CliRunner().invoke(main, [command, "--help"] if command else ["--help"])
    assert result.exit_code == 0, result.output
    seen[command or "roarfast"] = [name for name in sys.argv[1:] if name in sys.modules]
print(json.dumps(seen))
"""


def test_every_help_imports_no_torch():
    # --help must answer at once: the lists of models, datasets, estimators and fills come from declarations
    out = subprocess.run([sys.executable, "-c", _EVERY_HELP, *HEAVY], capture_output=True, text=True, check=True)
    seen = json.loads(out.stdout.splitlines()[-1])
    assert set(seen) == {"roarfast", *SUBCOMMANDS, "ls", "prune"}
    assert seen == {command: [] for command in seen}


@pytest.mark.parametrize("command", SUBCOMMANDS)
def test_every_subcommand_has_help(command):
    result = CliRunner().invoke(main, [command, "--help"])
    assert result.exit_code == 0, result.output
    assert f"Usage: main {command}" in result.output or f"Usage: roarfast {command}" in result.output


@pytest.mark.parametrize("bad", ["0", "1.5", "-0.1", "abc"])
def test_fraction_outside_unit_interval_is_a_usage_error(bad):
    result = CliRunner().invoke(main, ["retrain", "--fraction", bad])
    assert result.exit_code == 2
    assert "--fraction" in result.output


def test_bad_mode_is_a_usage_error():
    result = CliRunner().invoke(main, ["retrain", "--mode", "roar,keep"])
    assert result.exit_code == 2
    assert "roar and kar" in result.output


def test_config_file_sets_defaults_and_flags_override(tmp_path, monkeypatch):
    seen = {}

    def fake_run_demo(run_dir, **kwargs):
        seen.update(run_dir=str(run_dir), **kwargs)

    import roarfast.stages.demo

    monkeypatch.setattr(roarfast.stages.demo, "run_demo", fake_run_demo)
    config = tmp_path / "c.yaml"
    config.write_text("run-dir: from-top-level\nseed: 3\nrun:\n  seed: 5\n  fraction: '0.2,0.4'\n")
    result = CliRunner().invoke(main, ["--config", str(config), "run"])
    assert result.exit_code == 0, result.output
    assert seen["run_dir"] == "from-top-level" and seen["seed"] == 5 and seen["fractions"] == [0.2, 0.4]
    result = CliRunner().invoke(main, ["--config", str(config), "run", "--seed", "7"])
    assert result.exit_code == 0, result.output
    assert seen["seed"] == 7


@pytest.mark.parametrize("text, named", [("- just\n- a list\n", "mapping"),
                                         ("retrain:\n  fractoin: 0.5\n", "fractoin")])
def test_bad_config_is_a_usage_error_naming_the_problem(tmp_path, text, named):
    config = tmp_path / "c.yaml"
    config.write_text(text)
    result = CliRunner().invoke(main, ["--config", str(config), "doctor"])
    assert result.exit_code == 2
    assert named in result.output


def test_doctor_lists_kernels_per_op():
    result = CliRunner().invoke(main, ["doctor"])
    assert result.exit_code == 0, result.output
    assert "op rank" in result.output and "CPU" in result.output
    assert "torch" in result.output


@pytest.mark.parametrize("native, says", [("1", "cpu bf16     native: --amp auto trains on the CPU in bf16"),
                                          ("0", "cpu bf16     not native: --amp auto trains on the CPU in fp32")])
def test_doctor_says_what_precision_auto_trains_in_on_the_cpu(monkeypatch, native, says):
    monkeypatch.setenv("ROARFAST_NATIVE_BF16", native)
    result = CliRunner().invoke(main, ["doctor"])
    assert f"{says} (ROARFAST_NATIVE_BF16 set)" in result.output



def test_run_without_fraction_uses_the_demo_default(monkeypatch):
    seen = {}
    import roarfast.stages.demo

    monkeypatch.setattr(roarfast.stages.demo, "run_demo", lambda run_dir, **kw: seen.update(kw))
    result = CliRunner().invoke(main, ["run"])
    assert result.exit_code == 0, result.output
    assert seen["fractions"] is None


def test_stale_extension_build_is_one_line_with_the_fix(tmp_path):
    # a fresh interpreter: the extension must not be loaded yet when the CLI command starts
    code = ("import roarfast._extension as e; e.build_config = lambda: {'torch': '0.0.1-other'}; "
            "from click.testing import CliRunner; from roarfast.cli import main; "
            f"r = CliRunner().invoke(main, ['extract', '--run-dir', {str(tmp_path)!r}, '--method', 'random']); "
            "print(r.exit_code); print(r.output)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.splitlines()[0] == "1"
    assert "built for torch 0.0.1-other" in out and "bash scripts/bootstrap.sh" in out
    assert "Traceback" not in out
