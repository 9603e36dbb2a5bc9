"""The modules of roarfast: no import circles, and none longer than MAX_LINES (split a module by job).

An import edge is every `import` / `from ... import` statement naming a roarfast module, wherever it stands:
at module level, inside a function (imported late, it still ties the two modules), or under TYPE_CHECKING;
importing a submodule from outside its package also runs the package's `__init__`, an edge to it as well.
Names loaded by string (importlib.import_module, a resolver's lazy `package.module:attribute` targets) are
not edges: they are how a low module reaches an entry without depending on it.
"""

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "roarfast"
MAX_LINES = 500

#: circles that other work of this round removes; each test below turns into a failure once its circle is
#: gone (strict xfail), and then its entry goes
KNOWN_CIRCLES = {
    "models/__init__ <-> models/spec (removed by the resolvers' work)": {"roarfast.models", "roarfast.models.spec"},
}


def modules(package: Path = PACKAGE) -> dict:
    """{dotted name: path} of every Python module of `package` (a package by its __init__.py)."""
    found = {}
    for path in sorted(package.rglob("*.py")):
        parts = path.relative_to(package.parent).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def imports(name: str, path: Path, known) -> dict:
    """{imported module: line of its first import} for the module `name` at `path`."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]

    def deepest(dotted: str) -> str | None:
        while dotted and dotted not in known:
            dotted = dotted.rpartition(".")[0]
        return dotted or None

    edges = {}
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [deepest(alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level else ""
            module = ".".join(part for part in (base, node.module) if part)
            # `from package import submodule` imports the submodule; `from module import name`, the module
            targets = [deepest(f"{module}.{alias.name}") if f"{module}.{alias.name}" in known else deepest(module)
                       for alias in node.names]
        else:
            continue
        for target in filter(None, targets):
            if target != name:
                edges.setdefault(target, node.lineno)
            # the packages on the way, whose __init__ runs first, unless it holds the importer (already running)
            chain = target.split(".")
            for depth in range(1, len(chain)):
                step = ".".join(chain[:depth])
                if step in known and step != name and not name.startswith(step + "."):
                    edges.setdefault(step, node.lineno)
    return edges


def import_graph(package: Path = PACKAGE) -> dict:
    known = modules(package)
    return {name: imports(name, path, known) for name, path in known.items()}


def circles(graph: dict) -> list[set]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iteratively)."""
    index, low, stack, on_stack, found, counter = {}, {}, [], set(), [], [0]
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(graph[root]))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, successors = work[-1]
            for successor in successors:
                if successor not in index:
                    index[successor] = low[successor] = counter[0]
                    counter[0] += 1
                    stack.append(successor)
                    on_stack.add(successor)
                    work.append((successor, iter(graph[successor])))
                    break
                if successor in on_stack:
                    low[node] = min(low[node], index[successor])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.add(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(component)
    return found


def describe(graph: dict, component: set) -> str:
    """One shortest circle through the component's first module, each step with the line that imports."""
    start = min(component)
    paths = {start: [start]}
    queue = [start]
    while queue:
        node = queue.pop(0)
        for successor in sorted(graph[node]):
            if successor == start:
                steps = paths[node] + [start]
                return " -> ".join(f"{a} (line {graph[a][b]})" for a, b in zip(steps, steps[1:])) + f" -> {start}"
            if successor in component and successor not in paths:
                paths[successor] = paths[node] + [successor]
                queue.append(successor)
    raise AssertionError(f"no circle through {start}")


def test_the_graph_sees_late_imports_package_inits_and_circles(tmp_path):
    files = {
        "pkg/__init__.py": "",
        "pkg/a/__init__.py": "from pkg.a.x import y\n",
        "pkg/a/x.py": "y = 1\n\n\ndef late():\n    from pkg import c\n",
        "pkg/b.py": "from pkg.a.x import y\n",
        "pkg/c.py": "import pkg.b\n",
        "pkg/d.py": "from pkg.a import x\n",
        "pkg/e.py": "from pkg.a import y\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    graph = import_graph(tmp_path / "pkg")
    assert graph["pkg.a"] == {"pkg.a.x": 1}  # a package importing its own submodule
    assert graph["pkg.b"] == {"pkg.a": 1, "pkg.a.x": 1}  # from outside, pkg/a/__init__ runs first
    assert graph["pkg.a.x"] == {"pkg.c": 5}  # inside a function
    assert graph["pkg.d"] == {"pkg.a": 1, "pkg.a.x": 1} and graph["pkg.e"] == {"pkg.a": 1}
    assert circles(graph) == [{"pkg.a", "pkg.a.x", "pkg.b", "pkg.c"}]
    assert describe(graph, circles(graph)[0]) == ("pkg.a (line 1) -> pkg.a.x (line 5) -> pkg.c (line 1) -> pkg.b "
                                                  "(line 1) -> pkg.a")


def test_no_import_circles():
    graph = import_graph()
    unknown = [describe(graph, c) for c in circles(graph) if c not in KNOWN_CIRCLES.values()]
    assert unknown == [], "import circles (move what both need into a lower module):\n" + "\n".join(unknown)


@pytest.mark.parametrize("circle", [pytest.param(members, id=label, marks=pytest.mark.xfail(
    strict=True, reason=f"{label}: its entry in KNOWN_CIRCLES goes when this passes"))
    for label, members in KNOWN_CIRCLES.items()])
def test_a_known_circle_is_gone(circle):
    assert circle not in circles(import_graph())


def test_no_module_is_longer_than_the_limit():
    sizes = {str(path.relative_to(REPO)): len(path.read_text().splitlines()) for path in modules().values()}
    over = [f"{path}: {lines} lines" for path, lines in sorted(sizes.items()) if lines > MAX_LINES]
    assert over == [], f"modules over {MAX_LINES} lines (split each by job): " + ", ".join(over)
