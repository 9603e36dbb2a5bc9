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
    ("stages/demo.py", "import roarfast.study", "roarfast.stages.demo", "roarfast.study"),
    ("stages/sweep.py", "import roarfast.stages.demo", "roarfast.stages.sweep", "roarfast.stages.demo"),
    ("planning/preview.py", "import roarfast.stages.sweep", "roarfast.planning.preview", "roarfast.stages.sweep"),
    ("execution/local.py", "import roarfast.planning.preview", "roarfast.execution.local", "roarfast.planning.preview"),
    ("planning/grid.py", "import roarfast.execution.local", "roarfast.planning.grid", "roarfast.execution.local"),
    ("stages/cells.py", "from roarfast.execution.executors import execute", "roarfast.stages.cells", "roarfast.execution.executors"),
    ("report/analysis.py", "import roarfast.stages.extract", "roarfast.report.analysis", "roarfast.stages.extract"),
    ("results/db.py", "def _reach_up():\n    from roarfast.report import write_report", "roarfast.results.db",
     "roarfast.report"),
    ("stats/intervals.py", "import roarfast.rundir.directory", "roarfast.stats.intervals", "roarfast.rundir.directory"),
    ("common/options.py", "import roarfast.stats", "roarfast.common.options", "roarfast.stats"),
    ("ops.py", "import roarfast.common.options", "roarfast.ops", "roarfast.common.options"),
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
    # every module of roarfast, dotted below it; a package placed whole covers its modules, a package by role
    # (stages/, rundir/, ...) is placed module by module
    modules = sorted(".".join(p.relative_to(package).with_suffix("").parts) for p in package.rglob("*.py")
                     if p.name != "__init__.py")
    def covered_by(module):
        return [name for name in placed if module == name or module.startswith(name + ".")]
    assert [m for m in modules if not covered_by(m)] == [], "place these in a layer of pyproject.toml's contract"
    assert [m for m in modules if len(covered_by(m)) > 1] == [], "each module in one layer"
    assert [name for name in placed if not any(covered_by(m) == [name] for m in modules)] == [], \
        "no layer naming a module that is not there"


def test_each_layer_reaching_up_breaks_the_layers_contract(tmp_path):
    assert len(VIOLATIONS) == len(layer_contract()["layers"])
    result = lint_imports(with_imports(tmp_path, [(module, statement) for module, statement, _, _ in VIOLATIONS]),
                          "layers")
    assert result.returncode != 0 and "0 kept, 1 broken" in result.stdout, result.stdout
    missed = [f"{importer} -> {imported}" for _, _, importer, imported in VIOLATIONS
              if f"- {importer} -> {imported} (l." not in result.stdout]
    assert missed == [], result.stdout


def test_the_layers_contract_alone_is_broken_by_one_reaching_import(tmp_path):
    result = lint_imports(with_imports(tmp_path, [("store/record.py", "import roarfast.stages.extract")]), "layers")
    assert result.returncode != 0 and "0 kept, 1 broken" in result.stdout, result.stdout
    assert "roarfast.store is not allowed to import roarfast.stages.extract" in result.stdout, result.stdout


def test_retrain_on_the_grid_breaks_its_contract(tmp_path):
    result = lint_imports(with_imports(tmp_path, [("stages/retrain.py", "from roarfast.planning.grid import make_plan")]),
                          "retrain-not-on-grid")
    assert result.returncode != 0 and "0 kept, 1 broken" in result.stdout, result.stdout


@pytest.mark.parametrize("module", ["planning/grid.py", "planning/preview.py", "planning/estimate.py"])
def test_the_grid_or_a_planner_on_the_extract_stage_breaks_its_contract(tmp_path, module):
    reach = "def _reach():\n    from roarfast.stages.extract import run_extract"  # inside a function counts as much
    result = lint_imports(with_imports(tmp_path, [(module, reach)]), "planners-not-on-extract")
    assert result.returncode != 0 and "0 kept, 1 broken" in result.stdout, result.stdout
