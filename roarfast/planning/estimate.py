"""Stage times and sizes estimated before a stage has run, two ways, neither training, extracting or writing
into a run directory, the caller's random numbers left as they were:

- measured: a few training steps and evaluation passes of a fresh model on random images of the dataset's
  canvas at two batch sizes, calibrated to the recipe's (seconds per image, `calibrated`), kept in the step-time
  record (roarfast.stages.step_times), so that this machine measures a model on a canvas once; a record a real
  training left is read instead.
- counted: a step's shape on the meta device (shapes only: nothing is computed, so a ResNet-50 at 224 px is
  traced in a fraction of a second): the FLOPs of a training step and an evaluation per image, the bytes of
  activations a step keeps for its backward per image, the parameters; and each estimator's FLOPs per image.

An extraction's seconds per image are its estimators' FLOPs at the rate (FLOP/s) of a measured pass that takes the
gradient of the model's input (gradient_rate, kept in the record too): every gradient estimator's passes are
such passes (roarfast.planning.costs reads an extraction's own record first, where one was kept).
"""

import dataclasses
import time
from dataclasses import dataclass

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from roarfast.stages import step_times
from roarfast.data.augment import Augment, augment
from roarfast.methods import ExplainBatch, compute_maps
from roarfast.recipe import autocast

#: pixels in a measured training batch: the recipe's batch, but never so many images that one step is long
#: on a CPU (128 images at 32 px, 2 at 224 px); seconds per image scale up to the recipe's batch
STEP_PIXELS = 2**17
#: steps run before the timed ones: the first steps of a process pay for allocations and kernel selection
#: (one warm-up step left the first estimate of a process 2-6x the steady cost on a CPU)
WARMUP_STEPS = 3
#: steps timed; the fastest is kept: the steady cost of a step, which other processes on the machine only
#: ever slow down
TIMED_STEPS = 3
#: warm-up steps of the second, larger batch a step is timed at (calibrated)
REWARM_STEPS = 1
#: images a step's shape is traced with on the meta device (FLOPs and activations scale with the batch)
TRACED_IMAGES = 2


@dataclass(frozen=True)
class StepTimes:
    """Seconds per image of a training step (forward, backward, optimizer) and of an evaluation pass, and where
    they come from."""

    train_image: float
    eval_image: float
    source: str = "a step measured now"


@dataclass(frozen=True)
class StepShape:
    """A model's step on a canvas, counted on the meta device: FLOPs per image of a training step (forward and
    backward) and of an evaluation (forward), float32 bytes per image of the activations a step keeps for its
    backward, and the parameters."""

    train_flops: float
    eval_flops: float
    activation_bytes: float
    parameters: int


def step_images(batch_size: int, image_size: int) -> int:
    """Images of the measured training batch (at least 2, at most the recipe's batch)."""
    return max(2, min(batch_size, STEP_PIXELS // (image_size * image_size)))


def calibrated(timed, images: int, batch: int) -> float:
    """Seconds per image of a step at `batch` images, from `timed(n)` (the fastest seconds of a step of n images,
    warmed): a step measured below the batch it runs at costs more per image (its fixed cost, kernel launches and
    layer set-up, spread over few images: ResNet-18 at 224 px on a CPU, 2.6x at 2 images what it costs at 20), so it
    is timed at `images` and at twice as many and its seconds fitted as fixed + per image x n, then taken at `batch`;
    where the two say no fixed cost (noise), the larger batch's seconds per image."""
    first = timed(images)
    if batch <= images:
        return first / images
    more = min(batch, 2 * images)
    second = timed(more)
    per_image = (second - first) / (more - images)
    fixed = first - per_image * images
    if per_image <= 0 or fixed <= 0:
        return second / more
    return fixed / batch + per_image


def training_times(spec, recipe, data, device) -> StepTimes:
    """The step times of training `spec` (a ModelSpec) with `recipe` on data's canvas on `device`: the
    step-time record where this machine kept one (a real training's, else an earlier measured step's), else
    measured now (measure_steps) and kept."""
    where = step_times.key("training", device, spec, data, step_times.training_settings(recipe))
    kept = step_times.read(where)
    if kept is not None:
        source = "a training here" if kept["real"] else "a step measured here earlier"
        return StepTimes(kept["train_image"], kept["eval_image"], source)
    times = measure_steps(spec, recipe, data, device)
    step_times.remember(where, {"train_image": times.train_image, "eval_image": times.eval_image}, real=False)
    return times


def measure_steps(spec, recipe, data, device) -> StepTimes:
    """Times training steps of a fresh `spec` (a ModelSpec) with `recipe`'s augmentation, precision and memory
    format on random images of data's canvas (plain SGD updates: torch.optim's first use imports the compiler,
    seconds that a step does not cost), and evaluation passes, each calibrated to the recipe's batch (calibrated)."""
    n = step_images(recipe.batch_size, data.image_size)
    most = 2 * n  # calibrated's second batch
    fmt = torch.channels_last if recipe.channels_last else torch.contiguous_format
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        model = spec.build(data.num_classes, data.image_size, data.channels).to(device, memory_format=fmt)
        images = torch.randn(most, data.channels, data.image_size, data.image_size, device=device).to(
            memory_format=fmt)
        labels = torch.randint(0, data.num_classes, (most,), device=device)
        loss_fn = torch.nn.CrossEntropyLoss(label_smoothing=recipe.label_smoothing)
        precision = autocast(device, recipe)
        shifts = Augment(flip=recipe.flip, translate=recipe.translate, pad=recipe.pad) if recipe.flip or recipe.translate else None
        generator = torch.Generator(device=device).manual_seed(0)

        def step(k):
            x, y = images[:k], labels[:k]
            batch = x if shifts is None else augment(x, shifts, generator).contiguous(memory_format=fmt)
            with precision:
                loss = loss_fn(model(batch).float(), y)
            loss.backward()
            with torch.no_grad():
                for p in model.parameters():
                    p.add_(p.grad, alpha=-recipe.lr)
                    p.grad = None

        def evaluation(k):
            with torch.no_grad(), precision:
                model(images[:k])

        model.train()
        train = calibrated(_fastest(step, device), n, recipe.batch_size)
        model.eval()
        evaluate = calibrated(_fastest(evaluation, device), n, recipe.eval_batch_size)
    return StepTimes(train_image=train, eval_image=evaluate)


def training_seconds(times: StepTimes, recipe, data) -> float:
    """Seconds a training run of `recipe` on data takes at `times`: its steps (the last partial batch dropped,
    as the loop does), the validation pass of every epoch and the final test pass."""
    train_images = len(data.train_index)
    batch = min(recipe.batch_size, train_images)
    stepped = train_images // batch * batch
    return (recipe.epochs * (stepped * times.train_image + data.val_images * times.eval_image)
            + len(data.test) * times.eval_image)


def step_shape(spec, data) -> StepShape | None:
    """The StepShape of `spec` on data's canvas and classes, traced on the meta device (or read from the record of
    an earlier trace: a trace loads torch's compiler); None for a model that cannot be traced there (one whose
    construction or forward reads tensor values)."""
    where = step_times.key("shape", None, spec, data, {})
    kept = step_times.read(where)
    if kept is not None:
        return StepShape(**{k: kept[k] for k in ("train_flops", "eval_flops", "activation_bytes", "parameters")})
    n = TRACED_IMAGES
    saved = {}

    def keep(tensor):  # a tensor saved twice (a view, or by two operations) is held once; weights are no activations
        storage = tensor.untyped_storage()
        if storage._cdata not in weights:
            saved[storage._cdata] = storage.nbytes()
        return tensor

    try:
        model = _meta_model(spec, data)
        weights = {t.untyped_storage()._cdata for t in (*model.parameters(), *model.buffers())}
        x = torch.empty(n, data.channels, data.image_size, data.image_size, device="meta")
        with _Flops() as evaluation, torch.no_grad():
            model.eval()(x)
        with _Flops() as training:
            with torch.autograd.graph.saved_tensors_hooks(keep, lambda tensor: tensor):
                out = model.train()(x)
            out.float().sum().backward()
    except Exception:  # noqa: BLE001 - a plug-in model may do anything in its forward: its shape is unknown
        return None
    shape = StepShape(train_flops=training.total / n, eval_flops=evaluation.total / n,
                      activation_bytes=sum(saved.values()) / n, parameters=sum(p.numel() for p in model.parameters()))
    step_times.remember(where, dataclasses.asdict(shape), real=True)
    return shape


def explaining_flops(spec, data, selection, params) -> dict[str, float | None]:
    """FLOPs per image of each estimator of `selection` that explains the model, its maps computed on the meta
    device once (then read from the record; None for one that cannot be traced there); those that read no model
    (random, sobel, oracle) cost next to nothing and are left out."""
    n = TRACED_IMAGES
    out = {}
    for method in selection.explained:
        alone = selection.only([method])
        where = step_times.key("flops", None, spec, data, step_times.extraction_settings(alone, n, None))
        kept = step_times.read(where)
        if kept is not None:
            out[method] = kept["flops"]
            continue
        model = _meta_model(spec, data).eval()
        batch = ExplainBatch(x=torch.empty(n, data.channels, data.image_size, data.image_size, device="meta"),
                             target=torch.zeros(n, dtype=torch.int64, device="meta"), index=torch.arange(n))
        counter = _Flops()
        try:
            with counter:
                compute_maps(model, batch, alone, params)
        except Exception:  # noqa: BLE001 - a plug-in estimator may read values: its cost is unknown
            out[method] = None
            continue
        out[method] = counter.total / n
        step_times.remember(where, {"flops": out[method]}, real=True)
    return out


def gradient_rate(spec, data, device, dtype, batch_size: int) -> tuple[float, str]:
    """(FLOP/s of a pass taking the gradient of a fresh `spec`'s input in `dtype` (None: fp32) on random images
    of data's canvas, where it comes from): the step-time record, else measured now on step_images(batch_size)
    images and twice as many, calibrated to `batch_size` (calibrated), and kept."""
    rows = step_images(batch_size, data.image_size)
    where = step_times.key("gradient", device, spec, data, {"rows": rows, "batch": batch_size,
                                                            "precision": str(dtype)})
    kept = step_times.read(where)
    if kept is not None:
        return kept["flop_rate"], "a gradient pass measured here earlier"
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        # as extraction runs the model (extract.explained_model): eval mode, channels_last, frozen parameters
        model = spec.build(data.num_classes, data.image_size, data.channels).to(
            device, memory_format=torch.channels_last).eval().requires_grad_(False)
        images = torch.randn(2 * rows, data.channels, data.image_size, data.image_size, device=device).to(
            memory_format=torch.channels_last)
        precision = torch.autocast(device.type, dtype=dtype or torch.float32, enabled=dtype is not None)

        def gradient(k):
            x = images[:k].detach().requires_grad_(True)
            with precision:
                out = model(x).float()
            torch.autograd.grad(out[:, 0].sum(), x)

        seconds = calibrated(_fastest(gradient, device), rows, batch_size)  # an image's, at the compute batch
    counter = _Flops()
    with counter:
        gradient(rows)
    rate = counter.total / rows / seconds
    step_times.remember(where, {"flop_rate": rate}, real=False)
    return rate, "a gradient pass measured now"


def _meta_model(spec, data):
    """A fresh `spec` with its parameters on the meta device (no memory, no initialisation computed; a model
    object's copy, made on its own device, moved there)."""
    with torch.device("meta"):
        return spec.build(data.num_classes, data.image_size, data.channels).to("meta")


class _Flops(TorchDispatchMode):
    """Adds up the FLOPs of the operations torch's flop counter knows (torch.utils.flop_counter's formulas).
    torch's FlopCounterMode tracks modules with backward hooks, which torch.autograd.grad (every gradient
    estimator) refuses on the meta device; and a mode that leaves torch's compiler alone (_should_skip_dynamo)
    spares the seconds of importing it, since nothing here is compiled."""

    def __init__(self):
        super().__init__()
        # late: torch's flop counter loads triton (a few tenths of a second), and every dry run imports this
        # module while FLOPs are counted once per model and kept
        from torch.utils.flop_counter import flop_registry

        self.registry = flop_registry
        self.total = 0

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        return False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        count = self.registry.get(func._overloadpacket)
        if count is not None:
            self.total += count(*args, **kwargs, out_val=out)
        return out


def _fastest(run, device):
    """timed(k) for `calibrated`: the fastest of TIMED_STEPS calls of run(k), after WARMUP_STEPS calls at the first
    size asked and REWARM_STEPS at the next (the process is warm by then: only the new shape's kernels are chosen)."""
    warmups = iter((WARMUP_STEPS,))

    def timed(k):
        for _ in range(next(warmups, REWARM_STEPS)):
            run(k)
        return min(_timed(lambda: run(k), device) for _ in range(TIMED_STEPS))

    return timed


def _timed(fn, device) -> float:
    """Seconds of one call of fn, the device's queue drained before and after."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    started = time.perf_counter()
    fn()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter() - started
