"""--method-arg NAME=VALUE (Study: method_args=): a Captum class gets it in its constructor or attribute() by
name, a plug-in as a keyword argument, a built-in only as a parameter it declares; the value is part of the
store's provenance. captum:Occlusion and captum:LRP work given what they need and are refused in one line
naming it (and how to pass it) without; a name no estimator takes is refused naming what each takes."""

import pytest
import torch
from click.testing import CliRunner

from roarfast import Study
from roarfast.cli import main
from roarfast.errors import UserError
from roarfast.stages.extract import ExtractOptions
from roarfast.methods import MethodParams, black_baseline, compute_maps, parse_methods
from roarfast.methods.selection import Selection
from roarfast.models import build_model
from roarfast.rundir.directory import RunDir
from tests.plugin_files import snapshot, write_module
from tests.test_extract import untrained_base
from tests.test_methods_gradients import MEAN, STD, assert_relative, leaf, predicted, tiny_batch, tiny_cnn
from tests.test_methods_provenance import SIZES, TINY

captum_attr = pytest.importorskip("captum.attr")


@pytest.fixture(scope="module")
def dataset():
    from roarfast.data import load_dataset

    return load_dataset("embedded", **SIZES)


def invoke(run_dir, *args):
    return CliRunner().invoke(main, ["extract", "--run-dir", str(run_dir), "--split", "test", *TINY, *args])


def test_occlusion_gets_its_window_by_name_and_equals_captum():
    model, batch = tiny_cnn(), tiny_batch()
    params = MethodParams(ig_baseline=black_baseline(MEAN, STD), args={"sliding_window_shapes": [3, 4, 4],
                                                                       "strides": 4})
    ours = compute_maps(model, batch, ["captum:Occlusion"], params)["captum:Occlusion"]
    black = torch.tensor(black_baseline(MEAN, STD)).view(1, 3, 1, 1).expand_as(batch.x)
    ref = captum_attr.Occlusion(model.eval()).attribute(leaf(batch.x), sliding_window_shapes=(3, 4, 4), strides=4,
                                                        baselines=black, target=predicted(model, batch.x))
    assert_relative(ours, ref)


def test_occlusion_without_its_window_is_refused_naming_it_before_anything_is_written(tmp_path, dataset):
    run_dir = untrained_base(tmp_path / "run", dataset)
    before = snapshot(run_dir)
    result = invoke(run_dir, "--method", "captum:Occlusion")
    assert result.exit_code == 1
    assert result.output.strip().splitlines()[-1] == (
        "Error: captum:Occlusion needs sliding_window_shapes (an argument of Occlusion.attribute): pass --method-arg "
        "sliding_window_shapes=VALUE (Study: method_args={'sliding_window_shapes': ...})")
    assert snapshot(run_dir) == before


def test_occlusion_on_the_command_line_records_its_arguments(tmp_path, dataset):
    run_dir = untrained_base(tmp_path / "run", dataset)
    result = invoke(run_dir, "--method", "captum:Occlusion", "--method-arg", "sliding_window_shapes=[3,32,32]",
                    "--method-arg", "strides=32")
    assert result.exit_code == 0, result.output
    params = RunDir(run_dir).rank_store.manifest("captum:Occlusion", "test")["params"]["parameters"]
    assert params == {"ig_baseline": "black", "target": "predicted", "sliding_window_shapes": [3, 32, 32],
                      "strides": 32}
    again = invoke(run_dir, "--method", "captum:Occlusion", "--method-arg", "sliding_window_shapes=[3,16,16]",
                   "--method-arg", "strides=16")
    assert "(sliding_window_shapes [3, 32, 32] -> [3, 16, 16]; strides 32 -> 16): made beside them" in again.output


def lrp_model():
    torch.manual_seed(0)
    return build_model("fastnet", 4).eval()  # its AdaptiveMaxPool2d has no default rule in Captum


def test_lrp_without_a_rule_is_refused_naming_the_module_and_how_to_pass_one():
    batch = tiny_batch(size=16)
    with pytest.raises(UserError) as err:
        compute_maps(lrp_model(), batch, ["captum:LRP"])
    assert str(err.value) == (
        "captum:LRP has no rule for AdaptiveMaxPool2d (pool): pass --method-arg 'rules={AdaptiveMaxPool2d: "
        "EpsilonRule}' (Study: method_args={'rules': {'AdaptiveMaxPool2d': 'EpsilonRule'}}); rules: "
        "Alpha1_Beta0_Rule, EpsilonRule, GammaRule, IdentityRule")


def test_lrp_with_the_rule_equals_captum_given_the_same_rule():
    from captum.attr._utils.lrp_rules import EpsilonRule

    model, batch = lrp_model(), tiny_batch(size=16)
    params = MethodParams(args={"rules": {"AdaptiveMaxPool2d": "EpsilonRule"}})
    ours = compute_maps(model, batch, ["captum:LRP"], params)["captum:LRP"]
    assert not any(hasattr(module, "rule") for module in model.modules())  # nothing left on the model
    model.pool.rule = EpsilonRule()
    ref = captum_attr.LRP(model).attribute(leaf(batch.x), target=predicted(model, batch.x))
    assert_relative(ours, ref)


def test_a_name_no_estimator_takes_is_refused_naming_what_each_takes(tmp_path, dataset):
    run_dir = untrained_base(tmp_path / "run", dataset)
    result = invoke(run_dir, "--method", "captum:Saliency,random", "--method-arg", "window=3")
    assert result.exit_code == 1
    assert result.output.strip().splitlines()[-1] == (
        "Error: --method-arg window: no estimator of this run takes it (captum:Saliency takes target, abs; random "
        "takes nothing)")


def test_a_builtin_takes_only_the_parameters_it_declares(tmp_path, dataset):
    run_dir = untrained_base(tmp_path / "run", dataset)
    result = invoke(run_dir, "--method", "grad", "--method-arg", "samples=3")
    assert "--method-arg samples: no estimator of this run takes it (grad takes target)" in result.output
    result = invoke(run_dir, "--method", "sg-sq", "--method-arg", "samples=abc")
    assert "--method-arg samples should be a positive int, got 'abc'" in result.output
    result = invoke(run_dir, "--method", "sg-sq,grad", "--method-arg", "samples=2")
    assert result.exit_code == 0, result.output
    store = RunDir(run_dir).rank_store
    assert store.manifest("sg-sq-grad", "test")["params"]["parameters"]["samples"] == 2
    assert "samples" not in store.manifest("grad", "test")["params"]["parameters"]


POWERED = '''

def powered(model, images, target, power=1):
    return images.abs().sum(1, keepdim=True) ** power
'''


def test_a_plugin_gets_the_keyword_arguments_its_signature_takes(tmp_path, monkeypatch):
    module = write_module(tmp_path / "code", monkeypatch, extra=POWERED)
    (name,) = parse_methods(f"{module}:powered")
    batch = tiny_batch()
    squared = compute_maps(tiny_cnn(), batch, [name], MethodParams(args={"power": 2}))[name]
    assert_relative(squared, batch.x.abs().sum(1, keepdim=True) ** 2)
    selection = Selection.resolve([name], ExtractOptions(method_args={"power": 2}), 0)
    assert selection.ranks_identity(name)["parameters"] == {"target": "predicted", "power": 2}
    (plain,) = parse_methods(f"{module}:saliency")
    with pytest.raises(UserError, match=rf"no estimator of this run takes it \({plain} takes target\)"):
        Selection.resolve([plain], ExtractOptions(method_args={"power": 2}), 0)


def test_a_study_refuses_what_its_estimators_lack_before_any_work(tmp_path):
    with pytest.raises(UserError, match="captum:Occlusion needs sliding_window_shapes"):
        Study(tmp_path / "run", methods=["captum:Occlusion"], device="cpu", progress=False)
    study = Study(tmp_path / "run", methods=["captum:Occlusion"], method_args={"sliding_window_shapes": (3, 4, 4)},
                  dataset_options={"num_train": 20, "num_test": 10}, device="cpu", progress=False)
    assert study.extract_options.method_args == {"sliding_window_shapes": (3, 4, 4)}
    assert not (tmp_path / "run").exists()


def test_sweep_checks_its_method_args_like_extract(tmp_path):
    result = CliRunner().invoke(main, ["sweep", "--run-dir", str(tmp_path / "run"), "--dry-run", "--method", "sg-sq",
                                       "--method-arg", "noise_level=-1", *TINY])
    assert result.exit_code == 2 and "--method-arg noise_level should be a number >= 0, got -1" in result.output
