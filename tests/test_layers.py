"""The layer rules (pyproject.toml's [tool.importlinter] contracts, ARCHITECTURE.md) hold, and break when a
low module reaches up: a copy of the package with one violating import fails the same check."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("importlinter")

REPO = Path(__file__).resolve().parents[1]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def lint_imports(package_parent: Path, *contracts: str) -> subprocess.CompletedProcess:
    """lint-imports with the repository's contracts (all, or those ids) on the roarfast package found under
    package_parent."""
    only = [arg for contract in contracts for arg in ("--contract", contract)]
    return subprocess.run([str(LINT_IMPORTS), "--config", str(REPO / "pyproject.toml"), "--no-cache", *only],
                          capture_output=True, text=True, cwd=package_parent, env={"PYTHONPATH": str(package_parent)},
                          timeout=120)


def test_the_contracts_are_kept():
    result = lint_imports(REPO)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "6 kept, 0 broken" in result.stdout


@pytest.mark.parametrize("module, violation, contract", [
    ("store.py", "import roarfast.extract", "blocks-import-no-stage"),
    ("data/loader.py", "from roarfast.cells import CellTrainer", "blocks-import-no-stage"),
    ("report/analysis.py", "from roarfast.executors import execute", "report-imports-no-stage"),
    ("report/figures.py", "from roarfast.train import train_classifier", "report-imports-no-stage"),
    ("cells.py", "from roarfast.grid import Grid", "stages-import-no-grid"),
    ("retrain.py", "from roarfast.grid import make_plan", "stages-import-no-grid"),
    ("extract.py", "from roarfast.executors import execute", "stages-import-no-executor"),
    ("recipe.py", "import roarfast.cli", "no-cli"),
    ("grid.py", "import roarfast.sweep", "layers"),
    ("sweep.py", "import roarfast.study", "layers"),
    ("study.py", "import roarfast.cli", "layers"),
    ("models/spec.py", "import roarfast.train", "blocks-import-no-stage"),
])
def test_a_module_reaching_up_breaks_its_contract(tmp_path, module, violation, contract):
    # a copy of the package (which keeps every contract: test_the_contracts_are_kept) plus one import
    shutil.copytree(REPO / "roarfast", tmp_path / "roarfast", ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    path = tmp_path / "roarfast" / module
    path.write_text(path.read_text() + f"\n{violation}\n")
    result = lint_imports(tmp_path, contract)
    assert result.returncode != 0 and "0 kept, 1 broken" in result.stdout, result.stdout
