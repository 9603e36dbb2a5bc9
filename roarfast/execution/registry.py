"""The executors by name (`EXECUTORS`, on the resolver idiom: roarfast.common.resolver) and where the user's choice
becomes an Executor object, which the stages receive: `ExecutorOptions` (--executor and every backend's own
options, as the command line and Study both give them) and `make_executor`, the one place a name is read.

A backend is one module of roarfast.execution.backends, discovered at the first lookup: an Executor subclass
registered with `register_executor`, which names its options dataclass, each field declaring its flag
(roarfast.common.options.flag, with the work it applies to: CELLS, CHUNKS). The command line's --executor, its
choices and help, and each backend's flags, and Study's keyword named after the backend, all come from here; a
new backend touches no other file. Light on purpose (no torch): every --help builds its options from here, so a
backend's module imports what it runs with when it runs.
"""

from collections.abc import Mapping
from dataclasses import MISSING, dataclass, field, fields, is_dataclass

from roarfast.common.options import check_choice, flag
from roarfast.common.resolver import Entry, Resolver
from roarfast.errors import UserError
from roarfast.stages.executor import Executor

#: the executor of a stage given none
DEFAULT_EXECUTOR = "local"

EXECUTORS = Resolver("executor", "--executor", package="roarfast.execution.backends")


@dataclass(frozen=True)
class ExecutorEntry(Entry):
    """A backend: `value`, its Executor subclass, made as value(options) (value() where it has none);
    `options_type`, the dataclass of its own options (None: none), whose fields declare their flags; `options`
    lists their defaults."""

    options_type: type | None = None


def register_executor(name: str, description: str, *, options: type | None = None, order: float = 0.0):
    """Class decorator: registers an Executor subclass as the backend `name` (--executor NAME,
    Study(executor=NAME)), described in one line for --executor's help; `options`: the dataclass of its own
    options (checked in its __post_init__), whose fields' flags the commands that hand it work show, and which
    Study takes as the keyword NAME= (the dataclass, or a dict of its fields)."""
    if options is not None and not is_dataclass(options):
        raise ValueError(f"executor {name!r}: its options should be a dataclass, got {options!r}")

    def decorate(cls):
        cls.name = name
        defaults = {} if options is None else {each.name: each.default for each in fields(options)
                                               if each.default is not MISSING}
        EXECUTORS.register(ExecutorEntry(name, description, value=cls, options=defaults, options_type=options,
                                         order=order, module=cls.__module__))
        return cls

    return decorate


def backend_options(name: str, given=None):
    """The options object of the backend `name` (None where it has no options of its own) from `given`: one
    already, a dict of its fields (another key refused in one line, naming `name`), or None (its defaults)."""
    kind = EXECUTORS[name].options_type
    if kind is None or isinstance(given, kind):
        return given if kind is not None else None
    if given is None:
        return kind()
    if not isinstance(given, Mapping):
        raise UserError(f"{name} should be a {kind.__name__} or a dict of its fields, got {type(given).__name__}")
    names = [each.name for each in fields(kind)]
    unknown = sorted(set(given) - set(names))
    if unknown:
        raise UserError(f"{name}: {', '.join(map(str, unknown))} is no field of {kind.__name__}; its fields: "
                        f"{', '.join(names)}")
    return kind(**given)


def make_executor(spec=None, options=None, *, flag: str = "--executor") -> Executor:
    """The Executor `spec` names (a name of EXECUTORS; None: the local one), made with `options` (the backend's
    own: its options dataclass or a dict of its fields; a backend without options ignores them); an Executor
    object is taken as it is. A UserError, naming `flag`, for a name that is none."""
    if isinstance(spec, Executor):
        return spec
    name = DEFAULT_EXECUTOR if spec is None else spec
    if not isinstance(name, str):
        raise UserError(f"{flag} should be one of {', '.join(EXECUTORS.names)} or an Executor, got "
                        f"{type(name).__name__}")
    entry = EXECUTORS[check_choice(flag, name.strip(), EXECUTORS.names)]
    if entry.options_type is None:
        return entry.value()
    return entry.value(backend_options(entry.name, options))


def _executor_help() -> str:
    return "; ".join(f"{entry.name}: {entry.description}" for entry in EXECUTORS)


@dataclass(frozen=True)
class ExecutorOptions:
    """Where the work runs, as the command line and Study give it: `executor`, a name of EXECUTORS (or, from
    Python, an Executor object), and `backends`, {backend name: its options} of the backends with options of their
    own (each its dataclass or a dict of its fields), each checked whichever backend is named (a bad value is
    refused before any work, even for a backend that does not run)."""

    executor: object = flag("--executor", default=DEFAULT_EXECUTOR, choices=lambda: EXECUTORS.names,
                            help=_executor_help)
    backends: Mapping = field(default_factory=dict)

    def __post_init__(self):
        object.__setattr__(self, "backends", {name: backend_options(name, given)
                                              for name, given in self.backends.items()})

    def make(self, flag: str = "--executor") -> Executor:
        """The Executor chosen, made with its options (make_executor); `flag`: how a bad name is named."""
        name = self.executor.strip() if isinstance(self.executor, str) else self.executor
        return make_executor(name, self.backends.get(name) if isinstance(name, str) else None, flag=flag)
