"""The `roarfast` command's start (roarfast.cli.start, roarfast.common.memory.preload_allocator): a command that
computes starts again once with its allocator before click, the commands or torch load, so the first start costs an
interpreter and one small module; one that only answers (--help, --version, ls, list) is not started again."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from roarfast.cli.start import computes
from roarfast.common import memory

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("args, expected", [
    ([], False), (["--help"], False), (["sweep", "--help"], False), (["report", "-h"], False), (["--version"], False),
    (["ls"], False), (["list", "methods"], False), (["--config", "ls.yaml", "ls"], False),
    (["--config", "sweep", "train"], True), (["sweep", "--dry-run"], True), (["extract", "--method", "ls"], True),
])
def test_only_a_command_that_computes_starts_again(args, expected):
    assert computes(args) is expected


def _imports(args: list) -> list:
    """The modules `python -m roarfast.cli ARGS` imported, in order, over all its starts (-X importtime's lines:
    the option is the interpreter's, so a start again keeps it)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for name in (memory.ENV_VAR, memory.APPLIED_VAR, "LD_PRELOAD"):
        env.pop(name, None)
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "roarfast.cli", *args], env=env,
                          capture_output=True, text=True, timeout=300)
    return re.findall(r"^import time:.*\|\s+([\w.]+)$", done.stderr, flags=re.MULTILINE)


@pytest.mark.skipif(memory.glibc() is None, reason="the allocator is chosen for Linux with glibc")
def test_a_computing_command_starts_again_before_click_loads_and_help_does_not():
    computing = _imports(["train", "--no-such-option"])  # a usage error, after the start again
    assert computing.count("roarfast.common.memory") == 2
    assert computing.count("click") == 1
    assert computing.index("click") > [i for i, m in enumerate(computing) if m == "roarfast.common.memory"][1]
    answering = _imports(["report", "--help"])
    assert answering.count("roarfast.common.memory") == 1 and answering.count("click") == 1
