"""Trained weights adopted as the base model (`train --weights`, Study(weights=)): the weights of a model roarfast
trained give the ranks and the no-retrain measurements of that model; the id comes from the weights (the same
tensors in a torch file are the same base model, other tensors another one beside it); a torchvision resnet18
state dict fits the built-in resnet18 above 64 px and a Study's sweep goes on from it without training a base
model; a file that does not fit, or is no state dict, is refused in one line."""

import filecmp
import hashlib
import json
import shlex
import shutil

import pytest
import torch
from click.testing import CliRunner

from roarfast import Study
from roarfast.records.checkpoint import load_checkpoint
from roarfast.cli import main
from roarfast.data import load_dataset
from roarfast.ops import mask_normalize
from roarfast.rundir.directory import RunDir

pytestmark = pytest.mark.minutes(1)  # on 2 cores: collected early (tests/conftest.py)

DATA = ["--data-option", "num_train=160", "--data-option", "num_test=64"]


def invoke(*args):
    result = CliRunner().invoke(main, [*args, "--no-progress"])
    assert result.exit_code == 0, result.output
    return result.output


def refused(*args) -> str:
    """The one line a refused command ends with."""
    result = CliRunner().invoke(main, [*args, "--no-progress"])
    assert result.exit_code != 0 and isinstance(result.exception, SystemExit), result.output
    lines = result.output.strip().splitlines()
    assert "Traceback" not in result.output and lines[-1].startswith("Error: "), result.output
    return lines[-1]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A run directory whose base model roarfast trained (one epoch), with its grad and random ranks and MoRF
    measured: (run directory, its weights file)."""
    run_dir = tmp_path_factory.mktemp("adopt") / "trained"
    invoke("train", "--run-dir", str(run_dir), "--epochs", "1", *DATA)
    invoke("extract", "--run-dir", str(run_dir), "--method", "grad,random")
    invoke("evaluate", "--run-dir", str(run_dir), "--metric", "morf", "--fraction", "0.5")
    return run_dir, RunDir(run_dir).base_checkpoint / "model.safetensors"


def no_retrain_rows(run_dir) -> dict:
    from tests.cluster import rows

    return {(r["method"], r["mode"], r["fraction"]): r["test_acc"] for r in rows(run_dir) if r["kind"] == "no-retrain"}


def test_adopted_weights_give_the_ranks_and_measurements_of_the_model_they_came_from(trained, tmp_path):
    source, weights = trained
    run_dir = tmp_path / "adopted"
    said = invoke("train", "--run-dir", str(run_dir), "--weights", str(weights), "--model", "fastnet", *DATA)
    assert f"adopted from {weights.resolve()}" in said
    invoke("extract", "--run-dir", str(run_dir), "--method", "grad,random")
    invoke("evaluate", "--run-dir", str(run_dir), "--metric", "morf", "--fraction", "0.5")
    # the same rank stores, under the same ids (the checkpoint holds the same bytes), and the same MoRF accuracy
    for ranks in sorted((source / "ranks").rglob("ranks.npy")):
        assert filecmp.cmp(ranks, run_dir / ranks.relative_to(source), shallow=False), ranks
    assert no_retrain_rows(run_dir) == no_retrain_rows(source) != {}
    meta = RunDir(run_dir).base_meta()
    assert meta["adopted"]["file_sha256"] == hashlib.sha256(weights.read_bytes()).hexdigest()
    assert meta["epochs"] == 0 and meta["recipe"] is None
    # the recorded test accuracy is the model's, computed here apart from roarfast's evaluation
    ds = load_dataset("embedded", num_train=160, num_test=64)
    model, _ = load_checkpoint(RunDir(source).base_checkpoint)
    with torch.no_grad():
        predicted = model(mask_normalize(ds.test.images, None, mean=ds.mean, std=ds.std)).argmax(1)
    assert meta["test_acc"] == pytest.approx((predicted == ds.test.labels).float().mean().item())
    # the normalization the weights were evaluated and explained with: this dataset's, recorded
    assert meta["normalization"]["mean"] == pytest.approx(list(ds.mean))
    assert meta["normalization"]["std"] == pytest.approx(list(ds.std))


def test_ls_lists_a_base_model_and_its_ranks_before_any_cell(trained):
    run = RunDir(trained[0])
    listed = CliRunner().invoke(main, ["ls", "--run-dir", str(run.root)]).output.splitlines()
    assert listed[0] == f"no configurations in {run.root} yet (no cells were requested)"
    head = run.head()
    assert any(line.startswith(f"* base model {head.base[:8]} (fastnet, seed 0, ") for line in listed), listed
    for method in ("grad", "random"):
        assert any(line.startswith(f"* ranks of {method} {head.ranks[method][:8]} (") for line in listed), listed


def test_evaluate_carries_random_and_names_the_ranks_it_lacks(trained, tmp_path):
    run_dir = tmp_path / "run"
    shutil.copytree(trained[0], run_dir)
    invoke("evaluate", "--run-dir", str(run_dir), "--metric", "lerf", "--fraction", "0.5", "--method", "grad")
    assert {m for m, mode, _f in no_retrain_rows(run_dir) if mode == "lerf"} == {"grad", "random"}  # the baseline
    line = refused("evaluate", "--run-dir", str(run_dir), "--metric", "lerf", "--method", "sobel")
    assert f"for sobel: run `roarfast extract --run-dir {run_dir} --method sobel --split test` first" in line


def test_the_id_comes_from_the_weights_not_the_file(trained, tmp_path):
    _, weights = trained
    run_dir = tmp_path / "run"
    invoke("train", "--run-dir", str(run_dir), "--weights", str(weights), *DATA)
    first = RunDir(run_dir).head().base
    # the same tensors saved by torch: the same base model, reused
    state = load_checkpoint(weights.parent)[0].state_dict()
    torch.save(state, tmp_path / "same.pt")
    said = invoke("train", "--run-dir", str(run_dir), "--weights", str(tmp_path / "same.pt"), *DATA)
    # named as adopted by the file its record names and that file's digest, never "trained"
    recorded = f"adopted weights {weights.resolve()} (sha256 {hashlib.sha256(weights.read_bytes()).hexdigest()[:12]})"
    assert f"base model: reusing fastnet ({recorded}, not trained here; adopted 20" in said, said
    assert "trained 20" not in said and RunDir(run_dir).head().base == first
    # other tensors: another base model, kept beside the first
    state["head.weight"] = state["head.weight"] * 2
    torch.save(state, tmp_path / "other.pt")
    invoke("train", "--run-dir", str(run_dir), "--weights", str(tmp_path / "other.pt"), *DATA)
    assert RunDir(run_dir).head().base != first and set(RunDir(run_dir).models()) >= {first}
    assert len(RunDir(run_dir).models()) == 2
    # named as adopted, by file and sha256, where the base models are listed and planned on: no recipe invented
    digest = hashlib.sha256((tmp_path / "other.pt").read_bytes()).hexdigest()
    listed = CliRunner().invoke(main, ["ls", "--run-dir", str(run_dir)]).output
    assert (f"  base model {first[:8]} (fastnet, adopted weights {weights.resolve()} (sha256 "
            f"{hashlib.sha256(weights.read_bytes()).hexdigest()[:12]}), not trained here") in listed
    # the adopted weights alone (no cell requested yet) are listed too, as the latest request's
    latest = RunDir(run_dir).head().base
    assert (f"* base model {latest[:8]} (fastnet, adopted weights {(tmp_path / 'other.pt').resolve()} (sha256 "
            f"{hashlib.sha256((tmp_path / 'other.pt').read_bytes()).hexdigest()[:12]}), not trained here") in listed
    assert "no configurations in" in listed.splitlines()[0]
    planned = invoke("sweep", "--run-dir", str(run_dir), "--method", "grad", "--mode", "roar", "--fraction", "0.5",
                     "--seeds", "1", "--epochs", "1", "--device", "cpu", "--dry-run")
    (base,) = [line for line in planned.splitlines() if line.startswith("base model: ")]
    other = (tmp_path / "other.pt").resolve()
    assert base.startswith(f"base model: fastnet, adopted weights {other} (sha256 {digest}), "
                           f"not trained here: reused") and "epochs" not in base and "meta.json records" not in base
    assert "inputs normalized with mean (" in base
    # the cells' epochs apart from the base model's, and the warning of too few steps (1 epoch of 144 images: no
    # record of this model's learning, so the stated floor)
    assert "warning: the cells would train " in planned and "fewer than 100 (no record says" in planned
    # adopted weights have no epochs: never `train --epochs` (refused beside --weights), but what applies
    assert "train --epochs" not in planned
    (epochs,) = [line for line in planned.splitlines() if "; epochs: the cells 1 (sweep --epochs sets these)" in line]
    suggested = epochs.split("the base model none (adopted weights, trained elsewhere; to train one here instead: `")[1]
    suggested = shlex.split(suggested.split("`")[0])
    assert suggested[:2] == ["roarfast", "train"] and "--weights" not in suggested
    # the suggestion runs (no refusal) and trains a base model here, which the next sweep takes
    said = invoke(*suggested[1:])  # HEAD's data: the command is whole as suggested
    assert said.splitlines()[-1].startswith("base model: val ") and "adopted" not in said
    trained_here = RunDir(run_dir).head().base
    assert "adopted" not in RunDir(run_dir).model_meta(trained_here) and len(RunDir(run_dir).models()) == 3
    planned = invoke("sweep", "--run-dir", str(run_dir), "--method", "grad", "--mode", "roar", "--fraction", "0.5",
                     "--seeds", "1", "--epochs", "1", "--device", "cpu", "--dry-run")
    assert f"(as its meta.json records it): reused {trained_here[:8]} (trained 20" in planned


def test_a_sweep_reusing_adopted_weights_names_them_as_adopted(trained, tmp_path):
    _, weights = trained
    run_dir = tmp_path / "run"
    invoke("train", "--run-dir", str(run_dir), "--weights", str(weights), *DATA)
    said = invoke("sweep", "--run-dir", str(run_dir), "--method", "grad", "--mode", "roar", "--fraction", "0.5",
                  "--seeds", "1", "--epochs", "1", "--no-control", "--device", "cpu")
    (reusing,) = [line for line in said.splitlines() if line.startswith("[sweep] base model: reusing")]
    digest = hashlib.sha256(weights.read_bytes()).hexdigest()[:12]
    assert f"(adopted weights {weights.resolve()} (sha256 {digest}), not trained here; adopted 20" in reusing
    assert "trained 20" not in reusing


def test_a_torchvision_resnet18_state_dict_is_the_base_model_of_a_study(tmp_path):
    import torchvision

    generator = torch.Generator().manual_seed(0)

    def split(n):  # 3 x 72 x 72: above 64 px, the built-in resnet18 keeps torchvision's stem
        return (torch.randint(0, 256, (n, 3, 72, 72), dtype=torch.uint8, generator=generator),
                torch.arange(n) % 2)

    torch.manual_seed(1)
    published = torchvision.models.resnet18(num_classes=2).state_dict()
    torch.save(published, tmp_path / "resnet18.pth")
    study = Study(tmp_path / "run", model="resnet18", dataset=(split(48), split(16)), methods=["sobel"],
                  fractions=[0.5], modes=["roar"], seeds=1, control=False, epochs=1, device="cpu", progress=False,
                  weights=tmp_path / "resnet18.pth")
    # displayed before run(): the weights to adopt, by file and digest, evaluated and not trained
    (base,) = [line for line in study.preview().lines() if line.startswith("base model: ")]
    digest = hashlib.sha256((tmp_path / "resnet18.pth").read_bytes()).hexdigest()
    assert base.startswith(f"base model: resnet18, adopted weights {(tmp_path / 'resnet18.pth').resolve()} (sha256 "
                           f"{digest}), not trained here: to adopt as "), base
    (cost,) = [line for line in study.preview().lines() if line.startswith("plan, base model: ")]
    evaluated = len(study.dataset.val_index) + len(study.dataset.test)  # validation and test: what adoption reads
    assert cost.startswith(f"plan, base model: {evaluated} images evaluated, nothing trained;"), cost
    assert "to train" not in base and "epochs" not in base
    cells = study.run()
    assert f"not trained here: reused {RunDir(tmp_path / 'run').head().base[:8]}" in str(study.preview())
    run = RunDir(tmp_path / "run")
    assert len(run.models()) == 1  # the adopted model; none trained beside it
    model, meta = run.load_base_model(study.dataset)
    assert meta["model"] == "resnet18" and meta["adopted"]["file"] == str((tmp_path / "resnet18.pth").resolve())
    assert all(torch.equal(model.state_dict()[key], value) for key, value in published.items())
    assert sorted(cells["method"]) == ["random", "sobel"] and set(cells["status"]) == {"done"}


@pytest.mark.parametrize("make, says", [
    (lambda state: {k: v for k, v in state.items() if k != "head.weight"},
     "does not fit --model fastnet on this data (10 classes, 3x32x32 images): missing key 'head.weight'"),
    (lambda state: {**state, "extra.weight": torch.zeros(3)}, ": unexpected key 'extra.weight'"),
    (lambda state: {k: v[:1] if v.ndim == 4 else v for k, v in state.items()},
     ": 'stage1.0.weight' is [1, 3, 3, 3] in the file, [16, 3, 3, 3] in the model (and 2 more)"),
    (lambda state: {"state_dict": state, "epoch": 3}, ": its entry 'state_dict' is not a tensor (OrderedDict)"),
])
def test_a_file_that_does_not_fit_is_refused_in_one_line(trained, tmp_path, make, says):
    _, weights = trained
    torch.save(make(load_checkpoint(weights.parent)[0].state_dict()), tmp_path / "bad.pt")
    line = refused("train", "--run-dir", str(tmp_path / "run"), "--weights", str(tmp_path / "bad.pt"), *DATA)
    assert f"--weights {tmp_path / 'bad.pt'}" in line and says in line, line
    assert not (tmp_path / "run" / "models").exists()


def test_files_that_are_no_state_dict_are_refused_in_one_line(tmp_path):
    torch.save(torch.nn.Linear(2, 2), tmp_path / "code.pt")  # a whole module: unpickling it would run its class
    (tmp_path / "notes.txt").write_text(json.dumps({"weights": [1, 2]}))
    for name, says in (("code.pt", "torch.load(weights_only=True) refused it"),
                       ("notes.txt", "neither a safetensors file nor a torch file"),
                       ("missing.pt", "cannot be read")):
        line = refused("train", "--run-dir", str(tmp_path / "run"), "--weights", str(tmp_path / name), *DATA)
        assert says in line and name in line, line
    line = refused("train", "--run-dir", str(tmp_path / "run"), "--weights", str(tmp_path / "code.pt"), "--epochs", "2")
    assert "--weights adopts trained weights and trains nothing: drop --epochs" in line
