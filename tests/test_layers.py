"""The layer rules (pyproject.toml's [tool.importlinter] contracts, ARCHITECTURE.md's table) hold, cover every
module of roarfast, and break when a module reaches up: a copy of the package with a violating import in each
layer fails the same check, naming each import."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("importlinter")
tomllib = pytest.importorskip("tomllib")

REPO = Path(__file__).resolve().parents[1]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")

#: one import per layer of the contract, each from a module of that layer into the layer above it (the top
#: layer: into the other side of it); the records' is inside a function, which counts as much
VIOLATIONS = [
    ("study.py", "import roarfast.cli", "roarfast.study", "roarfast.cli"),
    ("demo.py", "import roarfast.study", "roarfast.demo", "roarfast.study"),
    ("sweep.py", "import roarfast.demo", "roarfast.sweep", "roarfast.demo"),
    ("preview.py", "import roarfast.sweep", "roarfast.preview", "roarfast.sweep"),
    ("grid.py", "import roarfast.retrain", "roarfast.grid", "roarfast.retrain"),
    ("cells.py", "from roarfast.executors import execute", "roarfast.cells", "roarfast.executors"),
    ("report/analysis.py", "import roarfast.extract", "roarfast.report.analysis", "roarfast.extract"),
    ("results/db.py", "def _reach_up():\n    from roarfast.report import write_report", "roarfast.results.db",
     "roarfast.report"),
    ("stats.py", "import roarfast.rundir", "roarfast.stats", "roarfast.rundir"),
    ("options.py", "import roarfast.stats", "roarfast.options", "roarfast.stats"),
    ("ops.py", "import roarfast.options", "roarfast.ops", "roarfast.options"),
    ("errors.py", "import roarfast.ops", "roarfast.errors", "roarfast.ops"),
]


def lint_imports(package_parent: Path, *contracts: str) -> subprocess.CompletedProcess:
    """lint-imports with the repository's contracts (all, or those ids) on the roarfast package found under
    package_parent."""
    only = [arg for contract in contracts for arg in ("--contract", contract)]
    return subprocess.run([str(LINT_IMPORTS), "--config", str(REPO / "pyproject.toml"), "--no-cache", *only],
                          capture_output=True, text=True, cwd=package_parent, env={"PYTHONPATH": str(package_parent)},
                          timeout=120)


def with_imports(tmp_path: Path, imports) -> Path:
    """A copy of the package (which keeps every contract: test_the_contracts_are_kept) with each (module,
    import) of `imports` appended; returns its parent."""
    shutil.copytree(REPO / "roarfast", tmp_path / "roarfast", ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    for module, statement in imports:
        path = tmp_path / "roarfast" / module
        path.write_text(path.read_text() + f"\n\n{statement}\n")
    return tmp_path


def layer_contract() -> dict:
    contracts = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    return next(contract for contract in contracts if contract["id"] == "layers")


def test_the_contracts_are_kept():
    result = lint_imports(REPO)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "3 kept, 0 broken" in result.stdout


def test_every_module_is_in_one_layer():
    placed = [name.strip() for layer in layer_contract()["layers"] for side in layer.split("|")
              for name in side.split(":")]
    package = REPO / "roarfast"
    modules = sorted([p.stem for p in package.glob("*.py") if p.name != "__init__.py"]
                     + [p.name for p in package.iterdir() if (p / "__init__.py").is_file()])
    assert [m for m in modules if m not in placed] == [], "place these in a layer of pyproject.toml's contract"
    assert sorted(placed) == modules, "each module in one layer, and no layer naming a module that is not there"


def test_each_layer_reaching_up_breaks_the_layers_contract(tmp_path):
    assert len(VIOLATIONS) == len(layer_contract()["layers"])
    result = lint_imports(with_imports(tmp_path, [(module, statement) for module, statement, _, _ in VIOLATIONS]),
                          "layers")
    assert result.returncode != 0 and "0 kept, 1 broken" in result.stdout, result.stdout
    missed = [f"{importer} -> {imported}" for _, _, importer, imported in VIOLATIONS
              if f"- {importer} -> {imported} (l." not in result.stdout]
    assert missed == [], result.stdout


def test_the_layers_contract_alone_is_broken_by_one_reaching_import(tmp_path):
    result = lint_imports(with_imports(tmp_path, [("store/record.py", "import roarfast.extract")]), "layers")
    assert result.returncode != 0 and "0 kept, 1 broken" in result.stdout, result.stdout
    assert "roarfast.store is not allowed to import roarfast.extract" in result.stdout, result.stdout


def test_retrain_on_the_grid_breaks_its_contract(tmp_path):
    result = lint_imports(with_imports(tmp_path, [("retrain.py", "from roarfast.grid import make_plan")]),
                          "retrain-not-on-grid")
    assert result.returncode != 0 and "0 kept, 1 broken" in result.stdout, result.stdout


@pytest.mark.parametrize("module", ["grid.py", "preview.py", "estimate.py"])
def test_the_grid_or_a_planner_on_the_extract_stage_breaks_its_contract(tmp_path, module):
    reach = "def _reach():\n    from roarfast.extract import run_extract"  # inside a function counts as much
    result = lint_imports(with_imports(tmp_path, [(module, reach)]), "planners-not-on-extract")
    assert result.returncode != 0 and "0 kept, 1 broken" in result.stdout, result.stdout
