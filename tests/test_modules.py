"""The modules of roarfast: no import circles, none longer than MAX_LINES (split a module by job), and imports
at the top: at most MAX_LATE_IMPORTS imports of roarfast modules inside functions, each under a comment saying
why (`# late: `, the library it would load and the light path it would weigh down: --help, the fill or --method
listing, a cell's worker; tests/test_cli.py, test_fills.py, test_methods_registry.py and test_chance.py show it).

An import edge is every `import` / `from ... import` statement naming a roarfast module, wherever it stands:
at module level, inside a function (imported late, it still ties the two modules), or under TYPE_CHECKING;
importing a submodule from outside its package also runs the package's `__init__`, an edge to it as well.
Names loaded by string (importlib.import_module, a resolver's lazy `package.module:attribute` targets) are
not edges: they are how a low module reaches an entry without depending on it.
"""

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "roarfast"
MAX_LINES = 500
#: imports of roarfast modules inside functions (issue 33: at most 90; 312 before the move, 43 after)
MAX_LATE_IMPORTS = 90
#: how the comment above a group of imports left inside a function begins
LATE = "# late: "


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
    found = [describe(graph, c) for c in circles(graph)]
    assert found == [], "import circles (move what both need into a lower module):\n" + "\n".join(found)



def test_no_module_is_longer_than_the_limit():
    sizes = {str(path.relative_to(REPO)): len(path.read_text().splitlines()) for path in modules().values()}
    over = [f"{path}: {lines} lines" for path, lines in sorted(sizes.items()) if lines > MAX_LINES]
    assert over == [], f"modules over {MAX_LINES} lines (split each by job): " + ", ".join(over)


def late_imports(path: Path) -> list:
    """(line, whether a comment says why) of every import of a roarfast module inside a function of `path`: a
    LATE comment on its line, or directly above the group of imports it belongs to."""
    text = path.read_text()
    lines = text.splitlines()
    tree = ast.parse(text, str(path))
    import_lines = {line for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom))
                    for line in range(node.lineno, node.end_lineno + 1)}
    found = {}
    for function in ast.walk(tree):
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for node in ast.walk(function):  # a nested function's imports are met twice: found once
            roarfast = isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith("roarfast")) \
                or isinstance(node, ast.Import) and any(a.name.startswith("roarfast") for a in node.names)
            if not roarfast:
                continue
            above = node.lineno - 1
            while above in import_lines or not lines[above - 1].strip():
                above -= 1
            found[node.lineno] = LATE in lines[node.end_lineno - 1] or lines[above - 1].strip().startswith(LATE)
    return sorted(found.items())


def test_imports_are_at_the_top_but_where_a_comment_says_why():
    late = {str(path.relative_to(REPO)): late_imports(path) for path in modules().values()}
    unexplained = [f"{path}:{line}" for path, found in late.items() for line, said in found if not said]
    assert unexplained == [], "imports inside functions without a comment saying why: " + ", ".join(unexplained)
    total = sum(map(len, late.values()))
    assert total <= MAX_LATE_IMPORTS, f"{total} imports of roarfast modules inside functions (at most " \
                                      f"{MAX_LATE_IMPORTS}): move them to the top of their modules"


def test_the_late_imports_are_counted_once_each_with_their_comments(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("from roarfast import errors\n\n\ndef f():\n    # late: loads torch\n    import torch\n\n"
                      "    from roarfast import ops\n    from roarfast.data import (\n        base)\n\n\n"
                      "def g():\n    def h():\n        from roarfast import stats  # late: loads scipy\n\n"
                      "    # why not\n    from roarfast import atomic  # noqa: F401\n")
    assert late_imports(module) == [(8, True), (9, True), (15, True), (18, False)]
