"""What a sweep's stages cost on a device, found without running them (`sweep --dry-run`, a Study's display): per
stage the images it goes through, the bytes it keeps on disk, its peak memory, its device-hours, and its wall
time when N workers share it (`--plan-workers N`: the base model trained data-parallel and the images of an
extraction split between them, each at best 1/N of the time; cells one per worker).

The seconds on this machine's device come from measured step times (roarfast.planning.estimate: the step-time record a
training, an extraction or an earlier dry run left, else a short measured step); on a device that is not here
(`--plan-device h100`), from the FLOPs of the same steps' shapes (counted on the meta device) at the share of a
stated peak that measured steps reached (SHARE: the airbench model's on an H200). Peak memory is what one worker
needs (a process training one cell, or extracting one chunk), whatever the number of workers: the weights,
gradients, momentum and EMA copy of a training (float32); then a training step's activations kept for its backward
at the recipe's batch and an evaluation batch's (the recipe's eval_batch_size images, or the validation or test
split where smaller, through a forward without gradients: evaluation_bytes), counted in float32 and halved under
16-bit autocast: the larger of the two, on a CPU times CPU_HEAP_FACTOR (its heap keeps freed blocks); the
canvases where the data is held in memory (stream=false, or stream=auto where they fit in half the device's
memory), else the streamed batches and the decoder's pieces (streamed_bytes); INDEX_BYTES per image of the dataset
(labels and indices: the only term that grows with it); on a CPU, the process itself (process_bytes). A cell reads
its rank rows per batch, so no other term grows with the dataset. An extraction's: the weights and the activations
of one pass of its rows, the chunk's ranks (and maps) it gathers before the writer takes them, the decoder's
pieces of a streamed split (and, on a CPU, the process).
"""

import math
import os
import weakref
from dataclasses import dataclass

from roarfast.stages import step_times
from roarfast.common.options import check_choice
from roarfast.data.in_memory import IN_MEMORY_SHARE
from roarfast.methods.batches import compute_batch
from roarfast.stages.step_times import device_label

#: stated dense peaks (no sparsity) of the devices a plan may cost without having them, FLOP/s per precision
#: (None: fp32), and their memory: NVIDIA's H100 SXM5 and H200 SXM datasheets (bf16/fp16 tensor cores 989 TFLOP/s
#: dense, 1,979 with sparsity; fp32 67 TFLOP/s; 80 GB HBM3, 141 GB HBM3e)
STATED = {"h100": {"name": "H100 SXM", "peak": {"bf16": 989e12, "fp16": 989e12, None: 67e12}, "memory": 80e9},
          "h200": {"name": "H200 SXM", "peak": {"bf16": 989e12, "fp16": 989e12, None: 67e12}, "memory": 141e9}}
#: share of the stated bf16 peak reached on an NVIDIA H200 (2026-11-26, bf16) by the airbench model at 32 px, its
#: FLOPs counted as roarfast.planning.estimate.step_shape counts them (0.708 GFLOP a training image, 0.236 an evaluated one):
#: training 133,201 img/s (9.5%), attribution passes (forward + input backward) 116,921 img/s (5.6%). Not measured:
#: evaluation (the training share is used), any ResNet-50 step (benchmarks/plan_device.py would measure one), any
#: H100 (the same stated peak, less memory bandwidth): a plan of another network or device carries that doubt
SHARE = {"bf16": {"train": 0.095, "eval": 0.095, "explain": 0.056}}
SHARE["fp16"] = SHARE["bf16"]
#: fp32 not measured: the bf16 shares of the fp32 peak (cuDNN's TF32 tensor cores, on by default, run faster)
SHARE[None] = SHARE["bf16"]
#: bytes of a float32 value: weights, gradients, momentum and EMA are kept in it
FLOAT_BYTES = 4
#: resident memory of a worker process before its work, counted where the device is the CPU (its memory is the
#: process's): torch, roarfast's kernels and DALI loaded, 0.5 GiB RSS measured (torch 2.14, DALI 2.4, 2026-11-27;
#: benchmarks/memory_scale.py's "load data" phase)
PROCESS_BYTES = 0.5 * 2**30
#: what a CPU worker adds once it decodes a streamed tree: the decoder's libraries (DALI's: 140 MiB of file-backed
#: pages) and its threads' buffers and heaps; 300 MiB is the training phase's resident memory less the load's and the
#: terms counted here, for a small network at 224 px (2026-11-27, benchmarks/RESULTS.md, "Memory per worker")
DECODER_PROCESS_BYTES = 300 * 2**20
#: a CPU process's heap at its peak over the bytes of the tensors alive then (activations, evaluation_bytes): glibc
#: keeps freed blocks for reuse
#: (roarfast.common.memory) and torch's aligned blocks fragment it; measured for an evaluation batch at 224 px
#: (2026-11-27, benchmarks/RESULTS.md, "Memory per worker"): ResNet-18 10.5 MiB an image against 6.7 MiB of
#: tensors alive, ResNet-50 19.5 against 10.5 (common/memory.py saw 1.5-1.85x for extraction's passes)
CPU_HEAP_FACTOR = 1.85
#: images an evaluation's memory is traced with on the meta device (its tensors scale with the batch)
EVAL_TRACED_IMAGES = 4


#: bytes a worker keeps per image of the dataset, whatever its batches: the labels and sample indices of its splits
#: (int64), an epoch's shuffled order and its plan of batches (int64 each), an alternating-flips draw (1 byte) and
#: the rest, rounded up; 1 MiB for 20,000 images, 61 MiB for ImageNet's 1.33 M
INDEX_BYTES = 48
#: float32 canvases' worth of memory a streamed image in the decoder holds (DALI's CPU pipeline: its queue of file
#: bytes, decoded, resized and cropped canvases and rank rows, and the masked piece; 5.2-5.8 MiB an image at 224 px,
#: measured at 8 and 16 images a decode, 2026-11-27, benchmarks/RESULTS.md, "Memory per worker")
DECODER_CANVASES = 9


def streamed_bytes(channels: int, side: int, batch: int, evaluated: int, decode_batch: int) -> int:
    """Bytes a streamed split holds besides the network: the training batch's masked float32 canvases and their
    augmented copy, or the evaluation batch's (made whole, then filled a decoded piece at a time), whichever is
    larger; and the decoder's pieces of `decode_batch` images (DECODER_CANVASES float32 canvases an image)."""
    canvas = FLOAT_BYTES * channels * side * side
    return max(2 * batch, evaluated) * canvas + min(decode_batch, max(batch, evaluated)) * DECODER_CANVASES * canvas


@dataclass(frozen=True)
class Target:
    """The device a plan is costed on: `device`, the torch device recipes, default models and batches are chosen
    for; `peak`, {precision: FLOP/s} of a stated device (STATED), None for this machine's own (measured);
    `memory`, its bytes (None: unknown)."""

    name: str
    device: object
    peak: dict | None
    memory: float | None

    def rate(self, precision, kind: str) -> float:
        """FLOP/s a stated device reaches for `kind` ("train", "eval", "explain") in `precision` (None: fp32)."""
        return self.peak[precision] * SHARE[precision][kind]


def plan_target(name: str | None, device) -> Target:
    """The Target of --plan-device `name` (None: this machine's `device`, a torch.device): a stated device costed
    from its peak, unless `device` is one (then measured)."""
    # late: loads torch, and --help imports this module
    import torch

    if name is not None:
        check_choice("--plan-device", name, tuple(STATED))
        stated = STATED[name]
        if not (device.type == "cuda" and stated["name"].split()[0] in torch.cuda.get_device_name(device)):
            return Target(f"{stated['name']} (from its stated peak; no such device here)", torch.device("cuda"),
                          stated["peak"], stated["memory"])
    if device.type == "cuda":
        memory = torch.cuda.get_device_properties(device).total_memory
    else:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return Target(device_label(device), device, None, memory)


@dataclass(frozen=True)
class Cost:
    """A stage's cost: `seconds` on the device, all of it (None: unknown), and where they come from; `work`, what it
    goes through (empty: nothing to compute); `peak`, bytes of memory at its peak (None: unknown); `stored`, bytes it
    writes to disk; `cells`, the cells it trains (each on one worker), 0 for a stage whose images split between
    workers."""

    seconds: float | None
    source: str
    work: str = ""
    peak: float | None = None
    stored: float = 0
    cells: int = 0
    #: an extraction's: (estimator, its peak bytes, the rows of its largest pass) each, largest first; its estimators
    #: take each compute batch one after the other, so the stage's peak is the first's
    peaks: tuple = ()

    def wall(self, workers: int) -> float | None:
        """Seconds it takes on `workers` workers."""
        if self.seconds is None:
            return None
        if self.cells:
            return self.seconds / self.cells * math.ceil(self.cells / workers)
        return self.seconds / workers


class Costing:
    """The costs of one plan's stages on `target` for data (a preview's DataOutline), each model's step shape
    traced once."""

    def __init__(self, data, target: Target):
        self.data, self.target = data, target
        self._shapes = {}

    def shape(self, spec):
        """The StepShape of `spec` on the data's canvas (None: it cannot be traced)."""
        # late: loads torch, and --help imports this module
        from roarfast.planning.estimate import step_shape

        key = (spec.name, spec.source_sha256)
        if key not in self._shapes:
            self._shapes[key] = step_shape(spec, self.data)
        return self._shapes[key]

    def times(self, spec, recipe):
        """The StepTimes of training `spec` with `recipe`: measured here (the step-time record, else a short step),
        or from the step's FLOPs on a stated device (None when they cannot be traced)."""
        # late: loads torch, and --help imports this module
        from roarfast.planning.estimate import StepTimes, training_times

        if self.target.peak is None:
            return training_times(spec, recipe, self.data, self.target.device)
        shape = self.shape(spec)
        if shape is None:
            return None
        share = SHARE[recipe.amp]["train"]
        return StepTimes(shape.train_flops / self.target.rate(recipe.amp, "train"),
                         shape.eval_flops / self.target.rate(recipe.amp, "eval"),
                         f"its FLOPs at {share:.1%} of the {recipe.amp or 'fp32'} peak")

    def training(self, spec, recipe) -> Cost:
        """The cost of training `spec` once with `recipe` on the data."""
        # late: loads torch, and --help imports this module
        from roarfast.planning.estimate import training_seconds

        times = self.times(spec, recipe)
        return Cost(None if times is None else training_seconds(times, recipe, self.data),
                    "its step could not be traced" if times is None else times.source,
                    f"{len(self.data.train_index):,} images x {recipe.epochs} epochs",
                    training_memory(self.shape(spec), recipe, self.data, self.target,
                                    self.evaluation(spec) if self.shape(spec) is not None else None))

    def adoption(self, spec, recipe) -> Cost:
        """The cost of adopting weights for `spec` (`train --weights`): one evaluation of the validation and test
        images at `recipe`'s batch, nothing trained."""
        times = self.times(spec, recipe)
        images = self.data.val_images + len(self.data.test)
        return Cost(None if times is None else images * times.eval_image,
                    "its step could not be traced" if times is None else times.source,
                    f"{images:,} images evaluated, nothing trained",
                    training_memory(self.shape(spec), recipe, self.data, self.target,
                                    self.evaluation(spec) if self.shape(spec) is not None else None, trains=False))

    def evaluation(self, spec) -> float | None:
        """evaluation_bytes of `spec` on the data's canvas (None: it cannot be traced), traced once on this machine
        and then read from the step-time record (a trace through a batch norm loads torch's compiler: 1.5 s of
        every dry run otherwise)."""
        key = ("evaluation", spec.name, spec.source_sha256)
        if key not in self._shapes:
            where = step_times.key("evaluation", None, spec, self.data, {})
            kept = step_times.read(where)
            if kept is None:
                kept = {"bytes": evaluation_bytes(spec, self.data)}
                step_times.remember(where, kept, real=True)
            self._shapes[key] = kept["bytes"]
        return self._shapes[key]

    def cells(self, count: int, measured: float | None, rates: str, spec, recipe) -> Cost:
        """The cost of `count` cells of `spec` with `recipe`: `measured` seconds (the rates measured in the run
        directory, said by `rates`) where given, else each at a training's cost."""
        if not count:
            return Cost(0.0, "done")
        each = self.training(spec, recipe)
        seconds, source = (measured, f"measured here: {rates}") if measured is not None else (
            None if each.seconds is None else count * each.seconds, each.source)
        return Cost(seconds, source, f"{count} x {each.work}", each.peak, cells=count)

    def extraction(self, spec, selection, options) -> Cost:
        """The cost of extracting the estimators of `selection` (a Selection) together with ExtractOptions
        `options` for `spec`: the record of such an extraction here, else their FLOPs at a measured gradient
        pass's rate (this machine) or at the device's share of its peak (a stated device)."""
        # late: loads torch, and --help imports this module
        from roarfast.planning.estimate import explaining_flops, gradient_rate

        if not selection.names:
            return Cost(0.0, "stored")
        data, device = self.data, self.target.device
        params = selection.method_params(data, device, options.amp)
        precision = {"torch.bfloat16": "bf16", "torch.float16": "fp16"}.get(str(params.autocast_dtype))
        batch = compute_batch(selection, device, data.image_size)  # the images its passes compute at once
        images = sum(len(data.train if split == "train" else data.test) for split in options.splits)
        work = f"{len(selection.names)} estimators x {images:,} images"
        stored = rank_bytes(data, options.splits, len(selection.names), options.granularity, options.keep_maps)
        flops = explaining_flops(spec, data, selection, params)
        shape = self.shape(spec) if flops else None
        # besides an estimator's pass: the chunk's ranks (and maps) gathered for the writer, the data, the process on
        # a CPU
        largest = max(len(data.train if split == "train" else data.test) for split in options.splits)
        chunk = min(options.chunk_rows(batch), largest) * stored / images if images else 0
        read = options.pass_images(batch)
        shared = chunk + data_held(data, self.target, read, read) + process_bytes(data, self.target)
        peaks = []
        for method, count in flops.items():
            rows = pass_rows(count, shape, batch, params.max_chunk_elements, math.prod(data.train.shape))
            each = extraction_memory(shape, rows, precision, self.target)
            peaks.append((method, None if each is None else each + shared, rows))
        peaks.sort(key=lambda p: -math.inf if p[1] is None else p[1], reverse=True)
        peak = (peaks[0][1] if peaks else 0) if all(p[1] is not None for p in peaks) else None
        untraced = [method for method, count in flops.items() if count is None]
        kept = None if self.target.peak is not None else step_times.read(step_times.key(
            "extraction", device, spec if selection.explained else None, data,
            step_times.extraction_settings(selection, batch, options.amp)))
        if kept is not None:
            return Cost(kept["image"] * images, "an extraction here", work, peak, stored, peaks=tuple(peaks))
        if untraced:
            return Cost(None, f"{', '.join(untraced)} could not be traced", work, peak, stored, peaks=tuple(peaks))
        if not flops:
            return Cost(0.0, "no model to explain", work, peak, stored)
        if self.target.peak is None:
            rate, source = gradient_rate(spec, data, device, params.autocast_dtype, batch)
        else:
            rate = self.target.rate(precision, "explain")
            source = f"a gradient pass's share of the {precision or 'fp32'} peak, {SHARE[precision]['explain']:.1%}"
        return Cost(sum(flops.values()) * images / rate, f"their FLOPs at {source}", work, peak, stored,
                    peaks=tuple(peaks))


def training_memory(shape, recipe, data, target: Target, evaluation: float | None = None,
                    trains: bool = True) -> float | None:
    """Peak bytes of one worker training at `recipe`'s batch (a StepShape `shape`; None: unknown): weights,
    gradients, momentum and the EMA copy; a batch's activations and an evaluation batch's (`evaluation`:
    evaluation_bytes, per image; None: not counted), the larger of the two (on a CPU times CPU_HEAP_FACTOR); the
    data held (data_held); on a CPU, the process. `trains` False: a worker that only evaluates (the weights and
    an evaluation batch)."""
    if shape is None:
        return None
    copies = (4 if recipe.ema_decay is not None else 3) if trains else 1
    half = 0.5 if recipe.amp in ("bf16", "fp16") else 1.0
    batch = min(recipe.batch_size, len(data.train_index))
    # an evaluation batch: eval_batch_size images, or the whole validation (or test) split where it is smaller
    evaluated = min(recipe.eval_batch_size, max(data.val_images, len(data.test)))
    cpu = getattr(target.device, "type", None) == "cpu"
    step = batch * shape.activation_bytes * half if trains else 0
    evaluating = evaluated * (evaluation or 0) * half
    # a CPU heap keeps freed blocks, and torch's aligned blocks fragment it (CPU_HEAP_FACTOR); an evaluation hands
    # the training steps' back first and each batch's after it (roarfast.common.memory), so a CPU worker holds the
    # larger of the two, as a GPU's allocator does
    steps = max(step, evaluating) * (CPU_HEAP_FACTOR if cpu else 1)
    return shape.parameters * FLOAT_BYTES * copies + steps + data_held(data, target, batch, evaluated) + \
        process_bytes(data, target)


def streams(data, target: Target) -> bool:
    """Whether a worker streams the data: as the outline's `streamed` says (the stream option it was read with),
    else as stream=auto decides, when its canvases would take more than IN_MEMORY_SHARE of the target's memory."""
    streamed = getattr(data, "streamed", None)
    return streamed if streamed is not None else not (
        target.memory and data_size(data) <= IN_MEMORY_SHARE * target.memory)


def process_bytes(data, target: Target) -> float:
    """The worker process's own memory where the device is the CPU (its memory is the process's): PROCESS_BYTES,
    and DECODER_PROCESS_BYTES where it streams the data; 0 on a GPU (the plan's peak is then device memory)."""
    if getattr(target.device, "type", None) != "cpu":
        return 0
    return PROCESS_BYTES + (DECODER_PROCESS_BYTES if streams(data, target) else 0)


def data_held(data, target: Target, batch: int, evaluated: int) -> float:
    """Bytes of data a worker holds at `batch` images a step and `evaluated` an evaluation (or an extraction's
    pass): the canvases where the data is held in memory (stream=false; stream=auto where they fit
    IN_MEMORY_SHARE of the target's memory), else streamed_bytes; and INDEX_BYTES per image of the dataset."""
    # late: loads torch, and --help imports this module
    from roarfast.data.stream import DECODE_BATCH

    held = streamed_bytes(data.channels, data.image_size, batch, evaluated, DECODE_BATCH) if streams(data, target) \
        else data_size(data)
    return held + INDEX_BYTES * (len(data.train) + len(data.test))


def evaluation_bytes(spec, data) -> float | None:
    """float32 bytes per image that a forward without gradients holds at its peak (its input and every tensor
    alive at once), traced on the meta device; None for a model that cannot be traced there."""
    # late: loads torch, and --help imports this module
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_flatten

    from roarfast.planning.estimate import _meta_model

    class LiveBytes(TorchDispatchMode):
        """Each operation's new outputs counted until they are freed (a view of a live tensor, or of one of
        `known`'s storages, the weights and the input, is no new memory)."""

        def __init__(self, known: set):
            super().__init__()
            self.known, self.live, self.now, self.peak = known, {}, 0, 0

        @classmethod
        def _should_skip_dynamo(cls) -> bool:  # as estimate._Flops: spares importing torch's compiler
            return False

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            for tensor in tree_flatten(out)[0]:
                key = tensor.untyped_storage()._cdata if isinstance(tensor, torch.Tensor) else None
                if key is not None and key not in self.live and key not in self.known:
                    self.live[key] = tensor.untyped_storage().nbytes()
                    self.now += self.live[key]
                    weakref.finalize(tensor, self.free, key)
            self.peak = max(self.peak, self.now)
            return out

        def free(self, key) -> None:
            self.now -= self.live.pop(key, 0)

    try:
        model = _meta_model(spec, data).eval()
        x = torch.empty(EVAL_TRACED_IMAGES, data.channels, data.image_size, data.image_size, device="meta")
        known = {t.untyped_storage()._cdata for t in (*model.parameters(), *model.buffers(), x)}
        with torch.no_grad(), LiveBytes(known) as live:
            model(x)
    except Exception:  # noqa: BLE001 - a plug-in model may do anything in its forward: its memory is unknown
        return None
    return live.peak / EVAL_TRACED_IMAGES + x[0].numel() * FLOAT_BYTES


def pass_rows(flops: float | None, shape, batch: int, max_chunk_elements: int, image_elements: int) -> int:
    """Rows of an estimator's largest forward and input backward at `batch` images a compute batch, its `flops` per
    image being so many gradient passes (an ensemble's samples, ig's steps; 2 x a forward's FLOPs each): as the
    estimators chunk them (methods.gradients, methods.ensembles), as many passes of the whole batch at once as
    max_chunk_elements holds, at least one. ig's 25 steps of a 256-image batch of 32-px images go 21 at a time:
    5,376 rows, against 400 at 16 images."""
    if flops is None or shape is None or not shape.eval_flops:
        return batch
    passes = max(1, round(flops / (2 * shape.eval_flops)))
    return batch * max(1, min(passes, max_chunk_elements // (batch * image_elements)))


def extraction_memory(shape, rows: int, precision, target: Target | None = None) -> float | None:
    """Peak bytes of an extraction pass of `rows` images: its weights and the activations of the pass, on a CPU
    times CPU_HEAP_FACTOR (its heap keeps the freed blocks of earlier passes); the caller adds the process."""
    if shape is None:
        return None
    heap = CPU_HEAP_FACTOR if getattr(getattr(target, "device", None), "type", None) == "cpu" else 1
    return shape.parameters * FLOAT_BYTES + rows * shape.activation_bytes * (0.5 if precision else 1.0) * heap


def data_size(data) -> int:
    """Bytes of data's canvases, both splits, as uint8."""
    return (len(data.train) + len(data.test)) * math.prod(data.train.shape)


def rank_bytes(data, splits, methods: int, granularity: str, keep_maps: bool) -> int:
    """Bytes on disk of `methods` rank stores of `splits` (ops.rank_dtype per ranked unit, float16 maps when kept)."""
    # late: loads torch, and --help imports this module
    import numpy as np

    from roarfast import ops
    from roarfast.store import MAPS_DTYPE

    c, h, w = data.train.shape
    units = c * h * w if granularity == "value" else h * w
    per_image = units * (ops.rank_dtype(units).itemsize + (np.dtype(MAPS_DTYPE).itemsize if keep_maps else 0))
    images = sum(len(data.train if split == "train" else data.test) for split in splits)
    return methods * images * per_image


def gib(size: float | None) -> str:
    if size is None:
        return "unknown"
    if size >= 2**40:
        return f"{size / 2**40:.2f} TiB"
    return f"{size / 2**30:.1f} GiB" if size >= 2**30 else f"{size / 2**20:.1f} MiB"


def hours(seconds: float | None) -> str:
    return "unknown" if seconds is None else f"{seconds / 3600:,.3g}"
