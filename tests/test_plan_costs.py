"""What a plan weighs and keeps (roarfast.planning.costs): each estimator's largest pass at the compute batch, in
rows as the estimators chunk them and in its peak memory, stated on the plan's line; an evaluation's live bytes
traced once on this machine and read back after."""

import re
from types import SimpleNamespace

import pytest
import torch
from click.testing import CliRunner

from roarfast.cli import main
from roarfast.methods import gradients
from roarfast.methods.params import MethodParams
from roarfast.models import resolve_model
from roarfast.planning import costs, estimate
from roarfast.planning.costs import Costing, pass_rows, plan_target
from roarfast.planning.estimate import StepShape
from roarfast.recipe import Recipe

CPU = torch.device("cpu")
UNITS = {"MiB": 2**20, "GiB": 2**30, "TiB": 2**40}


class Splits(SimpleNamespace):
    def __len__(self):
        return self.images


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("ROARFAST_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.mark.parametrize("batch", [16, 256])
def test_an_estimators_largest_pass_has_the_rows_its_chunks_have(batch, monkeypatch):
    """pass_rows says what integrated_gradients hands the model at once: its steps chunked under
    max_chunk_elements (all 25 steps of a small batch, 21 of a 256-image batch of 32-px images)."""
    seen = []

    def recorded(model, x, target, params):
        seen.append(x.shape[0])
        return torch.zeros_like(x)

    monkeypatch.setattr(gradients, "logit_gradient", recorded)
    params = MethodParams(ig_baseline=(0.0, 0.0, 0.0))
    x = torch.zeros(batch, 3, 32, 32)
    gradients.integrated_gradients(None, x, torch.zeros(batch, dtype=torch.int64), params)
    shape = StepShape(train_flops=3.0, eval_flops=1.0, activation_bytes=1.0, parameters=1)
    # ig's FLOPs an image: its steps' gradient passes, each a forward and an input backward (2 forwards' worth)
    planned = pass_rows(params.ig_steps * 2 * shape.eval_flops, shape, batch, params.max_chunk_elements, x[0].numel())
    assert planned == max(seen)
    assert pass_rows(None, shape, batch, params.max_chunk_elements, x[0].numel()) == batch  # unknown: one batch


def _ranks_line(tmp_path, *args) -> str:
    result = CliRunner().invoke(main, ["sweep", "--dry-run", "--device", "cpu", "--no-progress", "--run-dir",
                                       str(tmp_path / "run"), "--method", "ig,grad", *args])
    assert result.exit_code == 0, result.output
    return next(line for line in result.output.splitlines() if line.startswith("plan, ranks:"))


def _size(text: str) -> float:
    number, unit = text.split()
    return float(number.replace(",", "")) * UNITS[unit]


def _peaks(line: str) -> dict:
    """{estimator: (bytes, rows)} of a plan's ranks line, and the stage's peak under None."""
    found = {m: (_size(size), int(rows.replace(",", ""))) for m, size, rows in
             re.findall(r"(\w[\w-]*) ([\d.,]+ [MGT]iB) at ([\d,]+) rows", line)}
    found[None] = (_size(re.search(r"peak memory ([\d.,]+ [MGT]iB)", line).group(1)), 0)
    return found


def test_the_plan_weighs_igs_default_compute_batch_above_a_small_one_and_says_so(tmp_path, cache_dir):
    """ig's default compute batch on the CPU (256 images of 32 px) passes 5,376 rows at once, 16 images 400: the
    plan's line states each estimator's largest pass and its peak, and the stage's peak is the largest of them."""
    large, small = _peaks(_ranks_line(tmp_path)), _peaks(_ranks_line(tmp_path, "--compute-batch", "16"))
    for peaks in (large, small):
        assert set(peaks) == {"ig", "grad", None}
        assert peaks[None][0] == max(peaks["ig"][0], peaks["grad"][0])
        assert peaks["ig"][0] > peaks["grad"][0] and peaks["ig"][1] > peaks["grad"][1]
    assert large["ig"][1] > 10 * small["ig"][1]
    assert large["ig"][0] > 2 * small["ig"][0]


def test_an_evaluations_live_bytes_are_traced_once_and_read_back_after(cache_dir, monkeypatch):
    """A second plan (another process's Costing, the same machine) reads the traced bytes from the step-time
    record: evaluation_bytes, which loads torch's compiler, is not called again."""
    calls = []
    traced = costs.evaluation_bytes

    def counted(spec, data):
        calls.append(spec.name)
        return traced(spec, data)

    monkeypatch.setattr(costs, "evaluation_bytes", counted)
    data = SimpleNamespace(name="toy", num_classes=4, image_size=16, channels=3, val_images=10,
                           train=Splits(shape=(3, 16, 16), images=100), train_index=range(90), test=range(40))
    spec, target = resolve_model("fastnet"), plan_target(None, CPU)
    first = Costing(data, target).evaluation(spec)
    again = Costing(data, target).evaluation(spec)
    assert calls == ["fastnet"]
    assert first == again and first > 3 * 16 * 16 * 4  # the input and more


def test_a_step_timed_below_its_batch_is_calibrated_to_it():
    """A machine whose step costs 1 s fixed and 0.1 s an image: timed at 2 and 4 images (0.6 s and 0.35 s an image),
    the step at 128 images costs 0.1078 s an image; two timings that say no fixed cost give the larger batch's."""
    asked = []

    def machine(images):
        asked.append(images)
        return 1.0 + 0.1 * images

    assert estimate.calibrated(machine, 2, 128) == pytest.approx(1.0 / 128 + 0.1)
    assert asked == [2, 4]
    assert estimate.calibrated(machine, 128, 128) == pytest.approx(machine(128) / 128)  # timed at its batch
    # noise: twice the images faster, or more than twice as slow (a fixed cost below nothing)
    assert estimate.calibrated({2: 1.0, 4: 0.9}.get, 2, 128) == pytest.approx(0.9 / 4)
    assert estimate.calibrated({2: 1.0, 4: 2.4}.get, 2, 128) == pytest.approx(2.4 / 4)


def test_a_first_plan_times_training_and_evaluation_at_the_recipes_batches(cache_dir, monkeypatch):
    """With no record, the dry run's measured step is calibrated to the recipe's training batch and its evaluation
    batch, each timed on steps of the images asked (a model's forward sees them)."""
    calls, seen = [], []
    real = estimate.calibrated

    def recorded(timed, images, batch):
        calls.append((images, batch))
        return real(timed, images, batch)

    monkeypatch.setattr(estimate, "calibrated", recorded)
    fastnet = resolve_model("fastnet")
    data = SimpleNamespace(name="toy", num_classes=4, image_size=64, channels=3, val_images=10,
                           train=Splits(shape=(3, 64, 64), images=100), train_index=range(90), test=range(40))
    recipe = Recipe(epochs=1, batch_size=100, amp=None, eval_batch_size=300)

    def watched(*args, **kwargs):
        model = fastnet.build(*args, **kwargs)
        model.register_forward_pre_hook(lambda module, inputs: seen.append(inputs[0].shape[0]))
        return model

    spec = SimpleNamespace(name=fastnet.name, source_sha256=fastnet.source_sha256, build=watched)
    times = estimate.training_times(spec, recipe, data, CPU)
    n = estimate.step_images(recipe.batch_size, data.image_size)  # 32 images of 64 px
    assert calls == [(n, 100), (n, 300)]
    assert set(seen) == {n, 2 * n}
    assert times.source == "a step measured now" and times.train_image > 0 and times.eval_image > 0
