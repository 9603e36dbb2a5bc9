"""Stage times estimated before a stage has run in a run directory, from a short measured step: a few
training steps and an evaluation pass of the model on random images of the dataset's canvas (seconds per
image), and one attribution batch per estimator. A dry run uses these where the run directory has no
measured rates yet; nothing here trains, extracts or writes anything, and the caller's random numbers are
left as they were.
"""

import time
from dataclasses import dataclass

import torch

from roarfast.data.augment import Augment, augment
from roarfast.methods import ExplainBatch, compute_maps
from roarfast.methods.compute import rank_maps
from roarfast.recipe import autocast

#: pixels in a measured training batch: the recipe's batch, but never so many images that one step is long
#: on a CPU (128 images at 32 px, 2 at 224 px); seconds per image scale up to the recipe's batch
STEP_PIXELS = 2**17
#: steps run before the timed ones: the first steps of a process pay for allocations and kernel selection
#: (one warm-up step left the first estimate of a process 2-6x the steady cost on a CPU)
WARMUP_STEPS = 3
#: steps timed; the fastest is kept: the steady cost of a step, which other processes on the machine only
#: ever slow down
TIMED_STEPS = 5
#: pixels of the measured attribution batch of each estimator (SmoothGrad's samples multiply its passes): 32
#: images at 32 px, 2 at 224 px. Per image, a batch of 2 cost 10-20x what extraction's batches cost on a CPU
EXPLAIN_PIXELS = 2**15


@dataclass(frozen=True)
class StepTimes:
    """Seconds per image of a training step (forward, backward, optimizer) and of an evaluation pass."""

    train_image: float
    eval_image: float


def step_images(batch_size: int, image_size: int) -> int:
    """Images of the measured training batch (at least 2, at most the recipe's batch)."""
    return max(2, min(batch_size, STEP_PIXELS // (image_size * image_size)))


def measure_steps(spec, recipe, data, device) -> StepTimes:
    """Times training steps of a fresh `spec` (a ModelSpec) with `recipe`'s augmentation, precision and memory
    format on random images of data's canvas (plain SGD updates: torch.optim's first use imports the compiler,
    seconds that a step does not cost), and an evaluation pass."""
    n = step_images(recipe.batch_size, data.image_size)
    fmt = torch.channels_last if recipe.channels_last else torch.contiguous_format
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        model = spec.build(data.num_classes, data.image_size, data.channels).to(device, memory_format=fmt)
        x = torch.randn(n, data.channels, data.image_size, data.image_size, device=device).to(memory_format=fmt)
        y = torch.randint(0, data.num_classes, (n,), device=device)
        loss_fn = torch.nn.CrossEntropyLoss(label_smoothing=recipe.label_smoothing)
        precision = autocast(device, recipe)
        shifts = Augment(flip=recipe.flip, translate=recipe.translate) if recipe.flip or recipe.translate else None
        generator = torch.Generator(device=device).manual_seed(0)

        def step():
            batch = x if shifts is None else augment(x, shifts, generator).contiguous(memory_format=fmt)
            with precision:
                loss = loss_fn(model(batch).float(), y)
            loss.backward()
            with torch.no_grad():
                for p in model.parameters():
                    p.add_(p.grad, alpha=-recipe.lr)
                    p.grad = None

        model.train()
        for _ in range(WARMUP_STEPS):
            step()
        train = min(_timed(step, device) for _ in range(TIMED_STEPS))
        model.eval()
        with torch.no_grad(), precision:
            for _ in range(WARMUP_STEPS):
                model(x)
            evaluate = min(_timed(lambda: model(x), device) for _ in range(TIMED_STEPS))
    return StepTimes(train_image=train / n, eval_image=evaluate / n)


def training_seconds(times: StepTimes, recipe, data) -> float:
    """Seconds a training run of `recipe` on data takes at `times`: its steps (the last partial batch dropped,
    as the loop does), the validation pass of every epoch and the final test pass."""
    train_images = len(data.train_index)
    batch = min(recipe.batch_size, train_images)
    stepped = train_images // batch * batch
    return (recipe.epochs * (stepped * times.train_image + data.val_images * times.eval_image)
            + len(data.test) * times.eval_image)


def measure_explaining(spec, data, selection, params, device) -> dict[str, float]:
    """Seconds per image of each estimator of `selection` (a roarfast.methods.selection.Selection) that explains
    the model, its maps ranked, measured on a batch of random images of data's canvas (EXPLAIN_PIXELS) for a
    fresh `spec` (timing does not depend on the weights), after a warm-up call on two of them; those that read
    no model (random, sobel, oracle) cost next to nothing and are left out."""
    explained = selection.explained
    if not explained:
        return {}
    out = {}
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        model = spec.build(data.num_classes, data.image_size, data.channels).to(device).eval()
        n = max(2, EXPLAIN_PIXELS // (data.image_size * data.image_size))
        x = torch.randn(n, data.channels, data.image_size, data.image_size, device=device)
        y = torch.randint(0, data.num_classes, (n,), device=device)
        batch, warm_up = (ExplainBatch(x=x[:k], target=y[:k], index=torch.arange(k)) for k in (n, 2))
        for method in explained:
            alone = selection.only([method])
            compute_maps(model, warm_up, alone, params)  # its first passes pay for allocations
            seconds = _timed(lambda: _ranked(compute_maps(model, batch, alone, params)[method]), device)
            out[method] = seconds / n
    return out


def _ranked(maps):
    return rank_maps(maps, "sum_sq")


def _timed(fn, device) -> float:
    """Seconds of one call of fn, the device's queue drained before and after."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    started = time.perf_counter()
    fn()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter() - started
