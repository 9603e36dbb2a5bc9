"""The identity of an estimator's code, recorded in its rank store beside its parameters, so that changed code
makes other ranks (roarfast.extract compares the two):

- a built-in: roarfast's version (roarfast.methods.declaration.BUILTIN_CODE);
- an import path `package.module:function`: the sha256 of its source file;
- a Python object with no import path (a notebook's function): a digest of what it runs, so an edited
  notebook function is another estimator: its bytecode, constants (nested functions' code included) and
  the names it uses, its defaults, the values of its closure cells, and the globals it reads that are plain
  values, tensors or functions of its own module (a notebook's helpers), each digested the same way;
- a `captum:` class: captum's version and the class (the arguments passed are recorded with the parameters).

Values are digested by what they hold: numbers, text, bytes and containers of them exactly, tensors and arrays
by dtype, shape and bytes, modules and classes by name. Any other value (an open file, a model) cannot be told
apart from an edited one, so an estimator holding one is refused with what to do instead.
"""

import enum
import functools
import hashlib
import json
import types

from roarfast.errors import UserError
from roarfast.plugins import source_sha256


def file_identity(function) -> dict | None:
    """{"file_sha256": ...} of the source file defining `function`, or None when it has none on disk."""
    digest = source_sha256(function)
    return None if digest is None else {"file_sha256": digest}


def object_identity(obj, name: str) -> dict:
    """{"code_sha256": ...}: the digest of what `obj` (a function or a callable object) runs; a UserError naming
    `name` and the value that cannot be digested."""
    try:
        # not unwrapped: a decorator's wrapper holds the wrapped function and the decorator's values in its closure
        described = _describe(obj, "the estimator", set())
    except _Undigestible as err:
        raise UserError(f"--method {name}: {err}, which cannot be told apart from an edited one, so a change "
                        f"in it would not make new ranks; hold plain values (numbers, text, tuples, tensors) or "
                        f"pass it with --method-arg (Study: method_args=)") from None
    text = json.dumps(described, sort_keys=True, separators=(",", ":"))
    return {"code_sha256": hashlib.sha256(text.encode()).hexdigest()}


def captum_identity(cls) -> dict:
    """{"captum": its version, "class": the class's name}."""
    import captum

    return {"captum": captum.__version__, "class": cls.__name__}


class _Undigestible(Exception):
    pass


def _describe(value, where: str, seen: set):
    """A JSON-able description of `value` that changes when what it holds changes."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
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
        return _function(value, where, seen)
    if isinstance(value, functools.partial):
        return ["partial", _describe(value.func, where, seen), _describe(value.args, where, seen),
                _describe(value.keywords, where, seen)]
    if isinstance(value, types.MethodType):
        return ["method", _describe(value.__func__, where, seen), _describe(value.__self__, f"{where}'s object", seen)]
    if isinstance(value, types.ModuleType):
        return ["module", value.__name__]
    if isinstance(value, type):
        return ["class", value.__module__, value.__qualname__]
    if isinstance(value, (types.BuiltinFunctionType, types.BuiltinMethodType)):
        return ["builtin", getattr(value, "__module__", None), value.__qualname__]
    if isinstance(value, enum.Enum):
        return ["enum", type(value).__module__, type(value).__qualname__, value.name]
    array = _array(value)
    if array is not None:
        return array
    if type(value).__module__ == "torch" and type(value).__name__ in ("dtype", "device"):
        return [type(value).__name__, str(value)]
    call = getattr(type(value), "__call__", None)
    if isinstance(call, types.FunctionType):  # an object of a class with a __call__ written in Python
        state = vars(value) if hasattr(value, "__dict__") else {}
        return ["callable", _describe(call, where, seen), _describe(state, f"{where}'s attributes", seen)]
    raise _Undigestible(f"{where} is a {type(value).__module__}.{type(value).__qualname__}")


def _code(code: types.CodeType, where: str, seen: set) -> list:
    """Bytecode, constants (nested code objects digested the same way), names and the shape of the signature;
    not the file name or the line numbers, so moving a function leaves it the same estimator."""
    return ["code", code.co_code.hex(), [_describe(c, f"{where}'s constants", seen) for c in code.co_consts],
            list(code.co_names), code.co_argcount, code.co_posonlyargcount, code.co_kwonlyargcount, code.co_flags]


def _function(function: types.FunctionType, where: str, seen: set) -> list:
    if id(function) in seen:  # a recursive function, or helpers calling each other
        return ["function seen", function.__module__, function.__qualname__]
    seen.add(id(function))
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


def _globals(function: types.FunctionType, seen: set) -> dict:
    """The globals `function` reads that are plain values, tensors or arrays, or functions of its own module (a
    notebook's helper functions and constants); modules, classes and other objects count by the name it uses
    (co_names)."""
    out = {}
    for name in sorted(_names(function.__code__)):
        if name not in function.__globals__:
            continue
        value = function.__globals__[name]
        own_function = isinstance(value, types.FunctionType) and value.__module__ == function.__module__
        if own_function or _plain(value) or _array(value) is not None:
            out[name] = _describe(value, f"global {name!r} of {function.__qualname__}", seen)
    return out


def _names(code: types.CodeType) -> set:
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _names(const)
    return names


def _plain(value) -> bool:
    if value is None or isinstance(value, (bool, int, float, complex, str, bytes)):
        return True
    if isinstance(value, (list, tuple, set, frozenset)):
        return all(_plain(v) for v in value)
    if isinstance(value, dict):
        return all(_plain(k) and _plain(v) for k, v in value.items())
    return False


def _array(value):
    """A torch tensor or a numpy array by dtype, shape and the sha256 of its bytes; None for anything else."""
    kind = type(value).__module__.split(".")[0]
    if kind == "torch" and hasattr(value, "detach"):
        import torch

        flat = value.detach().cpu().contiguous().flatten()
        data = flat.view(torch.uint8).numpy().tobytes() if flat.numel() else b""
        return ["tensor", str(value.dtype), list(value.shape), hashlib.sha256(data).hexdigest()]
    if kind == "numpy" and hasattr(value, "tobytes") and hasattr(value, "dtype"):
        digest = hashlib.sha256(value.tobytes()).hexdigest()
        return ["array", str(value.dtype), list(getattr(value, "shape", ())), digest]
    return None
