"""The plug-in grammar shared by models, datasets and estimators (README, "Your model and data"): a
command-line spec is a built-in name, `scheme:<name>` (timm:, torchvision:, captum:) or an import path
`package.module:attribute`; Study takes Python objects as well. Each kind's resolver (roarfast.common.resolver:
roarfast.models.MODELS, roarfast.data.DATASETS, the estimators') decides what its names and schemes mean;
this module imports what an import path names, says which source file made an object, and names objects
that have no import path.

A run directory's records (meta.json's model, dataset.json's name, a rank store's method) are names, never
code to run: opening a run directory must be as safe as opening a CSV file. A record may name a built-in, a
scheme's entry (a model timm lists, a dataset class of torchvision.datasets, an attribution class of
captum.attr: checked against the library's own list before anything is called) or an object this process
holds; an import path it names is imported only inside `user_named`, where the user named that path again
(a flag, a Study argument) or trusts the run directory (--trust-run-dir; Study(trust_run_dir=True)):
`check_recorded` refuses it otherwise, in one line saying both remedies.

Light on purpose (no torch): the CLI builds its help from the resolvers.
"""

import functools
import importlib
import inspect
import os
import re
import sys
from contextlib import contextmanager
from pathlib import Path

from roarfast.errors import UserError
from roarfast.common.fingerprint import sha256_file

#: what a run directory records for a model or dataset that came as a Python object with no import path
#: (a notebook's class, an nn.Module instance, a pair of tensors): the command line cannot rebuild it
OBJECT_PREFIX = "object:"
#: the characters of an object's digest in its name (object:partial.f-3f2a9c1b): short, and readable
DIGEST_CHARS = 8
#: a name the user gives an object (Study(methods={name: object})): a directory's name, never . or ..
_GIVEN_NAME = re.compile(r"^[A-Za-z0-9_][\w.-]*$", re.ASCII)
#: `package.module:attribute` (the attribute may be dotted: `module:Class.factory`)
_IMPORT_PATH = re.compile(r"^[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*:[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*$")


#: what the objects named in this process (object_name) are shown as (object_title), by the name recorded
_TITLES: dict[str, str] = {}

#: the opt-in flag that lets a run directory's records name code
TRUST_FLAG = "--trust-run-dir"
#: the scopes open now (user_named): each the import paths the user named and the run directory they trust
_SCOPES: list[tuple[set, Path | None]] = []


def is_import_path(spec) -> bool:
    """Whether `spec` reads `package.module:attribute`."""
    return isinstance(spec, str) and bool(_IMPORT_PATH.match(spec.strip()))


def import_object(spec: str, flag: str):
    """The object an import path `package.module:attribute` names, imported from the working directory or
    PYTHONPATH; a UserError naming `flag` and the remedy when the module does not import or lacks it."""
    spec = spec.strip()
    if not is_import_path(spec):
        raise UserError(f"{flag} {spec}: expected package.module:attribute")
    module_name, _, attribute = spec.partition(":")
    # `python -m` puts the working directory on the path, the `roarfast` console script does not
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.append(os.getcwd())
    try:
        obj = importlib.import_module(module_name)
    except ModuleNotFoundError as err:
        if err.name is not None and module_name.startswith(err.name):
            raise UserError(f"{flag} {spec}: no module named {err.name!r} (it is imported from the working "
                            f"directory or PYTHONPATH)") from None
        raise UserError(f"{flag} {spec}: importing {module_name} failed: {describe_error(err)}") from None
    except Exception as err:  # noqa: BLE001  (the user's module: any failure is theirs to fix)
        raise UserError(f"{flag} {spec}: importing {module_name} failed: {describe_error(err)}") from None
    for part in attribute.split("."):
        if not hasattr(obj, part):
            raise UserError(f"{flag} {spec}: {module_name} has no attribute {attribute!r}")
        obj = getattr(obj, part)
    return obj


@contextmanager
def user_named(specs=(), trusted_run_dir=None):
    """While the body runs, a run directory's record may name the import paths among `specs` (what the user
    named: flags, Study arguments; other strings are ignored), and any at all when it lies in
    `trusted_run_dir` (the user's opt-in). Scopes nest; a command or a Study call opens one."""
    named = {spec.strip() for spec in specs if is_import_path(spec)}
    scope = (named, None if trusted_run_dir is None else Path(trusted_run_dir).resolve())
    _SCOPES.append(scope)
    try:
        yield
    finally:
        _SCOPES.remove(scope)


def named_imports() -> list[str]:
    """The import paths the open scopes let records name (those trusted so far included): what a worker
    process, which opens the run directory again, must be told (`user_named(named_imports())`)."""
    return sorted(set().union(*(named for named, _ in _SCOPES)))


def check_recorded(spec: str, flag: str, record) -> None:
    """Refuses (UserError, one line) the import path `spec` read from the run-directory file `record` unless an
    open scope names it or trusts the run directory holding `record`; a trusted one counts as named from then
    on in that scope (named_imports)."""
    path = Path(record).resolve()
    for named, trusted in _SCOPES:
        if spec in named:
            return
        if trusted is not None and path.is_relative_to(trusted):
            named.add(spec)
            return
    raise UserError(f"{record} names {flag} {spec}, code roarfast would import, and opening a run directory runs "
                    f"nothing it names: name it again ({flag} {spec}) or pass {TRUST_FLAG} to import it")


def import_path_of(obj) -> str | None:
    """`module:qualname` when importing it gives `obj` back (a module-level function or class outside
    __main__), else None."""
    module = getattr(obj, "__module__", None)
    qualname = getattr(obj, "__qualname__", None)
    if not module or not qualname or module == "__main__" or "<" in qualname:
        return None
    spec = f"{module}:{qualname}"
    if not is_import_path(spec):
        return None
    try:
        return spec if import_object(spec, "") is obj else None
    except UserError:
        return None


def object_name(obj, digest: str | None = None) -> str:
    """What a run directory records for an object with no import path: OBJECT_PREFIX + its qualified name (a
    function, class or method; `<locals>.` left out), `partial.` + its function's (a functools.partial) or
    its class's name (an instance), then `-` and the first DIGEST_CHARS of `digest` when given (an estimator's
    identity: two objects of one name are two names, an edited one another). What it is shown as
    (object_title) is kept for recorded_title."""
    if isinstance(obj, functools.partial):
        name = "partial." + object_name(obj.func)[len(OBJECT_PREFIX):]
    else:
        named = obj if inspect.isfunction(obj) or inspect.isclass(obj) or inspect.ismethod(obj) else type(obj)
        qualname = getattr(named, "__qualname__", type(obj).__name__)
        name = re.sub(r"[^\w.-]", "_", qualname.replace("<locals>.", "").replace("<lambda>", "lambda"))
    name = OBJECT_PREFIX + name + ("" if digest is None else f"-{digest[:DIGEST_CHARS]}")
    _TITLES[name] = object_title(obj)
    return name


def object_title(obj) -> str:
    """What an object is, for a reader (a label, a table): a function or class by its qualified name, a partial
    by its function and arguments (`mix(w=0.1)`), an instance by its class and the plain values it holds
    (`Blur(sigma=2.0)`); no digest (that stays in its recorded name and its ranks' id)."""
    if isinstance(obj, functools.partial):
        arguments = [_value_title(a) for a in obj.args] + [f"{k}={_value_title(v)}" for k, v in obj.keywords.items()]
        return f"{object_title(obj.func)}({', '.join(arguments)})"
    if inspect.isfunction(obj) or inspect.isclass(obj) or inspect.ismethod(obj) or inspect.isbuiltin(obj):
        qualname = getattr(obj, "__qualname__", None) or getattr(obj, "__name__", type(obj).__name__)
        return qualname.replace("<locals>.", "").replace("<lambda>", "lambda")
    state = vars(obj) if hasattr(obj, "__dict__") else {}
    fields = [f"{k}={_value_title(v)}" for k, v in state.items() if not k.startswith("_") and _plain(v)]
    return f"{type(obj).__qualname__.replace('<locals>.', '')}({', '.join(fields)})"


def recorded_title(name: str) -> str | None:
    """What the object recorded as `name` in this process is shown as (object_title), or None."""
    return _TITLES.get(name)


def shown_method(name: str) -> str:
    """A method as a line shows it: an object named in this process by what it is (`mix(w=0.1)`), else its name."""
    return recorded_title(name) or name


def _plain(value) -> bool:
    """Whether `value` tells instances apart in a title: a number, text, a flag, or a short tuple of them."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return not isinstance(value, str) or len(value) <= 40
    return isinstance(value, tuple) and len(value) <= 4 and all(_plain(v) for v in value)


def _value_title(value) -> str:
    if _plain(value):
        return repr(value)
    if callable(value):
        return object_title(value)
    shape = getattr(value, "shape", None)
    return f"{type(value).__name__}{list(shape)}" if shape is not None else type(value).__name__


def given_object_name(name, flag: str) -> str:
    """OBJECT_PREFIX + `name`, a name the user gives an object (OBJECT_PREFIX optional); a UserError naming
    `flag` when it is not text a directory may be named (letters, digits, '_', '.', '-')."""
    text = name[len(OBJECT_PREFIX):] if isinstance(name, str) and name.startswith(OBJECT_PREFIX) else name
    if not isinstance(text, str) or not _GIVEN_NAME.match(text):
        raise UserError(f"{flag}: the name {name!r} given to an object should be letters, digits, '_', '.' and "
                        f"'-', starting with a letter, digit or '_' (it names a directory of the run)")
    return OBJECT_PREFIX + text


def source_sha256(obj) -> str | None:
    """sha256 of the source file that defines `obj` (a function, class or module), or None when it has none
    on disk (built-in, or typed into an interpreter)."""
    try:
        path = inspect.getsourcefile(inspect.unwrap(obj))
    except TypeError:
        return None
    return sha256_file(path) if path and os.path.isfile(path) else None


def describe_error(err: BaseException) -> str:
    """An exception from a user's code in one line, with the innermost place it was raised."""
    tb = err.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    place = f" (at {tb.tb_frame.f_code.co_filename}:{tb.tb_lineno})" if tb is not None else ""
    return f"{_one_line(err)}{place}"


def _one_line(err: BaseException) -> str:
    text = " ".join(str(err).split())
    return f"{type(err).__name__}: {text}" if text else type(err).__name__
