"""A user's own model, data and estimator by import path on the command line, the same study through
roarfast.Study, and every bad input a plug-in can bring: one line naming the argument, exit code 1,
nothing written to the run directory."""

import importlib
import json
import sys

import pytest
import torch
from click.testing import CliRunner

from roarfast.cli import main
from roarfast.common.fingerprint import sha256_file
from roarfast.rundir.directory import RunDir
from tests.plugin_files import snapshot, write_module

CPU = ["--device", "cpu", "--no-progress"]


def grid(module: str) -> list:
    """The smallest sweep that shows all three plug-ins: one fraction, ROAR, one seed; a recipe that learns
    the 43 training images in 30 steps (without EMA, which would still sit near the initial weights)."""
    return ["--model", f"{module}:small_cnn", "--dataset", f"{module}:tensors", "--method", f"{module}:saliency",
            "--fraction", "0.5", "--mode", "roar", "--seeds", "1", "--no-control", "--recipe", "epochs=6",
            "--recipe", "batch_size=8", "--recipe", "ema_decay=null", *CPU]


def invoke(args) -> str:
    result = CliRunner().invoke(main, [str(a) for a in args])
    assert result.exit_code == 0, result.output
    return result.output


def fails_with_one_line(args) -> str:
    result = CliRunner().invoke(main, [str(a) for a in args])
    lines = result.output.strip().splitlines()
    assert result.exit_code == 1 and len(lines) == 1 and lines[0].startswith("Error: "), result.output
    return lines[0]


@pytest.fixture(scope="module")
def cli_run(tmp_path_factory):
    """(module name, module file, run directory) of `roarfast sweep` + `roarfast report` with the plug-ins,
    run from the module's folder (imported from the working directory)."""
    folder = tmp_path_factory.mktemp("plugins")
    with pytest.MonkeyPatch.context() as mp:
        module = write_module(folder, mp)
        mp.chdir(folder)
        run = folder / "run"
        invoke(["sweep", "--run-dir", run, *grid(module)])
        report = invoke(["report", "--run-dir", run])
        yield module, folder / f"{module}.py", run, report


def test_sweep_with_a_users_model_data_and_estimator_ends_in_a_report(cli_run):
    module, source, run, report = cli_run
    meta = RunDir(run).base_meta()
    assert meta["model"] == f"{module}:small_cnn" and meta["model_source_sha256"] == sha256_file(source)
    assert meta["in_channels"] == 3 and meta["image_size"] == 8
    assert meta["recipe"]["epochs"] == 6 and meta["recipe"]["batch_size"] == 8 and meta["recipe"]["ema_decay"] is None
    assert RunDir(run).dataset_record()["name"] == f"{module}:tensors"
    # the estimator's ranks live under its import path, tied to its source
    manifest = RunDir(run).rank_store.manifest(f"{module}:saliency", "test")
    assert manifest["complete"] and manifest["params"]["code"] == {"file_sha256": sha256_file(source)}
    rows = json.loads((run / "report" / "summary.json").read_text())["groups"]
    assert {g["method"] for g in rows} == {"random", f"{module}:saliency"}
    assert f"ROAR 50% {module}:saliency" in report and (run / "report" / "index.html").is_file()


def test_the_same_grid_through_study_gives_the_same_accuracies_bit_for_bit(cli_run, tmp_path):
    from roarfast import Study, results

    module_name, _, run, _ = cli_run
    module = importlib.import_module(module_name)
    study = Study(tmp_path / "study", model=module.small_cnn, dataset=module.tensors, methods=[module.saliency],
                  fractions=[0.5], modes="roar", seeds=1, control=False,
                  recipe={"epochs": 6, "batch_size": 8, "ema_decay": None}, device="cpu", progress=False)
    ours = study.run()
    theirs = results.load(run, kind="retrain")
    key = ["method", "mode", "fraction", "seed"]
    joined = ours[key + ["test_acc", "model", "dataset"]].merge(theirs[key + ["test_acc", "model", "dataset"]], on=key)
    assert len(joined) == 2 and set(joined["method"]) == {"random", f"{module_name}:saliency"}
    assert (joined["test_acc_x"] == joined["test_acc_y"]).all()  # equal floats, not close ones
    assert joined["test_acc_x"].nunique() == 2  # two cells that differ: not two constant predictors
    assert RunDir(tmp_path / "study").base_checkpoint_sha256() == RunDir(run).base_checkpoint_sha256()
    assert (joined["model_x"] == joined["model_y"]).all() and (joined["dataset_x"] == joined["dataset_y"]).all()
    for method in ("random", f"{module_name}:saliency"):
        assert torch.equal(RunDir(tmp_path / "study").rank_store.read(method, "train").tensor(),
                           RunDir(run).rank_store.read(method, "train").tensor())


#: bad inputs of `roarfast sweep`: (what replaces the grid's arguments, what the one line says)
BAD_INPUTS = [
    ({"--model": "no_such_module_x:net"}, "--model no_such_module_x:net: no module named 'no_such_module_x'"),
    ({"--model": "{m}:missing"}, "--model {m}:missing: {m} has no attribute 'missing'"),
    ({"--dataset": "no_such_module_x:data"}, "--dataset no_such_module_x:data: no module named 'no_such_module_x'"),
    ({"--method": "{m}:missing"}, "--method {m}:missing: {m} has no attribute 'missing'"),
    ({"--model": "{m}:not_a_module"}, "--model {m}:not_a_module: the factory should return a torch.nn.Module, got str"),
    ({"--model": "{m}:wrong_logits"},
     "--model {m}:wrong_logits: for images Tensor[2, 3, 8, 8] it should return logits Tensor[2, 4] (num_classes), got "
     "[2, 5]"),
    ({"--dataset": "{m}:float_images"},
     "--dataset {m}:float_images: train images should be a uint8 Tensor[N, C, H, W] (pixels 0..255), got float32"),
    ({"--dataset": "{m}:flat_images"},
     "--dataset {m}:flat_images: train images should be a uint8 Tensor[N, C, H, W] (pixels 0..255), got uint8 "
     "Tensor[48, 192]"),
    ({"--dataset": "{m}:labels_out_of_range"},
     "--dataset {m}:labels_out_of_range: labels should lie in [0, 4) (4 class names), got 5"),
    ({"--method": "{m}:cropped_maps"},
     "--method {m}:cropped_maps should return maps Tensor[2, 3 or 1, 8, 8] for images Tensor[2, 3, 8, 8], got "
     "Tensor[2, 3, 4, 8]"),
    ({"--method": "{m}:nan_maps"}, "--method {m}:nan_maps returned NaN or Inf in 384 values"),
    ({"--model": "{m}:gelu_cnn", "--method": "gb,sg-sq-gb"},
     "--method gb,sg-sq-gb: guided backprop guides nn.ReLU modules, and Sequential has none (its activations: "
     "GELU)"),
    ({"--dataset": "torchvision:NoSuchSet", "--data-dir": "."},
     "--dataset torchvision:NoSuchSet: torchvision.datasets has no dataset 'NoSuchSet'"),
    ({"--model": "timm:no_such_net"}, "--model timm:no_such_net: timm has no model 'no_such_net'"),
]


@pytest.mark.parametrize("changes, says", BAD_INPUTS, ids=[next(iter(c.values())) for c, _ in BAD_INPUTS])
def test_a_bad_plugin_is_one_line_and_writes_nothing(tmp_path, monkeypatch, changes, says):
    module = write_module(tmp_path / "code", monkeypatch)
    args = grid(module)
    for flag, value in changes.items():
        value = value.format(m=module)
        if flag in args:
            args[args.index(flag) + 1] = value
        else:
            args += [flag, value]
    line = fails_with_one_line(["sweep", "--run-dir", tmp_path / "run", *args])
    assert says.format(m=module) in line
    assert snapshot(tmp_path / "run") == {}


def test_without_timm_a_timm_model_says_how_to_install_it(tmp_path, monkeypatch):
    module = write_module(tmp_path / "code", monkeypatch)
    monkeypatch.setitem(sys.modules, "timm", None)  # what an environment without timm gives `import timm`
    args = grid(module)
    args[args.index("--model") + 1] = "timm:resnet18"
    line = fails_with_one_line(["sweep", "--run-dir", tmp_path / "run", *args])
    assert "--model timm:resnet18: timm models need timm: pip install 'roarfast[timm]'" in line
    assert snapshot(tmp_path / "run") == {}


def test_a_changed_model_source_is_refused_on_resume_with_both_hashes(tmp_path, monkeypatch):
    module = write_module(tmp_path / "code", monkeypatch)
    source = tmp_path / "code" / f"{module}.py"
    run = tmp_path / "run"
    invoke(["train", "--run-dir", run, "--model", f"{module}:small_cnn", "--dataset", f"{module}:tensors",
            "--epochs", "1", *CPU])
    trained = sha256_file(source)
    source.write_text(source.read_text().replace("nn.Conv2d(8, 8, 3, padding=1)", "nn.Conv2d(8, 8, 5, padding=2)"))
    changed = sha256_file(source)
    before = snapshot(run)
    # the plug-ins named again (extract) or the run directory trusted (retrain): its records name code
    for command in (["sweep", *grid(module)],
                    ["extract", "--method", "grad", "--dataset", f"{module}:tensors", "--model", f"{module}:small_cnn",
                     *CPU],
                    ["retrain", "--method", "random", "--epochs", "1", "--trust-run-dir", *CPU]):
        line = fails_with_one_line([command[0], "--run-dir", run, *command[1:]])
        assert f"--model {module}:small_cnn" in line and trained in line and changed in line
        assert snapshot(run) == before
