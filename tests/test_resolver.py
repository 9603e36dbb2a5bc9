"""The resolver idiom (roarfast.common.resolver): built-ins loaded lazily, aliases, schemes, the forms a spec takes,
and the help texts built from the entries."""

import sys
from functools import partial

import pytest

from roarfast.errors import UserError
from roarfast.common.resolver import (BUILTIN, IMPORT_PATH, OBJECT, RECORDED_OBJECT, SCHEME, Entry, Resolver, Scheme,
                               declaring_module, load_target)


def _resolver(**kwargs):
    entries = [Entry("alpha", "the first", target="roarfast.errors:UserError"),
               Entry("beta-two", "the second", target="roarfast.errors:write_error", options={"size": 3})]
    return Resolver("thing", "--thing", entries, schemes=[Scheme("ext:", "roarfast.errors:UserError", "an outside one")],
                    **kwargs)


def test_builtins_in_order_and_loaded_by_target():
    things = _resolver(import_form="package.module:factory")
    assert things.names == ["alpha", "beta-two"]
    assert things.load("alpha") is UserError
    assert things["beta-two"].options == {"size": 3}
    assert "beta-two" in things and "gamma" not in things and 3 not in things


def test_a_builtin_target_is_imported_only_when_loaded():
    sys.modules.pop("json.tool", None)
    things = Resolver("thing", "--thing", [Entry("tool", "lazy", target="json.tool:main")])
    assert "json.tool" not in sys.modules
    assert things.load("tool") is sys.modules["json.tool"].main


def test_aliases_and_case():
    things = _resolver(aliases={"b": "beta-two"}, case_sensitive=False)
    assert things["B"].name == "beta-two"
    assert things.query(" Alpha ").entry.name == "alpha"
    assert "Alpha" not in _resolver()  # case-sensitive by default


def test_aliases_must_name_entries():
    with pytest.raises(ValueError, match="unknown entries"):
        _resolver(aliases={"c": "gamma"})


def test_duplicate_entries_are_refused():
    with pytest.raises(ValueError, match="twice"):
        Resolver("thing", "--thing", [Entry("a", "", target="x:y"), Entry("a", "", target="x:z")])


def test_an_entry_has_a_value_or_a_target():
    assert Entry("a", "", value=3).load() == 3
    for both_or_none in ({}, {"value": 3, "target": "x:y"}):
        with pytest.raises(ValueError, match="exactly one"):
            Entry("a", "", **both_or_none)


def test_a_package_s_modules_register_their_entries_at_the_first_lookup(tmp_path, monkeypatch):
    package = tmp_path / "things_pkg"
    package.mkdir()
    (package / "__init__.py").write_text("from roarfast.common.resolver import Resolver\n"
                                         "THINGS = Resolver('thing', '--thing', package='things_pkg')\n")
    (package / "zeta.py").write_text("from roarfast.common.resolver import Entry\nfrom things_pkg import THINGS\n"
                                     "THINGS.register(Entry('zeta', 'last by name, first by order', value=1, order=-1))\n")
    (package / "alpha.py").write_text("from roarfast.common.resolver import Entry\nfrom things_pkg import THINGS\n"
                                      "THINGS.register(Entry('one', 'a', value=2))\n"
                                      "THINGS.register(Entry('two', 'b', value=3))\n")
    (package / "_helpers.py").write_text("raise RuntimeError('a private module is not a built-in')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    from things_pkg import THINGS

    assert "things_pkg.alpha" not in sys.modules
    assert THINGS.names == ["zeta", "one", "two"]  # by order, then modules by name and registration
    assert THINGS.load("two") == 3 and "things_pkg.alpha" in sys.modules


def test_the_listing_does_not_depend_on_which_module_a_process_imported_first(tmp_path, monkeypatch):
    """A built-in module imported directly before the first lookup (a test, a user's script) registers first;
    the listing (the CLI's choices and help) still follows the modules that declare the entries, as a helper
    that registers a function (or a partial of one) finds them."""
    package = tmp_path / "order_pkg"
    package.mkdir()
    (package / "__init__.py").write_text("from roarfast.common.resolver import Entry, Resolver, declaring_module\n"
                                         "THINGS = Resolver('thing', '--thing', package='order_pkg')\n"
                                         "def register(name, fn):\n"
                                         "    THINGS.register(Entry(name, name, value=fn, module=declaring_module(fn)))\n")
    for module, names in (("alpha", ["a1", "a2"]), ("beta", ["b1"]), ("gamma", ["c1", "c2"])):
        (package / f"{module}.py").write_text("from functools import partial\nfrom order_pkg import register\n"
                                              "def compute(x):\n    return x\n"  # registered through a helper
                                              + "".join(f"register({name!r}, partial(compute, {name!r}))\n"
                                                        for name in names))
    monkeypatch.syspath_prepend(str(tmp_path))
    import order_pkg.gamma  # noqa: F401  (registers c1, c2 before the others are discovered)
    from order_pkg import THINGS

    assert THINGS.names == ["a1", "a2", "b1", "c1", "c2"]
    assert THINGS["c2"].module == "order_pkg.gamma"


def test_the_declaring_module_of_a_function_a_partial_and_an_object():
    assert declaring_module(load_target) == "roarfast.common.resolver"
    assert declaring_module(partial(partial(load_target), "x:y")) == "roarfast.common.resolver"  # not functools
    assert declaring_module(UserError("x")) == "roarfast.errors"  # an object: its class's module


def test_every_form_of_a_spec():
    things = _resolver(import_form="package.module:factory")
    assert things.query("alpha").form == BUILTIN
    scheme = things.query("ext:Widget")
    assert (scheme.form, scheme.rest, scheme.scheme.prefix) == (SCHEME, "Widget", "ext:")
    assert things.query("object:Net").form == RECORDED_OBJECT
    assert things.query("pkg.mod:make").form == IMPORT_PATH
    obj = object()
    assert things.query(obj).form == OBJECT and things.query(obj).obj is obj


def test_import_paths_only_where_the_kind_takes_them():
    with pytest.raises(UserError, match=r"--thing should be a built-in name \(alpha \| beta-two\), or ext:<name>"):
        _resolver().query("pkg.mod:make")


def test_unknown_names_list_every_form():
    things = _resolver(import_form="package.module:factory")
    with pytest.raises(UserError) as err:
        things.query("gamma")
    assert str(err.value) == ("--thing should be a built-in name (alpha | beta-two), ext:<name> (an outside one), or "
                              "package.module:factory, got 'gamma'")
    with pytest.raises(UserError, match="unknown thing 'gamma'; known: alpha, beta-two"):
        things["gamma"]


def test_listing_names_each_builtin_with_its_description():
    assert _resolver().listing() == "alpha: the first; beta-two: the second"


def test_load_target_follows_dotted_attributes():
    assert load_target("roarfast.common.resolver:Resolver.query") is Resolver.query
