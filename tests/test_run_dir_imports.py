"""Opening a run directory runs nothing from it: records (HEAD's dataset name, meta.json's model, a rank store's
method) that name code, re-sealed as an attacker would, make no command import or call it; each stage that
must rebuild a plug-in refuses in one line saying how to name it again or opt in, the report goes on without
the example images, and the same run directory works once the user names its plug-ins again or trusts it (on
the command line and from a Study)."""

import json
import shutil

import pytest
from click.testing import CliRunner

from roarfast.common.atomic import write_record
from roarfast.cli import main
from roarfast.errors import UserError
from roarfast.common.plugins import check_recorded, named_imports, user_named
from roarfast.rundir.directory import RunDir
from tests.plugin_files import snapshot, write_module

CPU = ["--device", "cpu", "--no-progress"]
#: what an attacker's module does when imported: leave a file where the test looks
SIDE_EFFECT = '''
import pathlib as _pathlib
_pathlib.Path({marker!r}).write_text("imported")


def hostile_factory(*args, **kwargs):
    _pathlib.Path({marker!r}).write_text("called")
'''


def invoke(args):
    return CliRunner().invoke(main, [str(a) for a in args])


def refused_in_one_line(args) -> str:
    result = invoke(args)
    lines = result.output.strip().splitlines()
    assert result.exit_code == 1 and len(lines) == 1 and lines[0].startswith("Error: "), result.output
    return lines[0]


@pytest.fixture(scope="module")
def honest_run(tmp_path_factory):
    """(module, run directory) of a sweep with a user's model, data and estimator (one cell each of random and the
    estimator), every record naming the user's module."""
    folder = tmp_path_factory.mktemp("honest")
    with pytest.MonkeyPatch.context() as mp:
        module = write_module(folder / "code", mp)
        run = folder / "run"
        result = invoke(["sweep", "--run-dir", run, "--model", f"{module}:small_cnn", "--dataset", f"{module}:tensors",
                         "--method", f"{module}:saliency", "--fraction", "0.5", "--mode", "roar", "--seeds", "1",
                         "--no-control", "--recipe", "epochs=1", *CPU])
        assert result.exit_code == 0, result.output
        yield module, run, mp


def rewrite(path, **fields) -> None:
    """Changes fields of a sealed record and seals it again, as anyone who can edit the file can."""
    record = json.loads(path.read_text())
    record.pop("record_sha256")
    write_record(path, {**record, **fields})


def rewrite_dataset(run: RunDir, **fields) -> None:
    """Changes fields of the dataset record HEAD carries, sealed again."""
    rewrite(run.head_path, dataset={**json.loads(run.head_path.read_text())["dataset"], **fields})


def rewrite_model(run: RunDir, **fields) -> None:
    """Changes fields of HEAD's base model's meta.json, sealed again, and moves the model to the id the new record
    gives (HEAD naming it), as anyone who can edit the files can: a meta that does not match its place is refused
    as damage before anything it names is looked at."""
    from roarfast.records.model import ModelRecord

    rewrite(run.base_meta_path, **fields)
    new = ModelRecord.from_record(json.loads(run.base_meta_path.read_text())).id
    run.base_checkpoint.rename(run.model_dir(new))
    rewrite(run.head_path, base=new)


@pytest.fixture(params=["os", "module"])
def hostile_run(request, honest_run, tmp_path, monkeypatch):
    """(run directory, marker) of the honest run whose HEAD dataset and meta.json name code: os.popen with a
    command / os.system, or a module of the test's own that leaves `marker` when imported or called."""
    _, run, _ = honest_run
    copy = tmp_path / "run"
    shutil.copytree(run, copy)
    marker = tmp_path / "marker"
    if request.param == "os":
        dataset, dataset_options, model = "os:popen", {"cmd": f"touch {marker}"}, "os:system"
    else:
        name = write_module(tmp_path / "hostile", monkeypatch, extra=SIDE_EFFECT.format(marker=str(marker)))
        dataset, dataset_options, model = f"{name}:hostile_factory", {}, f"{name}:hostile_factory"
    rewrite_dataset(RunDir(copy), name=dataset, options=dataset_options)
    rewrite_model(RunDir(copy), model=model)
    return copy, marker, dataset, model


COMMANDS = [["train", "--epochs", "1"], ["extract", "--method", "grad"], ["retrain", "--method", "random"],
            ["evaluate", "--metric", "morf", "--fraction", "0.5"], ["sweep", "--method", "grad", "--fraction", "0.5",
                                                                    "--seeds", "1", "--no-control"],
            ["leakage", "--fraction", "0.5", "--max-images", "8"]]


@pytest.mark.parametrize("command", COMMANDS, ids=[c[0] for c in COMMANDS])
def test_a_stage_on_records_naming_code_runs_none_of_it_and_says_so_in_one_line(hostile_run, command):
    run, marker, dataset, _ = hostile_run
    before = snapshot(run)
    line = refused_in_one_line([command[0], "--run-dir", run, *command[1:], *CPU])
    assert f"{RunDir(run).dataset_path} names --dataset {dataset}" in line
    assert f"name it again (--dataset {dataset}) or pass --trust-run-dir" in line
    assert not marker.exists() and snapshot(run) == before


def test_the_report_and_results_load_import_nothing_and_say_what_they_skipped(hostile_run):
    from roarfast import results

    run, marker, dataset, _ = hostile_run
    frame = results.load(run)
    assert set(frame["method"]) >= {"random"} and not marker.exists()
    result = invoke(["report", "--run-dir", run])
    assert result.exit_code == 0, result.output
    assert not marker.exists()
    summary = json.loads((run / "report" / "summary.json").read_text())
    (note,) = [n for n in summary["notes"] if "no example images" in n]
    assert f"names --dataset {dataset}" in note and "--trust-run-dir" in note
    assert "examples.png" not in {f["file"] for f in summary["figures"]}


def test_a_model_record_naming_code_is_refused_where_the_dataset_is_named_again(honest_run, hostile_run):
    module, _, _ = honest_run
    run, marker, _, model = hostile_run
    rewrite_dataset(RunDir(run), name=f"{module}:tensors", options={})
    for command in (["extract", "--method", "grad"], ["evaluate", "--metric", "morf", "--fraction", "0.5"],
                    ["retrain", "--method", "random", "--epochs", "1"]):
        line = refused_in_one_line([command[0], "--run-dir", run, *command[1:], "--dataset", f"{module}:tensors",
                                    *CPU])
        assert f"{RunDir(run).base_meta_path} names --model {model}" in line and "--trust-run-dir" in line
        assert not marker.exists()


def test_named_again_or_trusted_the_same_run_directory_works(honest_run, tmp_path):
    module, run, _ = honest_run
    copy = tmp_path / "run"
    shutil.copytree(run, copy)
    dataset, model = f"{module}:tensors", f"{module}:small_cnn"
    refused_in_one_line(["extract", "--run-dir", copy, "--method", "grad", *CPU])
    named = invoke(["extract", "--run-dir", copy, "--method", "grad", "--dataset", dataset, "--model", model, *CPU])
    assert named.exit_code == 0, named.output
    assert RunDir(copy).rank_store.manifest("grad", "test")["complete"]
    trusted = invoke(["evaluate", "--run-dir", copy, "--metric", "morf", "--fraction", "0.5", "--trust-run-dir",
                      *CPU])
    assert trusted.exit_code == 0, trusted.output
    # a stored plug-in estimator is a record too: retrain lists it only where it is named again or trusted
    line = refused_in_one_line(["retrain", "--run-dir", copy, "--dataset", dataset, "--model", model, "--epochs", "1",
                                *CPU])
    assert f"names --method {module}:saliency" in line
    retrained = invoke(["retrain", "--run-dir", copy, "--epochs", "1", "--trust-run-dir", *CPU])
    assert retrained.exit_code == 0, retrained.output
    report = invoke(["report", "--run-dir", copy, "--trust-run-dir"])
    assert report.exit_code == 0, report.output
    summary = json.loads((copy / "report" / "summary.json").read_text())
    assert "examples.png" in {f["file"] for f in summary["figures"]}


def test_a_named_model_must_be_the_one_the_base_model_records(honest_run):
    module, run, _ = honest_run
    line = refused_in_one_line(["extract", "--run-dir", run, "--method", "grad", "--model", "fastnet", *CPU])
    assert f"--model fastnet: the base model in {RunDir(run).base_checkpoint} is {module}:small_cnn" in line


def test_a_scope_lets_records_name_what_it_names_or_what_lies_in_the_run_directory_it_trusts(tmp_path):
    record = tmp_path / "run" / "dataset.json"
    other = tmp_path / "elsewhere" / "dataset.json"
    with pytest.raises(UserError, match="names --dataset mod:load, code roarfast would import"):
        check_recorded("mod:load", "--dataset", record)
    with user_named(["mod:load", "fastnet", None]):
        check_recorded("mod:load", "--dataset", record)
        with pytest.raises(UserError):
            check_recorded("mod:other", "--dataset", record)
    with user_named([], tmp_path / "run"):
        check_recorded("mod:other", "--dataset", record)
        assert named_imports() == ["mod:other"]  # what a worker process is told
        with pytest.raises(UserError):
            check_recorded("mod:third", "--dataset", other)  # another run directory is not trusted
    with pytest.raises(UserError):
        check_recorded("mod:load", "--dataset", record)  # the scopes closed with their commands


def test_records_resolve_builtins_and_listed_scheme_entries_but_no_other_names(tmp_path):
    from roarfast.data.registry import DATASETS
    from roarfast.models import MODELS, resolve_model
    from roarfast.common.resolver import BUILTIN

    record = tmp_path / "meta.json"
    assert MODELS.query("fastnet", recorded_in=record).form == BUILTIN
    with pytest.raises(UserError, match="should be recorded as a name, got dict"):
        MODELS.query({"factory": "os:system"}, recorded_in=record)
    with pytest.raises(UserError, match="timm has no model 'os'"):
        resolve_model("timm:os", recorded_in=record)
    with pytest.raises(UserError, match="names --model torchvision.models:resnet18"):
        resolve_model("torchvision.models:resnet18", recorded_in=record)
    with pytest.raises(UserError, match="torchvision.datasets has no dataset 'utils'"):
        DATASETS.query("torchvision:utils", recorded_in=record).scheme.load()("utils", tmp_path)


def test_a_study_names_what_it_was_given_and_trusts_the_rest_only_when_told(honest_run, tmp_path):
    import importlib

    from roarfast import Study

    module, run, _ = honest_run
    copy = tmp_path / "run"
    shutil.copytree(run, copy)
    data = importlib.import_module(module).tensors  # the records' dataset, given; their model is not
    study = Study(copy, dataset=data, methods=["random"], device="cpu", progress=False)
    with pytest.raises(UserError, match=f"names --model {module}:small_cnn, code roarfast would import"):
        study.evaluate(["morf"], fractions=(0.5,), methods="random")
    trusted = Study(copy, dataset=data, methods=["random"], device="cpu", progress=False, trust_run_dir=True)
    assert set(trusted.evaluate(["morf"], fractions=(0.5,), methods="random")["method"]) == {"random"}
    named = Study(copy, dataset=data, model=f"{module}:small_cnn", methods=["random"], device="cpu", progress=False)
    assert len(named.evaluate(["morf"], fractions=(0.5,), methods="random")) == 1
