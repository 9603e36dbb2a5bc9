"""The layer rules (pyproject.toml's [tool.importlinter] contracts, ARCHITECTURE.md's layers) hold, name packages
(the top-level modules alone stand for themselves), cover every module of roarfast, and break when a module reaches
up: a copy of the package with a violating import in each layer fails the same check, naming each import. No
package imports a package that imports it, late imports included (tests/test_modules.py's import graph, by
package)."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_modules import circles, import_graph

pytest.importorskip("importlinter")
tomllib = pytest.importorskip("tomllib")

REPO = Path(__file__).resolve().parents[1]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")

#: one import per layer of the contract, each from a module of that layer into the layer above it (the top
#: layer: into the other side of it); the results database's is inside a function, which counts as much
VIOLATIONS = [
    ("study.py", "import roarfast.cli", "roarfast.study", "roarfast.cli"),
    ("orchestration/demo.py", "import roarfast.study", "roarfast.orchestration.demo", "roarfast.study"),
    ("planning/preview.py", "import roarfast.orchestration.sweep", "roarfast.planning.preview",
     "roarfast.orchestration.sweep"),
    ("stages/extract.py", "from roarfast.execution.registry import make_executor", "roarfast.stages.extract",
     "roarfast.execution.registry"),
    ("report/analysis.py", "import roarfast.stages.cells", "roarfast.report.analysis", "roarfast.stages.cells"),
    ("rundir/inventory.py", "import roarfast.results.frame", "roarfast.rundir.inventory", "roarfast.results.frame"),
    ("measurements/db.py", "def _reach_up():\n    from roarfast.rundir.directory import RunDir",
     "roarfast.measurements.db", "roarfast.rundir.directory"),
    ("records/ranks.py", "import roarfast.store.index", "roarfast.records.ranks", "roarfast.store.index"),
    ("train/masking.py", "from roarfast.store.record import RankRecord", "roarfast.train.masking",
     "roarfast.store.record"),
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


def placed() -> list:
    """The names the layers contract places, below roarfast."""
    return [name.strip() for layer in layer_contract()["layers"] for side in layer.split("|")
            for name in side.split(":")]


def test_the_layers_are_packages():
    package = REPO / "roarfast"
    # a package (a folder), or a module at the top of roarfast standing for itself: never a module inside a package
    assert [name for name in placed() if "." in name] == []
    assert [name for name in placed() if not (package / name / "__init__.py").is_file()
            and not (package / f"{name}.py").is_file()] == [], "no layer naming a package that is not there"


def test_every_module_is_in_one_layer():
    names = placed()
    package = REPO / "roarfast"
    modules = sorted(".".join(p.relative_to(package).with_suffix("").parts) for p in package.rglob("*.py")
                     if p.name != "__init__.py")
    def covered_by(module):
        return [name for name in names if module == name or module.startswith(name + ".")]
    assert [m for m in modules if not covered_by(m)] == [], "place these in a layer of pyproject.toml's contract"
    assert [m for m in modules if len(covered_by(m)) > 1] == [], "each module in one layer"
    assert len(names) == len(set(names)), "each package in one layer"


def package_graph(package=REPO / "roarfast") -> dict:
    """{package: {package it imports: 'module (line N) -> imported module'}} of roarfast's packages (a top-level
    module stands for itself), from the import graph of its modules: late imports and package inits included."""
    def owner(module: str) -> str:
        parts = module.split(".")
        return parts[1] if len(parts) > 1 else parts[0]

    graph = {}
    for module, imported in import_graph(package).items():
        edges = graph.setdefault(owner(module), {})
        for target, line in imported.items():
            if owner(target) != owner(module):
                edges.setdefault(owner(target), f"{module} (line {line}) -> {target}")
    return graph


def test_no_package_imports_a_package_that_imports_it():
    graph = package_graph()
    found = [" and ".join(sorted(c)) + ": " + "; ".join(graph[a][b] for a in sorted(c) for b in sorted(c)
                                                        if b in graph[a]) for c in circles(graph)]
    assert found == [], "packages importing each other (move what both need into the lower one):\n" + "\n".join(found)


def test_a_late_import_from_a_package_into_one_that_imports_it_is_found(tmp_path):
    parent = with_imports(tmp_path, [("measurements/db.py", "def _late():\n    from roarfast.rundir.directory import "
                                                            "RunDir")])
    graph = package_graph(parent / "roarfast")
    assert {"measurements", "rundir"} in circles(graph)
    assert graph["measurements"]["rundir"].startswith("roarfast.measurements.db (line ")


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
    assert "roarfast.store is not allowed to import roarfast.stages" in result.stdout, result.stdout
    assert "- roarfast.store.record -> roarfast.stages.extract (l." in result.stdout, result.stdout


def test_retrain_on_the_grid_breaks_its_contract(tmp_path):
    reach = ("orchestration/retrain.py", "from roarfast.planning.grid import make_plan")
    result = lint_imports(with_imports(tmp_path, [reach]), "retrain-not-on-grid")
    assert result.returncode != 0 and "0 kept, 1 broken" in result.stdout, result.stdout


@pytest.mark.parametrize("module", ["planning/grid.py", "planning/preview.py", "planning/estimate.py"])
def test_the_grid_or_a_planner_on_the_extract_stage_breaks_its_contract(tmp_path, module):
    reach = "def _reach():\n    from roarfast.stages.extract import run_extract"  # inside a function counts as much
    result = lint_imports(with_imports(tmp_path, [(module, reach)]), "planners-not-on-extract")
    assert result.returncode != 0 and "0 kept, 1 broken" in result.stdout, result.stdout
