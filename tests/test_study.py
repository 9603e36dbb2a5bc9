"""roarfast.Study with Python objects that have no import path (an nn.Module instance, a pair of tensors): the
run directory records them as objects, a Study given them again goes on with the run, the command line says
what to pass; and a Study checks its arguments before any work."""

import pytest
import torch
from click.testing import CliRunner
from torch import nn

from roarfast import Study
from roarfast.cli import main
from roarfast.data import load_dataset
from roarfast.errors import UserError
from roarfast.execution.registry import EXECUTORS
from roarfast.models import spec as model_spec
from roarfast.rundir.directory import RunDir
from tests.plugin_files import snapshot


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.head = nn.Linear(4, 3)

    def forward(self, x):
        return self.head(torch.relu(self.conv(x)).amax((2, 3)))


def data():
    generator = torch.Generator().manual_seed(0)

    def split(n):
        labels = torch.arange(n) % 3
        images = torch.randint(0, 50, (n, 3, 6, 6), generator=generator, dtype=torch.uint8)
        return images + (80 * labels).to(torch.uint8).view(-1, 1, 1, 1), labels

    return split(30), split(15)


def study(run, **changes):
    arguments = dict(model=Net(), dataset=data(), methods=["grad"], fractions=[0.5], modes="roar", seeds=1,
                     control=False, recipe={"epochs": 1}, device="cpu", progress=False)
    return Study(run, **{**arguments, **changes})


def test_a_run_made_from_objects_records_them_and_the_command_line_says_what_to_pass(tmp_path, monkeypatch):
    run = tmp_path / "run"
    first = study(run).run()
    assert RunDir(run).base_meta()["model"] == "object:Net"
    assert RunDir(run).dataset_record()["name"] == "object:tensors"
    assert set(first["method"]) == {"random", "grad"} and (first["model"] == "object:Net").all()

    # a notebook that runs its cells again (a new instance of its class) goes on with the run
    again = study(run).run()
    assert list(again["finished"]) == list(first["finished"])  # nothing retrained
    assert study(run).report().summary["figures"]  # the Study hands the report its dataset

    # the command line: the report reads what it can, the stages say what to pass
    monkeypatch.setattr(model_spec, "_OBJECTS", {})  # a new process knows no objects
    before = snapshot(run)
    result = CliRunner().invoke(main, ["retrain", "--run-dir", str(run), "--fraction", "0.5", "--device", "cpu"])
    assert result.exit_code == 1 and len(result.output.strip().splitlines()) == 1
    assert ("--dataset object:tensors: this dataset was a Python object given to roarfast.Study; the command line "
            "cannot load it: pass the same data again, roarfast.Study(run_dir, dataset=...)") in result.output
    assert snapshot(run) == before
    with pytest.raises(UserError, match=r"--model object:Net: this model was a Python object given to roarfast.Study; "
                                        r"the command line cannot rebuild it: pass the same object again"):
        RunDir(run).load_base_model(load_dataset(data()))
    assert CliRunner().invoke(main, ["report", "--run-dir", str(run)]).exit_code == 0


@pytest.mark.parametrize("changes, says", [({"methods": ["grad", "nope"]}, "unknown method 'nope'"),
                                           ({"fractions": [1.5]}, "--fraction: fractions must lie in"),
                                           ({"fill": "blur"}, "--fill should be one of"),
                                           ({"model": 3}, "model should be a built-in name"),
                                           ({"executor": "slurm"},
                                            f"executor should be one of {', '.join(EXECUTORS.names)}, got 'slurm'"),
                                           ({"ray": {"gpus": 1}}, "ray: gpus is no field of RayOptions"),
                                           ({"ray": {"gpus_per_task": -1}}, "--gpus-per-task >= 0"),
                                           ({"margin": 150}, "margin should be a number of accuracy points between"),
                                           ({"seeds": "many"}, 'seeds should be an int or "auto"'),
                                           ({"seeds": "auto", "detect": 0}, "detect should be a number of accuracy")])
def test_study_checks_its_arguments_before_any_work(tmp_path, changes, says):
    with pytest.raises(UserError, match=says):
        study(tmp_path / "run", **changes)
    assert not (tmp_path / "run").exists()
