"""`roarfast list`: every registered name with its description and parameters, read from the registries
(a new entry appears by itself), the installed Captum's classes as --method takes them, and no torch for the
kinds that do not need it."""

import inspect
import json
import os
import subprocess
import sys

import pytest
from click.testing import CliRunner

from roarfast.cli import listing as listing_module
from roarfast.cli import main
from roarfast.common.resolver import Entry
from roarfast.data.registry import DATASETS
from roarfast.fills import FILLS, ConstantFill
from roarfast.methods.captum_outline import outline_of_class
from roarfast.methods.captum_source import source_outlines
from roarfast.methods.declaration import ESTIMATORS
from roarfast.methods.registry import get
from roarfast.models.registry import MODELS
from roarfast.modes import NO_RETRAIN_METRICS


def listed(*args) -> dict:
    result = CliRunner().invoke(main, ["list", *args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def names(entries) -> set:
    return {e["name"] for e in entries}


def test_json_holds_every_registered_name_with_its_parameters():
    out = listed("--no-captum")
    assert list(out) == ["estimators", "models", "datasets", "fills", "metrics"]
    assert names(out["estimators"]) == set(ESTIMATORS.names)
    assert set(MODELS.names) <= names(out["models"]) and set(DATASETS.names) <= names(out["datasets"])
    assert names(out["fills"]) == set(FILLS.names) and names(out["metrics"]) == set(NO_RETRAIN_METRICS)
    assert all(e["description"] for kind in out.values() for e in kind)
    estimators = {e["name"]: e for e in out["estimators"]}
    for name in ESTIMATORS.names:  # each parameter the record reads, with its default
        assert set(estimators[name]["parameters"]) == {p.name for p in ESTIMATORS[name].value.parameters}
    datasets = {e["name"]: e for e in out["datasets"]}
    assert datasets["embedded"]["parameters"] == dict(DATASETS["embedded"].options)
    assert "timm:<name>" in names(out["models"])  # the prefixed family, as --model takes it


class Sepia(ConstantFill):
    name, description = "sepia-test", "a fill registered by this test"

    def values(self, mean, std):
        return (0.0, 0.0, 0.0)


def test_a_new_registry_entry_appears_by_itself(monkeypatch):
    entries = FILLS._all()
    monkeypatch.setitem(entries, "sepia-test", Entry("sepia-test", Sepia.description, value=Sepia()))
    (fill,) = [e for e in listed("fills")["fills"] if e["name"] == "sepia-test"]
    assert fill["description"] == Sepia.description and fill["constant"] is True


def test_captum_classes_are_listed_as_method_takes_them():
    estimators = listed("estimators")["estimators"]
    captum = {e["name"]: e for e in estimators if e["name"].startswith("captum:")}
    assert "captum:IntegratedGradients" in captum and "ig_steps" in captum["captum:IntegratedGradients"]["parameters"]
    assert "captum:NoiseTunnel" not in captum  # refused by --method, so not listed
    for name in captum:  # every one listed resolves as --method resolves it
        assert get(name).name == name


def test_the_kinds_without_captum_load_no_torch():
    code = ("import sys; from click.testing import CliRunner; from roarfast.cli import main; "
            "r = CliRunner().invoke(main, ['list', 'models', 'datasets', 'fills', 'metrics']); "
            "r2 = CliRunner().invoke(main, ['list', 'estimators', '--no-captum']); "
            "assert r.exit_code == r2.exit_code == 0, r.output + r2.output; "
            "print([m for m in ('torch', 'captum', 'matplotlib') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "[]"


def test_text_listing_names_each_entry_and_an_unknown_kind_is_a_usage_error():
    result = CliRunner().invoke(main, ["list", "fills", "metrics"])
    assert result.exit_code == 0
    lines = result.output.splitlines()
    assert lines[0] == "fills:" and any(line.split()[:1] == ["road"] for line in lines)
    assert "metrics:" in lines
    result = CliRunner().invoke(main, ["list", "widgets"])
    assert result.exit_code == 2 and "'widgets' is not one of" in result.output


def test_captum_read_from_its_source_agrees_with_its_imported_classes():
    """The source reader (no import) outlines every class captum.attr exports exactly as the imported class reads."""
    attr = pytest.importorskip("captum.attr")
    outlines = source_outlines()
    assert outlines is not None  # the installed captum's source is read, not imported
    imported = {name: outline_of_class(getattr(attr, name), attr) for name in dir(attr)
                if inspect.isclass(getattr(attr, name))}
    assert {o.name: o for o in outlines} == imported


def test_captum_descriptions_are_whole_first_sentences_of_the_docstrings():
    attr = pytest.importorskip("captum.attr")
    captum = [e for e in listed("estimators")["estimators"] if e["name"].startswith("captum:")]
    assert captum
    for entry in captum:
        name = entry["name"].removeprefix("captum:")
        head, text = entry["description"].split(": ", 1)
        assert head == f"captum.attr.{name}"
        paragraph = " ".join(inspect.cleandoc(getattr(attr, name).__doc__).split("\n\n", 1)[0].split())
        assert paragraph.startswith(text), (name, text)
        # the whole paragraph, or a sentence ending before the next one (never cut mid-sentence at a line's end)
        assert text == paragraph or (text[-1] in ".!?" and paragraph[len(text)] == " "), (name, text)


def test_captum_listing_from_source_equals_the_one_from_imported_classes(monkeypatch):
    pytest.importorskip("captum.attr")
    from_source = listed("estimators")["estimators"]
    monkeypatch.setattr(listing_module, "source_outlines", lambda: None)  # source unreadable: the classes imported
    assert listed("estimators")["estimators"] == from_source


def test_list_with_captum_imports_neither_torch_nor_captum_attr_nor_starts_again():
    """`roarfast list` (Captum's classes included) reads captum's source: no torch, no captum.attr; and it is not
    started again for an allocator (a command that is imports roarfast.cli twice: -X importtime shows each)."""
    pytest.importorskip("captum")
    out = subprocess.run([sys.executable, "-X", "importtime", "-m", "roarfast.cli", "list", "--json"],
                         capture_output=True, text=True, env={**os.environ, "ROARFAST_ALLOCATOR": "glibc"})
    assert out.returncode == 0, out.stderr[-2000:]
    assert any(e["name"] == "captum:IntegratedGradients" for e in json.loads(out.stdout)["estimators"])
    imported = [line.rsplit("|", 1)[-1].strip() for line in out.stderr.splitlines() if line.startswith("import time:")]
    assert not [m for m in imported if m.split(".")[0] in ("torch", "matplotlib") or m.startswith("captum.attr")]
    assert imported.count("roarfast.cli") == 1
