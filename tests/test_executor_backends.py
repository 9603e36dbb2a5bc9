"""A new executor with an option of its own is one module of roarfast/execution/backends/ (and its test): here a toy
backend's module, written as a contributor would write it, joins the package's path in a fresh interpreter, and
with no other file edited the registry lists it, `roarfast sweep --help` shows --executor toy and its flag with
its help (extract, whose work is chunks, does not show a cells' option), the flag and a config file reach the
backend through parsing and its options' check, and Study takes the same options as the keyword toy=."""

import json
import subprocess
import sys
import textwrap

TOY_MODULE = '''
from dataclasses import dataclass

from roarfast.common.options import CELLS, flag
from roarfast.errors import UserError
from roarfast.stages.executor import Executor
from roarfast.execution.registry import register_executor


@dataclass(frozen=True)
class ToyOptions:
    speed: int = flag("--toy-speed", default=1, kind=int, uses=(CELLS,), help="cells the toy backend trains at once")

    def __post_init__(self):
        if isinstance(self.speed, bool) or not isinstance(self.speed, int) or self.speed < 1:
            raise UserError(f"--toy-speed should be a positive int, got {self.speed!r}")


@register_executor("toy", "a test's backend, which runs nothing", options=ToyOptions, order=9)
class ToyExecutor(Executor):
    def __init__(self, options: ToyOptions):
        self.options = options

    def prepare(self):
        raise UserError(f"the toy backend runs nothing (speed {self.options.speed})")
'''

SCRIPT = '''
import json, sys
import roarfast.execution.backends

roarfast.execution.backends.__path__.append(sys.argv[1])  # as if toy.py were a file of the package
from click.testing import CliRunner
from roarfast import Study
from roarfast.cli import main
from roarfast.errors import UserError
from roarfast.execution.registry import EXECUTORS

run_dir, config = sys.argv[2], sys.argv[3]
seen = {"names": EXECUTORS.names}
for command in ("sweep", "extract"):
    seen[command] = CliRunner().invoke(main, [command, "--help"], terminal_width=10_000).output
for name, args in {"given": ["--toy-speed", "3"], "refused": ["--toy-speed", "0"], "configured": []}.items():
    first = ["--config", config] if name == "configured" else []
    result = CliRunner().invoke(main, [*first, "sweep", "--run-dir", run_dir, "--executor", "toy", *args, "--dry-run"])
    seen[name] = [result.exit_code, result.output]
data = {"dataset": "embedded", "dataset_options": {"num_train": 10, "num_test": 20}, "progress": False}
study = Study(run_dir, executor="toy", toy={"speed": 5}, **data)
seen["study"] = [type(study.executor).__name__, study.executor.options.speed]
try:
    Study(run_dir, toy={"sped": 2}, **data)
except UserError as err:
    seen["study refused"] = str(err)
print(json.dumps(seen))
'''


def test_a_backend_with_an_option_is_one_module(tmp_path):
    (tmp_path / "backend").mkdir()
    (tmp_path / "backend" / "toy.py").write_text(textwrap.dedent(TOY_MODULE))
    (tmp_path / "c.yaml").write_text("sweep:\n  toy-speed: 4\n")
    out = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path / "backend"), str(tmp_path / "run"),
                          str(tmp_path / "c.yaml")], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    seen = json.loads(out.stdout.splitlines()[-1])

    assert seen["names"][-1] == "toy" and "local" in seen["names"]
    sweep = {line.split()[0]: line for line in seen["sweep"].splitlines() if line.strip().startswith("--")}
    assert f"[{'|'.join(seen['names'])}]" in sweep["--executor"]
    assert "toy: a test's backend, which runs nothing" in sweep["--executor"]
    assert "--toy-speed INTEGER" in sweep["--toy-speed"] and "cells the toy backend trains at once" in sweep["--toy-speed"]
    assert "toy" in seen["extract"] and "--toy-speed" not in seen["extract"]  # its option is a cells' option

    assert seen["given"] == [1, "Error: the toy backend runs nothing (speed 3)\n"]  # parsed, checked, made, handed on
    assert seen["configured"] == [1, "Error: the toy backend runs nothing (speed 4)\n"]
    assert seen["refused"] == [2, "Error: --toy-speed should be a positive int, got 0\n"]
    assert seen["study"] == ["ToyExecutor", 5]
    assert seen["study refused"].startswith("toy: sped is no field of ToyOptions; its fields: speed")
    assert not (tmp_path / "run").exists()  # every one refused before any work
