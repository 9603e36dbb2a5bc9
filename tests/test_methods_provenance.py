"""A rank store records what made it, from the estimator's record: a change in any of it makes the ranks again
(saying which value differs) and the same provenance reuses them, for every form of estimator: a built-in's
parameter, a Captum class's parameter, an import path's file, a notebook function's body, its closure values,
defaults and helpers. The sweep's "which ranks are missing" counts ranks of another provenance as missing."""

import json
import re
import textwrap

import pytest
import torch
from click.testing import CliRunner

from roarfast.cli import main
from roarfast.errors import UserError
from roarfast.results import load
from roarfast.stages.extract import ExtractOptions, run_extract
from roarfast.methods import parse_methods, plugins
from roarfast.methods.identity import object_identity
from roarfast.methods.selection import Selection
from roarfast.rundir.directory import RunDir
from tests.plugin_files import write_module
from tests.test_cli_options import SIZES, TINY, dataset  # noqa: F401  (dataset: a fixture)
from tests.test_extract import untrained_base


@pytest.fixture()
def run_dir(tmp_path, dataset):
    return untrained_base(tmp_path / "run", dataset)


def notebook(source: str, name: str = "est"):
    """The function `name` defined by `source` as a notebook cell defines it (module __main__, no file)."""
    namespace = {"__name__": "__main__", "torch": torch}
    exec(textwrap.dedent(source), namespace)
    return namespace[name]


SALIENCY = """
def est(model, images, target):
    return images.abs().sum(1, keepdim=True)
"""
EDITED = """
def est(model, images, target):
    return -images.abs().sum(1, keepdim=True)
"""


def extract(run_dir, dataset, methods, **options):
    return run_extract(run_dir, ExtractOptions(methods=methods, splits=("test",), batch_size=8, **options),
                       dataset_obj=dataset, device="cpu", progress=False)


def ranks(run_dir, method):
    return RunDir(run_dir).rank_store.read(method, "test").tensor().clone()


# ------------------------------------------------------------------------------------- code identity


def test_a_notebook_function_is_known_by_what_it_runs():
    first = object_identity(notebook(SALIENCY), "object:est")
    assert object_identity(notebook(SALIENCY), "object:est") == first  # the cell run again: the same estimator
    assert object_identity(notebook("\n\n\n" + SALIENCY), "object:est") == first  # moved down: the same
    assert object_identity(notebook(EDITED), "object:est") != first
    assert object_identity(notebook(SALIENCY.replace("abs()", "abs() ")), "object:est") == first  # spacing


@pytest.mark.parametrize("before, after", [
    ("def est(model, images, target, scale=2.0):\n    return images * scale",
     "def est(model, images, target, scale=3.0):\n    return images * scale"),
    ("SCALE = 2.0\ndef est(model, images, target):\n    return images * SCALE",
     "SCALE = 3.0\ndef est(model, images, target):\n    return images * SCALE"),
    ("def helper(x):\n    return x.abs()\ndef est(model, images, target):\n    return helper(images)",
     "def helper(x):\n    return x.square()\ndef est(model, images, target):\n    return helper(images)"),
    ("W = torch.ones(3)\ndef est(model, images, target):\n    return images * W.view(1, 3, 1, 1)",
     "W = torch.ones(3) * 2\ndef est(model, images, target):\n    return images * W.view(1, 3, 1, 1)"),
])
def test_defaults_helpers_and_the_constants_it_reads_are_part_of_it(before, after):
    assert object_identity(notebook(before), "object:est") != object_identity(notebook(after), "object:est")


DECORATED = """
import functools

def scaled(factor):
    def decorate(function):
        @functools.wraps(function)
        def wrapper(model, images, target):
            return function(model, images, target) * factor
        return wrapper
    return decorate

@scaled({factor})
def est(model, images, target):
    return images[:, :1]  # one channel: ranked as it is, so a negative factor reverses the order
"""


def test_closure_values_are_part_of_it():
    two, three = (notebook(DECORATED.format(factor=f)) for f in (2.0, 3.0))
    assert two.__qualname__ == "est"  # functools.wraps: named like the function it wraps
    assert object_identity(two, "object:est") != object_identity(three, "object:est")
    assert object_identity(two, "object:est") == object_identity(notebook(DECORATED.format(factor=2.0)), "object:est")


def test_a_value_that_cannot_be_told_apart_is_refused_naming_it():
    source = DECORATED.replace("import functools", "import functools\nimport threading").format(
        factor="threading.Lock()")
    with pytest.raises(UserError, match=r"--method object:est: est's closure value 'factor' is a _thread.lock, "
                                        r"which cannot be told apart"):
        object_identity(notebook(source), "object:est")


# ------------------------------------------------------------------------- extract: every form


def test_a_builtin_parameter_changed_extracts_again_and_the_same_reuses(run_dir, dataset, capsys):
    extract(run_dir, dataset, "sg-sq", samples=2)
    first = ranks(run_dir, "sg-sq-grad")
    assert extract(run_dir, dataset, "sg-sq", samples=2)[("sg-sq-grad", "test")]["skipped"]
    capsys.readouterr()
    assert not extract(run_dir, dataset, "sg-sq", samples=3)[("sg-sq-grad", "test")]["skipped"]
    assert ("extract: sg-sq-grad with other values than its latest ranks (samples 2 -> 3): made beside them, which are "
            "kept") in capsys.readouterr().out
    assert not torch.equal(first, ranks(run_dir, "sg-sq-grad"))
    # --method-arg sets the same parameter: the value, not where it came from, is what the store records
    assert extract(run_dir, dataset, "sg-sq", samples=2, method_args={"samples": 3})[("sg-sq-grad", "test")]["skipped"]


def test_a_captum_parameter_changed_extracts_again_on_the_command_line(run_dir):
    def invoke(*args):
        result = CliRunner().invoke(main, ["extract", "--run-dir", str(run_dir), "--method",
                                           "captum:IntegratedGradients", "--split", "test", *TINY, *args])
        assert result.exit_code == 0, result.output
        return result.output, ranks(run_dir, "captum:IntegratedGradients")

    _, two = invoke("--ig-steps", "2")
    said, twenty = invoke("--ig-steps", "20")
    assert ("extract: captum:IntegratedGradients with other values than its latest ranks (ig_steps 2 -> 20): made "
            "beside them") in said
    _, fresh = invoke("--ig-steps", "20", "--force")
    assert not torch.equal(two, twenty) and torch.equal(twenty, fresh)
    said, _ = invoke("--ig-steps", "20")
    assert "made beside them" not in said


def test_an_import_path_whose_file_changed_extracts_again(run_dir, dataset, tmp_path, monkeypatch, capsys):
    import sys

    module = write_module(tmp_path / "code", monkeypatch)
    extract(run_dir, dataset, f"{module}:saliency")
    assert extract(run_dir, dataset, f"{module}:saliency")[(f"{module}:saliency", "test")]["skipped"]
    path = tmp_path / "code" / f"{module}.py"
    path.write_text(path.read_text().replace("(x.grad * images).abs()", "x.grad.abs()"))
    del sys.modules[module]  # as a new process imports it, knowing no plug-in yet
    monkeypatch.setattr(plugins, "_PLUGINS", {})
    capsys.readouterr()
    assert not extract(run_dir, dataset, f"{module}:saliency")[(f"{module}:saliency", "test")]["skipped"]
    assert "(code.file_sha256 " in capsys.readouterr().out


def test_a_notebook_function_edited_is_another_estimator_beside_the_first(run_dir, dataset):
    (first,) = parse_methods([notebook(SALIENCY)])
    assert re.fullmatch(r"object:est-[0-9a-f]{8}", first)
    extract(run_dir, dataset, first)
    made = ranks(run_dir, first)
    assert parse_methods([notebook(SALIENCY)]) == [first]  # the cell run again: the same estimator
    assert extract(run_dir, dataset, first)[(first, "test")]["skipped"]
    (second,) = parse_methods([notebook(EDITED)])  # the cell edited, then run: another name, its own ranks
    assert re.fullmatch(r"object:est-[0-9a-f]{8}", second) and second != first
    extract(run_dir, dataset, second)
    assert torch.equal(made, ranks(run_dir, first)) and not torch.equal(made, ranks(run_dir, second))


@pytest.mark.parametrize("before, after", [
    (SALIENCY, EDITED),
    (DECORATED.format(factor=2.0), DECORATED.format(factor=-1.0)),
])
def test_a_named_notebook_function_edited_extracts_again_and_run_again_reuses(run_dir, dataset, capsys, before,
                                                                              after):
    (name,) = parse_methods({"est": notebook(before)})
    assert name == "object:est"
    extract(run_dir, dataset, name)
    first = ranks(run_dir, name)
    parse_methods({"est": notebook(before)})  # the cell run again
    assert extract(run_dir, dataset, name)[(name, "test")]["skipped"]
    parse_methods({"est": notebook(after)})  # the cell edited, then run
    capsys.readouterr()
    assert not extract(run_dir, dataset, name)[(name, "test")]["skipped"]
    assert "object:est with other values than its latest ranks (code.code_sha256 " in capsys.readouterr().out
    assert not torch.equal(first, ranks(run_dir, name))


def test_the_sweep_counts_ranks_of_another_provenance_as_missing(run_dir, dataset):
    parse_methods({"est": notebook(SALIENCY)})
    options = ExtractOptions(splits=("test",), samples=2)
    run = RunDir(run_dir)

    def to_make(methods, seed=0):  # each time a stage begins: the names resolved again
        return run.ranks_to_make(Selection.resolve(methods, options, seed), options.splits, dataset.fingerprint)

    assert to_make(["object:est", "sg-sq-grad", "sobel"]) == ["object:est", "sg-sq-grad", "sobel"]
    extract(run_dir, dataset, "object:est,sg-sq,sobel", samples=2)
    assert to_make(["object:est", "sg-sq-grad", "sobel"]) == []
    parse_methods({"est": notebook(EDITED)})
    assert to_make(["object:est", "sg-sq-grad", "sobel"]) == ["object:est"]
    # another seed: only what draws random numbers (sobel does not)
    assert to_make(["sg-sq-grad", "sobel"], seed=1) == ["sg-sq-grad"]


def test_a_study_run_again_after_the_notebook_function_changed_extracts_and_trains_again(tmp_path, capsys):
    from roarfast import Study
    from tests.test_study import Net, data

    def study(estimator):
        return Study(tmp_path / "run", model=Net(), dataset=data(), methods={"est": estimator}, fractions=[0.5],
                     modes="roar", seeds=1, control=False, recipe={"epochs": 1}, device="cpu", progress=False)

    first = study(notebook(SALIENCY)).run()
    assert study(notebook(SALIENCY)).run()["finished"].tolist() == first["finished"].tolist()  # all reused
    capsys.readouterr()
    edited = study(notebook(EDITED)).run()
    assert "extract: object:est with other values than its latest ranks (code.code_sha256 " in capsys.readouterr().out
    assert len(edited[edited["method"] == "object:est"]) == 1  # run() returns its own configuration's cells
    every = load(tmp_path / "run")
    est = every[every["method"] == "object:est"]
    # the old cell and one trained on the new ranks (told apart by the ranks each row records: both may finish
    # within one second)
    assert len(est) == 2 and est["config"].map(lambda c: json.dumps(c["ranks"], sort_keys=True)).nunique() == 2
