"""A Python object's identity and name: two different objects (two partials, two instances of one class) are two
estimators with two names and two rank stores, or carry the names the user gives them (checked, one name never
given to two objects); the identity covers what the function reads at module level (a SimpleNamespace's, a
dataclass's, a user module's attributes, nested; class attributes and methods read through self), refuses what
it cannot digest by name, and is the same in another process for the same source."""

import math
import os
import re
import subprocess
import sys
import textwrap
from functools import partial

import pytest

from roarfast import Study
from roarfast.errors import UserError
from roarfast.methods import parse_methods, plugins, registry
from roarfast.methods.identity import object_identity
from roarfast.rundir.directory import RunDir
from tests.test_cli_options import dataset  # noqa: F401  (a fixture)
from tests.test_methods_provenance import extract, notebook, ranks, run_dir  # noqa: F401  (run_dir: a fixture)
from tests.test_study import data

NAMED = r"object:{}-[0-9a-f]{{8}}"


def pick(model, images, target, channel=0):
    return images[:, channel:channel + 1]


class Pick:
    def __init__(self, channel):
        self.channel = channel

    def __call__(self, model, images, target):
        return images[:, self.channel:self.channel + 1]


def digest(function) -> str:
    return object_identity(function, "object:est")["code_sha256"]


# ------------------------------------------------------------------------------------------ names


def test_two_partials_and_two_instances_are_two_estimators_with_two_rank_stores(run_dir, dataset):
    names = parse_methods([partial(pick, channel=0), partial(pick, channel=1), Pick(0), Pick(1)])
    assert all(re.fullmatch(NAMED.format(r"partial\.pick"), name) for name in names[:2])
    assert all(re.fullmatch(NAMED.format("Pick"), name) for name in names[2:])
    assert len(set(names)) == 4
    assert parse_methods([partial(pick, channel=0), Pick(1)]) == [names[0], names[3]]  # the same objects again
    extract(run_dir, dataset, names)
    assert set(RunDir(run_dir).rank_store.methods("test")) == set(names)
    stored = [ranks(run_dir, name) for name in names]
    assert not stored[0].equal(stored[1]) and not stored[2].equal(stored[3])
    assert stored[0].equal(stored[2])  # the same maps, two estimators' stores


def test_names_given_in_a_dict_name_the_objects():
    first, second = partial(pick, channel=0), partial(pick, channel=1)
    assert parse_methods({"first": first, "second": second}) == ["object:first", "object:second"]
    assert parse_methods(["grad", {"object:first": first}, second]) == ["grad", "object:first",
                                                                       parse_methods([second])[0]]
    assert parse_methods([{"first": first}, {"first": partial(pick, channel=0)}]) == ["object:first"]  # one identity


@pytest.mark.parametrize("methods, said", [
    ({"grad": pick}, r"methods: 'grad' is a built-in estimator's name"),
    ({"sg": pick}, r"methods: 'sg' is a built-in estimator's name"),
    ({"a/b": pick}, r"methods: the name 'a/b' given to an object should be letters, digits"),
    ({"..": pick}, r"methods: the name '\.\.' given to an object should be"),
    ({"": pick}, r"methods: the name '' given to an object should be"),
    ({3: pick}, r"methods: the name 3 given to an object should be"),
    ({"mine": "grad"}, r"methods: the name 'mine' is given to 'grad'; names are given to Python objects"),
    ([{"a": partial(pick, channel=0)}, {"a": partial(pick, channel=1)}],
     r"methods: object:a names two different estimators; give each its own name"),
])
def test_a_bad_given_name_and_one_name_for_two_objects_are_refused(methods, said):
    with pytest.raises(UserError, match=said) as caught:
        parse_methods(methods)
    assert "\n" not in str(caught.value)


def test_a_study_takes_a_dict_and_the_command_line_says_to_pass_the_object_again(tmp_path, monkeypatch):
    study = Study(tmp_path / "run", dataset=data(), methods={"noisy": partial(pick, channel=0), "clean": Pick(1)},
                  device="cpu", progress=False)
    assert study.grid.method_list() == ["random", "object:noisy", "object:clean"]
    with pytest.raises(UserError, match="object:twice names two different estimators"):
        Study(tmp_path / "run", dataset=data(), methods=[{"twice": Pick(0)}, {"twice": Pick(1)}], device="cpu",
              progress=False)
    monkeypatch.setattr(plugins, "_PLUGINS", {})  # a new process knows no objects
    with pytest.raises(UserError, match=r"--method object:noisy: this estimator was a Python function given to "
                                        r"roarfast.Study; the command line cannot import it"):
        registry.get("object:noisy")


# -------------------------------------------------------------------------- what the identity covers


SETTINGS = """
import dataclasses
import types

@dataclasses.dataclass
class Settings:
    w: float = 1.0
    unused: float = 0.0

cfg = types.SimpleNamespace(w=1.0, inner=types.SimpleNamespace(v=2.0), unused=0.0)
settings = Settings()

def est(model, images, target):
    return images * cfg.w * cfg.inner.v * settings.w
"""


@pytest.mark.parametrize("change", [
    lambda ns: setattr(ns["cfg"], "w", 100.0),
    lambda ns: setattr(ns["cfg"].inner, "v", 3.0),
    lambda ns: setattr(ns["settings"], "w", 2.0),
    lambda ns: ns.update(cfg=type(ns["cfg"])(w=100.0, inner=ns["cfg"].inner)),
])
def test_an_attribute_read_at_module_level_changes_the_identity(change):
    namespace = {"__name__": "__main__"}
    exec(SETTINGS, namespace)
    before = digest(namespace["est"])
    change(namespace)
    assert digest(namespace["est"]) != before


def test_attributes_it_does_not_read_are_not_part_of_it_unless_it_passes_the_object_on():
    namespace = {"__name__": "__main__"}
    exec(SETTINGS, namespace)
    before = digest(namespace["est"])
    namespace["cfg"].unused = 5.0
    namespace["settings"].unused = 5.0
    assert digest(namespace["est"]) == before  # only cfg.w, cfg.inner.v and settings.w are read
    exec(SETTINGS + "\ndef helper(c):\n    return c\ndef passes(model, images, target):\n    return helper(cfg)\n",
         namespace)
    before = digest(namespace["passes"])
    namespace["cfg"].unused = 6.0  # passed on whole: all of it counts
    assert digest(namespace["passes"]) != before


CLASS = """
class Smooth:
    SCALE = {scale}

    def __init__(self, k):
        self.k = k

    def helper(self, x):
        return x * self.SCALE{helper}

    def __call__(self, model, images, target):
        return self.helper(images) * self.k

    def saliency(self, model, images, target):
        return images * self.k
"""


@pytest.mark.parametrize("edit", [dict(scale=3.0, helper=""), dict(scale=2.0, helper=" + 1")])
def test_class_attributes_and_methods_read_through_self_are_part_of_it(edit):
    one, other = notebook(CLASS.format(scale=2.0, helper=""), "Smooth"), notebook(CLASS.format(**edit), "Smooth")
    assert digest(one(1)) == digest(notebook(CLASS.format(scale=2.0, helper=""), "Smooth")(1))
    assert digest(one(1)) != digest(other(1))
    assert digest(one(1).saliency) != digest(other(1).saliency)  # a bound method: its object's class counts
    assert digest(one(1).saliency) != digest(one(2).saliency)  # and its object's state


def test_a_nested_function_and_a_user_modules_attribute_count_a_library_modules_by_name(tmp_path, monkeypatch):
    (tmp_path / "user_settings_mod.py").write_text("W = 2.0\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    namespace = {"__name__": "__main__"}
    exec(textwrap.dedent("""
        import math
        import user_settings_mod

        def est(model, images, target):
            def inner(x):
                return x * user_settings_mod.W * math.tau
            return inner(images)
        """), namespace)
    before = digest(namespace["est"])
    monkeypatch.setattr(math, "tau", 7.0)  # a library's value counts by its name, not read
    assert digest(namespace["est"]) == before
    monkeypatch.setattr(namespace["user_settings_mod"], "W", 3.0)
    assert digest(namespace["est"]) != before


@pytest.mark.parametrize("source, said", [
    ("import threading\nlock = threading.Lock()\ndef est(model, images, target):\n    return images if lock else 0",
     "est's global lock is a _thread.lock"),
    ("import threading, types\ncfg = types.SimpleNamespace(w=1.0, lock=threading.Lock())\n"
     "def est(model, images, target):\n    return images * cfg.w if cfg.lock else 0",
     "est's global cfg.lock is a _thread.lock"),
    ("import io\nclass Holder:\n    log = io.StringIO()\ndef est(model, images, target):\n    return Holder()",
     "class Holder's attribute log is a _io.StringIO"),
])
def test_a_module_level_object_it_cannot_digest_is_refused_by_name(source, said):
    with pytest.raises(UserError, match=rf"--method object:est: {re.escape(said)}, which cannot be told apart from "
                                        r"an edited one.*pass it with --method-arg") as caught:
        parse_methods([notebook(source)])
    assert "\n" not in str(caught.value)


STABLE = """
import types
SIZES = {"a": 1.5, "b": (2, 3)}
KINDS = {"x", "y", "z"}
cfg = types.SimpleNamespace(w=0.25, names=frozenset({"p", "q"}))

class Scale:
    FACTOR = 2.0

    def __init__(self, k):
        self.k = k

    def __call__(self, model, images, target):
        return images * self.k * self.FACTOR * cfg.w * SIZES["a"] * len(KINDS)
"""
IN_ANOTHER_PROCESS = """
import sys
from roarfast.methods import parse_methods
namespace = {"__name__": "__main__"}
exec(sys.stdin.read(), namespace)
print(parse_methods([namespace["Scale"](3)])[0])
"""


def test_the_same_source_has_the_same_name_in_another_process_an_edited_one_another():
    def name_elsewhere(source):
        # another hash seed: sets and dicts iterate in another order there
        done = subprocess.run([sys.executable, "-c", IN_ANOTHER_PROCESS], input=source, capture_output=True,
                              text=True, env=dict(os.environ, PYTHONHASHSEED="12345"), check=True)
        return done.stdout.strip()

    here = parse_methods([notebook(STABLE, "Scale")(3)])[0]
    assert re.fullmatch(NAMED.format("Scale"), here)
    assert name_elsewhere(STABLE) == here
    assert name_elsewhere(STABLE.replace("FACTOR = 2.0", "FACTOR = 2.5")) != here
