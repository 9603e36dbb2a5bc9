"""The CLI's surface: fast --help (no torch import), every registered command's help, --executor's choices and
each backend's flags read from the registry, --config, usage errors."""

import json
import pkgutil
import subprocess
import sys

import click
import pytest
from click.testing import CliRunner

import roarfast.cli.commands
from roarfast.cli import main
from roarfast.cli.commands import COMMANDS
from roarfast.common.options import CELLS, CHUNKS, flags_of
from roarfast.execution.registry import EXECUTORS

SUBCOMMANDS = COMMANDS.names


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
    assert set(seen) == {"roarfast", *SUBCOMMANDS}
    assert seen == {command: [] for command in seen}


def test_the_group_holds_every_registered_command_each_from_a_module_named_after_it():
    assert sorted(main.commands) == sorted(SUBCOMMANDS) and len(SUBCOMMANDS) == len(set(SUBCOMMANDS))
    modules = {module.name for module in pkgutil.iter_modules(roarfast.cli.commands.__path__)}
    assert {entry.module.rpartition(".")[2] for entry in COMMANDS} == modules  # no module without its command
    assert all(entry.module.rpartition(".")[2] == entry.name for entry in COMMANDS)


@pytest.mark.parametrize("command", SUBCOMMANDS)
def test_every_subcommand_has_help(command):
    result = CliRunner().invoke(main, [command, "--help"])
    assert result.exit_code == 0, result.output
    assert f"Usage: main {command}" in result.output or f"Usage: roarfast {command}" in result.output
    assert " ".join(COMMANDS[command].description.split()) in " ".join(result.output.split())


#: the work each command that takes --executor hands it (a backend's option shows where it applies)
WORK = {"extract": {CHUNKS}, "sweep": {CELLS, CHUNKS}}


def _options(command) -> dict:
    """{flag: its help} of a command's options."""
    ctx = click.Context(main.commands[command])
    return {opt: param.get_help_record(ctx)[1] for param in main.commands[command].params
            if isinstance(param, click.Option) for opt in param.opts}


def test_every_registered_executor_is_a_choice_of_executor_with_its_description():
    assert sorted(name for name, command in main.commands.items() if "--executor" in _options(name)) == sorted(WORK)
    for name in WORK:
        executor = next(p for p in main.commands[name].params if "--executor" in getattr(p, "opts", ()))
        assert list(executor.type.choices) == EXECUTORS.names
        for entry in EXECUTORS:
            assert f"{entry.name}: {entry.description}" in _options(name)["--executor"]


def test_each_backend_s_flags_show_on_the_commands_whose_work_they_apply_to():
    declared = [(flag, set(flag.uses)) for entry in EXECUTORS if entry.options_type is not None
                for _, flag in flags_of(entry.options_type)]
    assert declared  # the ray backend has its own options
    for name, work in WORK.items():
        shown = _options(name)
        for flag, uses in declared:
            assert (flag.decls[0] in shown) == bool(uses & work), (name, flag.decls)
            if uses & work:
                assert " ".join(flag.help.split()) in " ".join(shown[flag.decls[0]].split())


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

    import roarfast.orchestration.demo

    monkeypatch.setattr(roarfast.orchestration.demo, "run_demo", fake_run_demo)
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
    import roarfast.orchestration.demo

    monkeypatch.setattr(roarfast.orchestration.demo, "run_demo", lambda run_dir, **kw: seen.update(kw))
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
