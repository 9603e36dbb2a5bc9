"""The identity of an estimator's code, recorded in its rank store beside its parameters, so that changed code
makes other ranks (roarfast.stages.extract compares the two):

- a built-in: roarfast's version (roarfast.methods.declaration.BUILTIN_CODE);
- an import path `package.module:function`: the sha256 of its source file (that file only);
- a Python object with no import path (a notebook's function, a lambda, a nested function, a partial, a
  callable instance, a bound method): a digest of what it runs and of every value it reads, so an edited one
  is another estimator (and, unless the user named it, has another name: roarfast.methods.plugins);
- a `captum:` class: captum's version and the class (the arguments passed are recorded with the parameters).

What an object's digest covers, each part digested by the same rules, recursively:

- a function of the user's own code: its bytecode, constants (nested functions' and comprehensions' code
  included) and the names it uses (not its file or line numbers: moving it leaves it the same), its defaults,
  its closure values, and each global it or its nested functions read. A global read only through attributes
  (`cfg.w`, `cfg.inner.v`, `mymod.W`) counts by the values at the ends of those paths, read now (a path that
  reaches a method, a property or a class attribute counts the object it is read from); one used otherwise
  (passed on, as in `helper(cfg)` or `getattr(cfg, "w")`, or called) counts whole. A builtin (`len`) counts
  by the name it uses;
- a partial: its function, arguments and keywords; a bound method: its function and its object;
- an object of a class of the user's own code, a SimpleNamespace or argparse Namespace, a dataclass instance,
  or an object whose class's `__call__` is Python code (an `nn.Module`): its class and all its attributes
  (`vars()` and `__slots__`);
- a class of the user's own code: its bases, every method written in it (properties, static and class methods
  included: `self.helper()` counts) and its class attributes (`self.SCALE` counts), not what Python adds
  (`__x__` and `_x_` names, ABC's cache) nor the methods a dataclass generates from its fields;
- a module of the user's own code: its attributes (not `__x__` ones);
- numbers, text, bytes, ranges, slices and containers of them exactly; tensors and arrays by dtype, shape and
  bytes; enums, torch dtypes and devices by name.

The user's own code is every module, class and function whose source lies outside Python's standard library,
site-packages and roarfast: `__main__` (a notebook, a script), a module beside it, an editable install. A
library counts by name only: its modules, classes and functions (`torch.nn.functional.relu`, `np.pi`,
`torch.nn.Conv2d`: another installed version, or a library's value changed at run time, is not seen; a
library decorator counts by the function it wraps, not its own arguments).

Not covered: what a function reads other than through its code, defaults, closure and globals (a file, an
environment variable, `sys.modules`, `globals()["w"]`), and state kept in C beneath a Python object (a user
class deriving from a C type). Any other value (an open file, a lock, a logger, a random generator, a
DataFrame: a library object with no Python `__call__`) cannot be told apart from an edited one, so an
estimator reading one is refused, naming it and what to do instead.
"""

import argparse
import dataclasses
import dis
import enum
import functools
import hashlib
import json
import os
import site
import sys
import sysconfig
import types
from pathlib import Path

from roarfast.errors import UserError
from roarfast.common.plugins import source_sha256

#: library objects digested by their attributes like the user's own: bags of settings
_SIMPLE = (types.SimpleNamespace, argparse.Namespace)
#: class attributes Python's machinery adds, not the user's settings
_MACHINERY = {"_abc_impl"}
#: what a class holds that is code of its own, described whatever its name
_CODE = (types.FunctionType, functools.partial, staticmethod, classmethod, property, functools.cached_property)


def file_identity(function) -> dict | None:
    """{"file_sha256": ...} of the source file defining `function`, or None when it has none on disk."""
    digest = source_sha256(function)
    return None if digest is None else {"file_sha256": digest}


def object_identity(obj, name: str) -> dict:
    """{"code_sha256": ...}: the digest of what `obj` (a function or a callable object) runs and reads; a
    UserError naming `name` and the value that cannot be digested."""
    try:
        # not unwrapped: a decorator's wrapper holds the wrapped function and the decorator's values in its closure
        described = _describe(obj, "the estimator", {})
    except _Undigestible as err:
        raise UserError(f"--method {name}: {err}, which cannot be told apart from an edited one, so a change "
                        f"in it would not make new ranks; hold plain values (numbers, text, tuples, tensors, or "
                        f"a SimpleNamespace or dataclass of them), pass it with --method-arg (Study: "
                        f"method_args=), or move the function into a module and name it package.module:function "
                        f"(known by its file's hash)") from None
    text = json.dumps(described, sort_keys=True, separators=(",", ":"))
    return {"code_sha256": hashlib.sha256(text.encode()).hexdigest()}


def captum_identity(cls) -> dict:
    """{"captum": its version, "class": the class's name}."""
    import captum

    return {"captum": captum.__version__, "class": cls.__name__}


class _Undigestible(Exception):
    pass


def _describe(value, where: str, seen: dict):
    """A JSON-able description of `value` that changes when what it holds changes. `seen`: id -> object of the
    functions, classes, modules and objects described so far (a cycle, or one reached twice, is named)."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, range) or value is Ellipsis:
        return [type(value).__name__, repr(value)]
    if isinstance(value, slice):
        return ["slice", _describe([value.start, value.stop, value.step], where, seen)]
    if isinstance(value, float):
        return ["float", value.hex()]
    if isinstance(value, complex):
        return ["complex", value.real.hex(), value.imag.hex()]
    if isinstance(value, (bytes, bytearray)):
        return ["bytes", bytes(value).hex()]
    if isinstance(value, (list, tuple)):
        return [type(value).__name__, [_describe(v, f"{where}[{i}]", seen) for i, v in enumerate(value)]]
    if isinstance(value, (set, frozenset)):
        items = [_describe(v, f"{where} item", seen) for v in value]
        return ["set", sorted(items, key=lambda item: json.dumps(item, sort_keys=True))]
    if isinstance(value, dict):
        items = [[_describe(k, f"{where} key", seen), _describe(v, f"{where}[{k!r}]", seen)] for k, v in value.items()]
        return ["dict", sorted(items, key=lambda item: json.dumps(item[0], sort_keys=True))]
    if isinstance(value, types.CodeType):
        return _code(value, where, seen)
    if isinstance(value, types.FunctionType):
        if not _library_file(value.__code__.co_filename):
            return _function(value, seen)
        # a library's decorator around a user's function (functools.wraps): the function it wraps counts
        wrapped = getattr(value, "__wrapped__", None)
        return ["function", value.__module__, value.__qualname__, None if wrapped is None else
                _describe(wrapped, where, seen)]
    if isinstance(value, functools.partial):
        return ["partial", _describe(value.func, where, seen), _describe(value.args, where, seen),
                _describe(value.keywords, where, seen)]
    if isinstance(value, types.MethodType):
        return ["method", _describe(value.__func__, where, seen), _describe(value.__self__, f"{where}'s object", seen)]
    if isinstance(value, (staticmethod, classmethod)):
        return [type(value).__name__, _describe(value.__func__, where, seen)]
    if isinstance(value, property):
        return ["property", *(_describe(f, where, seen) for f in (value.fget, value.fset, value.fdel))]
    if isinstance(value, functools.cached_property):
        return ["cached_property", _describe(value.func, where, seen)]
    if isinstance(value, types.ModuleType):
        return ["module", value.__name__] if _library_module(value) else _namespace(value, where, seen)
    if isinstance(value, type):
        return ["class", value.__module__, value.__qualname__] if _library_name(value.__module__) else \
            _class(value, where, seen)
    if isinstance(value, (types.BuiltinFunctionType, types.BuiltinMethodType)):
        return ["builtin", getattr(value, "__module__", None), value.__qualname__]
    if isinstance(value, enum.Enum):
        return ["enum", type(value).__module__, type(value).__qualname__, value.name]
    array = _array(value)
    if array is not None:
        return array
    if type(value).__module__ == "torch" and type(value).__name__ in ("dtype", "device"):
        return [type(value).__name__, str(value)]
    if _simple(value):
        return _namespace(value, where, seen)
    raise _Undigestible(f"{where} is a {type(value).__module__}.{type(value).__qualname__}")


def _code(code: types.CodeType, where: str, seen: dict) -> list:
    """Bytecode, constants (nested code objects digested the same way), names and the shape of the signature;
    not the file name or the line numbers, so moving a function leaves it the same estimator."""
    return ["code", code.co_code.hex(), [_describe(c, f"{where}'s constants", seen) for c in code.co_consts],
            list(code.co_names), code.co_argcount, code.co_posonlyargcount, code.co_kwonlyargcount, code.co_flags]


def _function(function: types.FunctionType, seen: dict) -> list:
    if id(function) in seen:  # a recursive function, or helpers calling each other
        return ["function seen", function.__module__, function.__qualname__]
    seen[id(function)] = function
    name = function.__qualname__
    closure = {}
    for var, cell in zip(function.__code__.co_freevars, function.__closure__ or ()):
        try:
            closure[var] = _describe(cell.cell_contents, f"{name}'s closure value {var!r}", seen)
        except ValueError:  # an empty cell
            closure[var] = ["empty"]
    return ["function", _code(function.__code__, name, seen),
            _describe(function.__defaults__, f"{name}'s defaults", seen),
            _describe(function.__kwdefaults__, f"{name}'s keyword defaults", seen), closure,
            _globals(function, seen)]


def _globals(function: types.FunctionType, seen: dict) -> dict:
    """The globals `function` (and the functions it defines) reads, each described whole, or by the values at
    the ends of the attribute paths it reads them through when it uses them only so (`cfg.w`, `mymod.W`)."""
    out = {}
    for name, paths in sorted(_reads(function.__code__).items()):
        if name not in function.__globals__:  # a builtin (len, print): counted by the name it uses
            continue
        value, where = function.__globals__[name], f"{function.__qualname__}'s global {name}"
        if () in paths:
            out[name] = _describe(value, where, seen)
        else:
            out[name] = ["read", {".".join(path): _follow(value, path, where, seen) for path in sorted(paths)}]
    return out


def _reads(code: types.CodeType) -> dict:
    """Global name -> the attribute paths `code` (nested code included) reads through it; () for a use of the
    global itself (called, passed on, assigned)."""
    reads = {}
    instructions = list(dis.get_instructions(code))
    for i, instruction in enumerate(instructions):
        if instruction.opname not in ("LOAD_GLOBAL", "LOAD_NAME"):
            continue
        path = []
        for after in instructions[i + 1:]:
            if after.opname not in ("LOAD_ATTR", "LOAD_METHOD"):
                break
            path.append(after.argval)
        reads.setdefault(instruction.argval, set()).add(tuple(path))
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            for name, paths in _reads(const).items():
                reads.setdefault(name, set()).update(paths)
    return reads


def _follow(value, path: tuple, where: str, seen: dict):
    """The description of what `path` (attribute names) reaches from `value`: attributes held in a user
    module's or a simple object's namespace are followed; anything else (a method, a class attribute, a
    property, a library module) describes the object it is read from, whole."""
    attributes = _attributes(value)
    if path and attributes is not None and path[0] in attributes:
        return _follow(attributes[path[0]], path[1:], f"{where}.{path[0]}", seen)
    return _describe(value, where, seen)


def _attributes(value) -> dict | None:
    """What `value` holds by attribute name, when it is a user module, a user class or a simple object."""
    if isinstance(value, types.ModuleType):
        return None if _library_module(value) else vars(value)
    if isinstance(value, type):
        return None if _library_name(value.__module__) else dict(vars(value))
    return _state(value) if _simple(value) else None


def _simple(value) -> bool:
    """Whether `value` is digested by its class and attributes (see the module's docstring)."""
    cls = type(value)
    return (isinstance(value, _SIMPLE) or dataclasses.is_dataclass(value) or not _library_name(cls.__module__)
            or isinstance(getattr(cls, "__call__", None), types.FunctionType))


def _state(value) -> dict:
    """An object's attributes: vars() and the __slots__ it has set (read through their descriptors, which run no
    code of the user's)."""
    state = dict(vars(value)) if hasattr(value, "__dict__") else {}
    for cls in type(value).__mro__:
        slots = getattr(cls, "__slots__", ())
        for slot in (slots,) if isinstance(slots, str) else slots:
            if slot not in ("__dict__", "__weakref__") and hasattr(value, slot):
                state[slot] = getattr(value, slot)
    return state


def _namespace(value, where: str, seen: dict) -> list:
    """A user module (its attributes), or a simple object (its class and attributes)."""
    module = isinstance(value, types.ModuleType)
    kind, name = ("module", value.__name__) if module else ("object", type(value).__qualname__)
    if id(value) in seen:
        return [f"{kind} seen", name]
    seen[id(value)] = value
    attributes = {k: v for k, v in vars(value).items() if not _dunder(k)} if module else _state(value)
    described = {k: _describe(v, f"{where}.{k}", seen) for k, v in attributes.items()}
    return [kind, name if module else _describe(type(value), f"{where}'s class", seen), described]


def _class(cls: type, where: str, seen: dict) -> list:
    """A user class: its bases, the methods written in it and its class attributes (see the module's docstring)."""
    if id(cls) in seen:
        return ["class seen", cls.__module__, cls.__qualname__]
    seen[id(cls)] = cls
    members = {}
    for name, member in vars(cls).items():
        code = isinstance(member, _CODE)
        if name in _MACHINERY or (not code and (_dunder(name) or _descriptor(member))) or _generated(cls, member):
            continue
        members[name] = _describe(member, f"class {cls.__qualname__}'s attribute {name}", seen)
    bases = [_describe(base, f"class {cls.__qualname__}'s base", seen) for base in cls.__bases__]
    return ["class", cls.__module__, cls.__qualname__, bases, members]


def _dunder(name: str) -> bool:
    """`__x__` and `_x_` (enum's) names: Python's, not the user's."""
    return len(name) > 2 and name.startswith("_") and name.endswith("_")


def _descriptor(member) -> bool:
    """A library's attribute accessor in a class (a slot's, a namedtuple field's): the state it reads is the
    instance's."""
    return hasattr(type(member), "__get__") and _library_name(type(member).__module__)


def _generated(cls: type, member) -> bool:
    """A method dataclasses wrote for `cls` from its fields (compiled from text, no file)."""
    return (dataclasses.is_dataclass(cls) and isinstance(member, types.FunctionType)
            and member.__code__.co_filename == "<string>")


def _library_module(module: types.ModuleType) -> bool:
    """Whether `module` is a library's (its file in the standard library, site-packages or roarfast; a module
    without a file: one of the standard library's)."""
    if module.__name__ == "__main__":
        return False
    file = getattr(module, "__file__", None)
    return _library_file(file) if file else module.__name__.split(".")[0] in _stdlib_names()


def _library_name(name: str | None) -> bool:
    """Whether the module named `name` (a class's __module__) is a library's."""
    if not name or name == "__main__":
        return False
    module = sys.modules.get(name)
    return _library_module(module) if module is not None else name.split(".")[0] in _stdlib_names()


@functools.cache
def _library_file(path: str) -> bool:
    """Whether the source file `path` lies in the standard library, site-packages or roarfast."""
    if not os.path.isabs(path):  # "<string>", "<stdin>": code typed or generated in this process
        return False
    real = Path(os.path.realpath(path))
    return any(real.is_relative_to(root) for root in _library_roots())


@functools.cache
def _library_roots() -> tuple:
    """The folders of library code: the standard library's, site-packages (the user's too) and roarfast's."""
    paths = sysconfig.get_paths()
    roots = {paths[key] for key in ("stdlib", "platstdlib", "purelib", "platlib") if key in paths}
    roots.update(site.getsitepackages() if hasattr(site, "getsitepackages") else ())
    roots.add(site.getusersitepackages())
    roots.add(str(Path(__file__).resolve().parents[1]))  # roarfast's own code counts by its version
    return tuple(Path(os.path.realpath(root)) for root in roots)


@functools.cache
def _stdlib_names() -> frozenset:
    return frozenset(sys.stdlib_module_names) | frozenset(sys.builtin_module_names)


def _array(value):
    """A torch tensor or a numpy array by dtype, shape and the sha256 of its bytes; None for anything else."""
    kind = type(value).__module__.split(".")[0]
    if kind == "torch" and hasattr(value, "detach"):
        # late: loads torch, and --help imports this module
        import torch

        flat = value.detach().cpu().contiguous().flatten()
        data = flat.view(torch.uint8).numpy().tobytes() if flat.numel() else b""
        return ["tensor", str(value.dtype), list(value.shape), hashlib.sha256(data).hexdigest()]
    if kind == "numpy" and hasattr(value, "tobytes") and hasattr(value, "dtype"):
        digest = hashlib.sha256(value.tobytes()).hexdigest()
        return ["array", str(value.dtype), list(getattr(value, "shape", ())), digest]
    return None
