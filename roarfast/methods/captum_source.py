"""The installed Captum's attribution classes outlined from its source files, without importing captum: importing
captum.attr loads torch and matplotlib (~6 s of CPU, 20 s on a loaded machine), which `roarfast list` does not
need. The names captum.attr's `__init__.py` imports, each class found through its module's imports, its bases in
Python's method resolution order (C3), and the `__init__` and `attribute()` that order gives an instance (the last
definition in a class body, `@overload` stubs skipped; a decorator is read through, as inspect.signature reads a
wrapped function), as the captum_outline.Outline the adapter makes from the imported class. tests/test_list.py
checks that both agree on every class of the installed captum.
"""

import ast
import importlib.util
from functools import cache
from pathlib import Path

from roarfast.methods.captum_outline import BASES, Outline

#: captum.attr's module: its __init__ names the classes --method takes
ATTR = "captum.attr"
#: the named parameters of object.__init__, which a class calls where no captum class defines one
OBJECT_INIT = (("self", False),)


class Unreadable(Exception):
    """Captum's source says something this reader does not follow (a method assigned rather than defined, a
    class it cannot find): the caller imports captum instead."""


def source_outlines() -> list[Outline] | None:
    """The Outline of every class captum.attr's __init__ imports, by name; None where captum is not installed or
    its source cannot be read this way (Unreadable)."""
    spec = importlib.util.find_spec("captum")  # a top-level name: found without importing it
    if spec is None or not spec.submodule_search_locations:
        return None
    reader = _Reader(Path(list(spec.submodule_search_locations)[0]))
    try:
        names = set(reader.imports(ATTR)) | set(reader.classes(ATTR))
        found = [(name, reader.resolve(ATTR, name)) for name in sorted(names)]
        return [reader.outline(name, key) for name, key in found if key is not None]
    except (Unreadable, OSError, SyntaxError):
        return None


class _Reader:
    """Captum's modules parsed once each, from the package folder `root`."""

    def __init__(self, root: Path):
        self.root = root
        # each read once per reader (a class's order is asked for by every class that extends it)
        self.tree, self.imports, self.classes = cache(self._tree), cache(self._imports), cache(self._classes)
        self.bases, self.mro = cache(self._bases), cache(self._mro)

    def _tree(self, module: str) -> ast.Module:
        parts = module.split(".")[1:]
        path = self.root.joinpath(*parts)
        file = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
        return ast.parse(file.read_text(encoding="utf-8"))

    def _imports(self, module: str) -> dict:
        """{name bound at the module's top level by `from X import Y [as Z]`: (X, Y)}, relative imports made
        absolute; those under `try:` / `if:` too."""
        out, package = {}, module if self._is_package(module) else module.rpartition(".")[0]
        for node in _top_level(self.tree(module).body):
            if isinstance(node, ast.ImportFrom):
                source = node.module or ""
                if node.level:
                    base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                    source = f"{base}.{source}" if source else base
                for alias in node.names:
                    out[alias.asname or alias.name] = (source, alias.name)
        return out

    def _is_package(self, module: str) -> bool:
        return self.root.joinpath(*module.split(".")[1:]).is_dir()

    def _classes(self, module: str) -> dict:
        return {node.name: node for node in _top_level(self.tree(module).body) if isinstance(node, ast.ClassDef)}

    def resolve(self, module: str, name: str):
        """(module, class name) where the class `name` seen from `module` is defined, or None where it is no
        class of captum (a function, a module, another package's class)."""
        for _ in range(20):  # re-exports chain through a few __init__ files at most
            if name in self.classes(module):
                return module, name
            source = self.imports(module).get(name)
            if source is None or not (source[0] == "captum" or source[0].startswith("captum.")):
                return None
            module, name = source
            if self._is_module(f"{module}.{name}"):
                return None
        raise Unreadable(f"{module}.{name}")

    def _is_module(self, module: str) -> bool:
        path = self.root.joinpath(*module.split(".")[1:])
        return path.is_dir() or path.with_suffix(".py").is_file()

    def _bases(self, key) -> tuple:
        """The captum classes `key` extends, in order (other packages' classes left out: typing's Generic, abc's
        ABC, torch's Module; abstract() reads ABC from the class itself)."""
        module, name = key
        node = self.classes(module)[name]
        out = []
        for base in node.bases:
            base = base.value if isinstance(base, ast.Subscript) else base  # Generic[...]
            if isinstance(base, ast.Name):
                found = self.resolve(module, base.id)
                if found is not None:
                    out.append(found)
        return tuple(out)

    def _mro(self, key) -> tuple:
        """C3, as Python orders a class's bases."""
        sequences = [list(self.mro(b)) for b in self.bases(key)] + [list(self.bases(key))]
        order = [key]
        while any(sequences):
            sequences = [s for s in sequences if s]
            head = next((s[0] for s in sequences if not any(s[0] in t[1:] for t in sequences)), None)
            if head is None:
                raise Unreadable(f"no method resolution order for {key}")
            order.append(head)
            sequences = [s[1:] if s[0] == head else s for s in sequences]
        return tuple(order)

    def method(self, key, name: str):
        """The FunctionDef of `name` an instance of `key` calls (the first class in its order that defines it),
        None where none does; Unreadable where a class binds it otherwise."""
        for module, cls in self.mro(key):
            body = self.classes(module)[cls].body
            defs = [n for n in body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == name
                    and not any(_named(d) == "overload" for d in n.decorator_list)]
            if defs:
                return defs[-1]
            if any(isinstance(n, ast.Assign) and any(getattr(t, "id", None) == name for t in n.targets)
                   or isinstance(n, ast.AnnAssign) and n.value is not None and getattr(n.target, "id", None) == name
                   for n in body):
                raise Unreadable(f"{cls}.{name} is assigned")
        return None

    def abstract(self, key) -> bool:
        """Whether `key` is an abstract class: abc's metaclass and a method whose first definition in its order
        is an @abstractmethod."""
        order = self.mro(key)
        abc = any(_named(b) == "ABC" for m, c in order for b in self.classes(m)[c].bases) or any(
            k.arg == "metaclass" and _named(k.value) == "ABCMeta" for m, c in order for k in self.classes(m)[c].keywords)
        if not abc:
            return False
        names = {n.name for m, c in order for n in self.classes(m)[c].body if isinstance(n, ast.FunctionDef)}
        return any(any(_named(d) == "abstractmethod" for d in self.method(key, n).decorator_list) for n in names)

    def outline(self, name: str, key) -> Outline:
        node = self.classes(key[0])[key[1]]
        bases = {b: self.resolve(ATTR, b) for b in BASES}
        attribute = self.method(key, "attribute")
        init = self.method(key, "__init__")
        return Outline(name, ast.get_docstring(node) or "", OBJECT_INIT if init is None else _parameters(init.args),
                       None if attribute is None else _parameters(attribute.args),
                       frozenset(b for b, k in bases.items() if k is not None and k in self.mro(key)),
                       self.abstract(key))


def _top_level(body):
    """The statements of a module's top level, those inside `try:` and `if:` blocks included."""
    for node in body:
        if isinstance(node, ast.Try):
            yield from _top_level(node.body + node.orelse + [n for h in node.handlers for n in h.body]
                                  + node.finalbody)
        elif isinstance(node, ast.If):
            yield from _top_level(node.body + node.orelse)
        else:
            yield node


def _named(node) -> str | None:
    """The name a decorator or base expression ends with: `abc.ABC` -> ABC, `log_usage(...)` -> log_usage."""
    node = node.func if isinstance(node, ast.Call) else node
    return node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None


def _parameters(args: ast.arguments) -> tuple:
    """((name, has a default)) of a signature's named parameters, as inspect.signature orders them."""
    positional = args.posonlyargs + args.args
    defaults = [False] * (len(positional) - len(args.defaults)) + [True] * len(args.defaults)
    return (tuple((a.arg, d) for a, d in zip(positional, defaults))
            + tuple((a.arg, d is not None) for a, d in zip(args.kwonlyargs, args.kw_defaults)))
