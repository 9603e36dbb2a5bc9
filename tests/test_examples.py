"""The examples run as a reader runs them, at small sizes: the command-line one (a FashionMNIST-format dataset
written on the fly, the user's model and estimator by import path) and the same study through roarfast.Study."""

import json
import runpy
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
SMALL = ["--train", "120", "--test", "40", "--epochs", "1", "--seeds", "1", "--fractions", "0.5"]


def check_report(run: Path) -> None:
    summary = json.loads((run / "report" / "summary.json").read_text())
    assert {g["method"] for g in summary["groups"]} == {"random", "grad", "gb", "my_plugins:input_x_gradient"}
    assert (run / "report" / "index.html").is_file()


@pytest.mark.slow
def test_the_command_line_example(tmp_path):
    result = subprocess.run([sys.executable, str(EXAMPLES / "fashion_cli.py"), "--out", str(tmp_path), *SMALL],
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "$ roarfast sweep" in result.stdout and "--model my_plugins:small_cnn" in result.stdout
    check_report(tmp_path / "run")


def test_the_study_example(tmp_path, monkeypatch, capsys):
    monkeypatch.syspath_prepend(str(EXAMPLES))  # where `python examples/fashion_study.py` finds its neighbours
    monkeypatch.setattr(sys, "argv", ["fashion_study.py", "--out", str(tmp_path), *SMALL])
    runpy.run_path(str(EXAMPLES / "fashion_study.py"), run_name="__main__")
    assert f"report: {tmp_path / 'run' / 'report' / 'index.html'}" in capsys.readouterr().out
    check_report(tmp_path / "run")
