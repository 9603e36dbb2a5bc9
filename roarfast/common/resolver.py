"""One resolver idiom for every kind of thing a run names: models, datasets, estimators and fills.

A `Resolver` holds a kind's built-ins as `Entry`s (a name, a one-line description, its options, and what it
resolves to: a value, or the import path of one, loaded at first use) and the schemes it accepts (`timm:`,
`torchvision:`, `captum:`: a prefix and the loader of what follows it). A kind declares its built-ins in one
light module, each naming its implementation by import path (models, datasets: their modules import torch), or
keeps them one module each in a package (`package=`: fills, estimators, report sections, whose modules are
light): the first lookup imports every module of the package, and each registers its entries
(`Resolver.register`), so a new built-in is one new file. The listing order is declared, never found from
who imported what first: an entry's `order`, then the `module` that declares it, then its registration.
It reads what a user wrote (or passed to Study)
into a `Query`: which form it is (a built-in, a scheme, an import path `package.module:attribute`, a name
recorded for a Python object, or the object itself) and what it points at. Each kind turns a Query into
its own thing (a ModelSpec, a Dataset, an Estimator, a Fill); the command line builds its choices, its
defaults and its `--help` lists from the same resolver, so a new entry appears everywhere at once.

Why our own and not class-resolver (pykeen's): its entries are classes and its names are normalized
(lowercased, '-' and '_' dropped, so "sg-sq" and "sgsq" would be one name), while ours are factories,
functions and objects, loaded lazily so that `roarfast --help` imports no torch.

Light on purpose (no torch): the CLI imports every resolver to build its options.
"""

import functools
import importlib
import pkgutil
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from roarfast.errors import UserError
from roarfast.common.plugins import OBJECT_PREFIX, check_recorded, is_import_path

#: the forms a spec takes (Query.form)
BUILTIN, SCHEME, IMPORT_PATH, RECORDED_OBJECT, OBJECT = "builtin", "scheme", "import path", "recorded object", "object"


def load_target(target: str):
    """The object `package.module:attribute` names inside roarfast (an Entry's or a Scheme's target)."""
    module, _, attribute = target.partition(":")
    obj = importlib.import_module(module)
    for part in attribute.split("."):
        obj = getattr(obj, part)
    return obj


def declaring_module(obj) -> str:
    """The module that defines `obj` (a function, a partial's function, an object's class): where a built-in that
    registers through a helper (a decorator, register_fill) is declared, its `Entry.module`."""
    while isinstance(obj, functools.partial):  # a partial's own __module__ is functools'
        obj = obj.func
    return getattr(obj, "__module__", None) or type(obj).__module__


@dataclass(frozen=True)
class Entry:
    """A built-in of one kind: `name`, a one-line `description`, what it resolves to (`value`, or `target`:
    `roarfast.module:attribute`, imported at first use), `options` (option name -> default) where the kind has
    them, `order` and `module` (the listing sorts by the order, then by the module that declares the entry: a
    package's module, "" for one declared with the resolver, then by registration)."""

    name: str
    description: str
    value: object = None
    target: str | None = None
    options: Mapping = field(default_factory=dict)
    order: float = 0.0
    module: str = ""

    def __post_init__(self):
        if (self.value is None) == (self.target is None):
            raise ValueError(f"entry {self.name!r} needs exactly one of value and target")

    def load(self):
        return self.value if self.target is None else load_target(self.target)


@dataclass(frozen=True)
class Scheme:
    """A family of names behind a prefix (`timm:<name>`): `target` loads the handler of what follows it."""

    prefix: str
    target: str
    description: str

    def load(self):
        return load_target(self.target)


@dataclass(frozen=True)
class Query:
    """What a spec names: its `form` (BUILTIN, SCHEME, IMPORT_PATH, RECORDED_OBJECT, OBJECT), the spec as
    `text` (None for an object), the built-in `entry` or the `scheme` with the `rest` of the name after its
    prefix, or the Python `obj` itself."""

    form: str
    text: str | None = None
    entry: Entry | None = None
    scheme: Scheme | None = None
    rest: str | None = None
    obj: object = None


class Resolver:
    """The names of one kind.

    Args:
        kind: what it resolves ("model", "dataset", "estimator", "fill"), for messages.
        flag: the command-line option that takes it ("--model"), for messages.
        entries: built-ins listed here (each with a target: nothing is imported).
        package: a package whose every module (but those named _*) is imported at the first lookup; each
            registers its built-ins with `register`.
        schemes: the prefixed families it accepts.
        aliases: short name -> built-in name.
        import_form: how the help names the import-path form ("package.module:factory"); None: refused.
        case_sensitive: False reads built-in names (and aliases) in any case.
    """

    def __init__(self, kind: str, flag: str, entries: Iterable[Entry] = (), *, package: str | None = None,
                 schemes: Iterable[Scheme] = (), aliases: Mapping | None = None, import_form: str | None = None,
                 case_sensitive: bool = True):
        self.kind, self.flag = kind, flag
        self._entries = {}
        self.package = package
        for entry in entries:
            self.register(entry)
        self._discovered = package is None
        self.schemes = tuple(schemes)
        self.aliases = dict(aliases or {})
        if self._discovered:
            self._check_aliases()
        self.import_form = import_form
        self.case_sensitive = case_sensitive

    def register(self, entry: Entry) -> Entry:
        """Adds a built-in (a module of `package` calls this as it is imported); a name is taken once."""
        if entry.name in self._entries:
            raise ValueError(f"{self.kind} {entry.name!r} is registered twice")
        self._entries[entry.name] = entry  # a dict keeps the registration order
        return entry

    def _all(self) -> dict:
        """The entries, every module of `package` imported first (once)."""
        if not self._discovered:
            self._discovered = True  # before the imports: their register() calls come back here
            try:
                package = importlib.import_module(self.package)
                for module in sorted(m.name for m in pkgutil.iter_modules(package.__path__)):
                    if not module.startswith("_"):
                        importlib.import_module(f"{self.package}.{module}")
            except BaseException:
                self._discovered = False
                raise
            self._check_aliases()
        return self._entries

    def _check_aliases(self) -> None:
        unknown = sorted(set(self.aliases.values()) - set(self._entries))
        if unknown:
            raise ValueError(f"aliases of {self.kind} name unknown entries: {unknown}")

    # ----------------------------------------------------------------------------------- the built-ins

    @property
    def names(self) -> list[str]:
        """The built-in names, in listing order (by order, then by module, then as registered)."""
        return [entry.name for entry in self]

    def __contains__(self, name) -> bool:
        return isinstance(name, str) and self._builtin_name(name) is not None

    def __getitem__(self, name: str) -> Entry:
        key = self._builtin_name(name) if isinstance(name, str) else None
        if key is None:
            raise UserError(f"unknown {self.kind} {name!r}; known: {', '.join(self.names)}")
        return self._entries[key]

    def __iter__(self):
        # sorted is stable: within an order and a module, as registered (a module registers in its own order)
        return iter(sorted(self._all().values(), key=lambda entry: (entry.order, entry.module)))

    def __len__(self) -> int:
        return len(self._all())

    def load(self, name: str):
        """What the built-in `name` resolves to (its value, or its target imported now)."""
        return self[name].load()

    def _builtin_name(self, name: str) -> str | None:
        key = name.strip() if self.case_sensitive else name.strip().lower()
        key = self.aliases.get(key, key)
        return key if key in self._all() else None

    # ------------------------------------------------------------------------------------- help texts

    def forms(self) -> str:
        """Every form the flag takes, for its help and its errors: "a built-in name (a | b), timm:<name>, or
        package.module:factory"."""
        parts = [f"a built-in name ({' | '.join(self.names)})"]
        parts += [f"{scheme.prefix}<name> ({scheme.description})" for scheme in self.schemes]
        if self.import_form:
            parts.append(self.import_form)
        return ", ".join(parts[:-1]) + (f", or {parts[-1]}" if len(parts) > 1 else parts[0])

    def listing(self) -> str:
        """The built-ins with their descriptions, one "name: description" each, for a --help."""
        return "; ".join(f"{entry.name}: {entry.description}" for entry in self)

    # -------------------------------------------------------------------------------------- resolving

    def query(self, spec, *, recorded_in=None) -> Query:
        """What `spec` names (a string as the command line or a record gives it, or a Python object); a
        UserError naming the flag and every form when a string is none of them.

        recorded_in: the run-directory file `spec` was read from. A record names a string, and an import path
        only where the user named it again or trusts the run directory (plugins.check_recorded); its built-ins,
        scheme entries (validated by their loaders against the library's own list) and objects of this
        process resolve as always."""
        if recorded_in is not None and not isinstance(spec, str):
            raise UserError(f"{recorded_in}: {self.flag} should be recorded as a name, got {type(spec).__name__}")
        if not isinstance(spec, str):
            return Query(OBJECT, obj=spec)
        text = spec.strip()
        builtin = self._builtin_name(text)
        if builtin is not None:
            return Query(BUILTIN, text, entry=self[builtin])
        for scheme in self.schemes:
            if text.startswith(scheme.prefix):
                return Query(SCHEME, text, scheme=scheme, rest=text[len(scheme.prefix):])
        if text.startswith(OBJECT_PREFIX):
            return Query(RECORDED_OBJECT, text)
        if self.import_form and is_import_path(text):
            if recorded_in is not None:
                check_recorded(text, self.flag, recorded_in)
            return Query(IMPORT_PATH, text)
        raise UserError(f"{self.flag} should be {self.forms()}, got {spec!r}")
