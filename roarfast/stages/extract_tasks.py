"""The extract stage's unit of work: one chunk of one split (a rank store's chunk, the unit of resumption), its
maps computed by every method whose store still lacks it and ranked on the device (`Explainer.ranks`), in this
process or, with --executor ray, as a Ray task on a node of the cluster (roarfast.execution.backends.ray's
RayChunks). A task first checks that it sees the driver's run directory (roarfast.stages.worker_view), rebuilds the
dataset, the base model and the estimators from it (a shared filesystem across nodes) and the driver's settings
(`task_settings`), checking each against what the driver recorded, and computes its chunk as this process would:
the same model in the same memory format, in the same compute batches aligned to image indices
(roarfast.methods.batches), every random draw keyed by its image's index in the split (roarfast.methods.draws,
through each batch's `index`), so the stored bytes depend neither on where a chunk was computed nor on how the split
was cut into chunks and passes (on one device kind and CPU thread count).

Who writes the store: the driver alone. A task returns its chunk's ranks (and maps) and the driver writes them
through the store's one RankWriter, as a local extraction does, because
- the store keeps one writer: its lock and its manifest (a chunk marked done only after its bytes are on disk,
  the manifest replaced by rename) need no lock across hosts, which NFS does not make reliable;
- workers write nothing on the shared filesystem: two hosts writing disjoint but unaligned ranges of one file
  through their NFS page caches may lose each other's bytes (a chunk of 224 px rows does not end on a page), and
  a task killed with its node leaves no half-written chunk: Ray runs it again elsewhere, its bytes never written.
The price: the ranks cross the network to the driver, 2 bytes per pixel (about 100 KB a 224 px image, against a
network's pass or tens of them per image); the driver holds one task's chunk at a time (finished ones wait in Ray's
object store, spilled to disk when it fills), and no more tasks are in flight than the live nodes run.
"""

import json
import math
from dataclasses import dataclass

import torch

from roarfast import ops
from roarfast.data.loader import split_loader
from roarfast.errors import UserError
from roarfast.methods import ExplainBatch, compute_maps
from roarfast.methods.compute import rank_maps
from roarfast.methods.registry import resolve_methods
from roarfast.methods.selection import Selection
from roarfast.common.memory import release_freed_memory
from roarfast.common.plugins import OBJECT_PREFIX, named_imports, user_named
from roarfast.stages.worker_view import check_view, driver_data, this_node

#: per process: the Explainer of the last settings a Ray worker served, so that it loads the dataset and the
#: base model once for all the chunks it computes
_EXPLAINERS = {}


@dataclass(frozen=True)
class Chunk:
    """One unit of work: rows [start, stop) of `split`, the store chunk `index`, for the `methods` whose stores
    lack it (stores of one chunk size)."""

    split: str
    index: int
    start: int
    stop: int
    methods: tuple

    def describe(self) -> str:
        return f"chunk {self.index} of {self.split} (rows {self.start}-{self.stop - 1}; {', '.join(self.methods)})"


def explained_model(model, device):
    """`model` as extraction runs it: on `device`, in eval mode, channels_last as recipes train it
    (Recipe.channels_last), which oneDNN's and cuDNN's convolutions take faster (benchmarks/cpu_formats.py);
    its maps differ from an NCHW model's by float rounding alone."""
    return model.to(device, memory_format=torch.channels_last).eval()


class Explainer:
    """What computes a chunk's ranks: the dataset, the model as extraction runs it with its compiled twin (or
    None), the Selection and its MethodParams, `passes` (the images a pass reads, the images of a compute batch:
    a multiple of it, roarfast.methods.batches), the device and whether maps are kept; a loader per split, made
    at its first chunk (an in-memory split may be normalized whole, once)."""

    def __init__(self, ds, models: tuple, selection, params, passes: tuple, device, keep_maps: bool):
        self.ds, self.models, self.selection, self.params = ds, models, selection, params
        (self.pass_images, self.compute_batch), self.device, self.keep_maps = passes, device, keep_maps
        self.loaders = {}

    def ranks(self, chunk: Chunk, on_batch=None) -> dict:
        """{method: (ranks, maps or None, NaN/Inf map values)} of `chunk`'s rows in order (CPU tensors), its
        rows read `pass_images` at a time and computed `compute_batch` at a time (aligned to image indices where
        the chunk begins at a multiple of it: every chunk of a new store); `on_batch(images)` after each batch."""
        if chunk.split not in self.loaders:
            self.loaders[chunk.split] = split_loader(self.ds, chunk.split, self.device)
        part = self.ds.split(chunk.split)
        c = part.shape[0]
        reduction = self.selection.reduction
        groups = _model_groups(self.models, self.selection.only(chunk.methods))
        # the previous chunk's free heap pages go back to the system first, so that a chunk holds the pages it
        # touches, not those of every chunk before it (roarfast.common.memory)
        release_freed_memory()
        # a chunk's ranks (and maps) are made once, before its first batch, and filled batch by batch: one block a
        # chunk that lives as long as the chunk, not a list of pieces and their join
        row = (c, *part.shape[1:]) if reduction == "value" else tuple(part.shape[1:])
        shape = (chunk.stop - chunk.start, *row)
        out = {m: [torch.empty(shape, dtype=ops.rank_dtype(math.prod(row))),
                   torch.empty(shape, dtype=torch.float16) if self.keep_maps else None, 0] for m in chunk.methods}
        done = 0
        passes = self.loaders[chunk.split].batches(torch.arange(chunk.start, chunk.stop), self.pass_images,
                                                   with_index=True)
        for x, y, index in _compute_batches(passes, self.compute_batch):
            maps = _batch_maps(groups, self.params, part, x, y, index.cpu())
            n = index.shape[0]
            for m in chunk.methods:
                # ranked per value, a one-value-per-pixel map (sobel, oracle) scores a pixel's channels alike
                unit_maps = maps[m].expand(-1, c, -1, -1) if reduction == "value" else maps[m]
                out[m][0][done:done + n] = rank_maps(unit_maps, reduction)
                if self.keep_maps:
                    out[m][1][done:done + n] = _picture_map(unit_maps, reduction)
                out[m][2] += int((~torch.isfinite(maps[m])).sum())
            done += n
            if on_batch is not None:
                on_batch(n)
            # freed before the loader makes the next batch, which then reuses their blocks
            del x, y, index, maps, unit_maps
        if done != shape[0]:  # an empty row would be written as ranks
            raise RuntimeError(f"the loader gave {done} of chunk {chunk.index}'s {shape[0]} rows")
        return {m: tuple(value) for m, value in out.items()}


def _compute_batches(passes, batch: int):
    """(x, y, index) of each compute batch of `batch` images of the passes (x, y, index) a loader yields: a pass
    of one is itself; a pass of several is cut, each piece copied into memory of its own, as a pass of one has it
    (a kernel may take another path for data at another alignment)."""
    for x, y, index in passes:
        whole = x.shape[0] <= batch
        for start in range(0, x.shape[0], batch):
            piece = (x, y, index) if whole else (x[start:start + batch].clone(), y[start:start + batch],
                                                 index[start:start + batch])
            yield piece
            del piece
        del x, y, index  # freed before the loader makes the next pass, which then reuses their blocks


def _batch_maps(groups, params, part, x, y, index) -> dict:
    """{method: float maps [B, C|1, H, W]} of one batch, each (model, selection) group by its model;
    compute_maps finds the predicted class itself, the labels serve --target label."""
    gt = part.masks[index].to(x.device) if part.masks is not None else None
    batch = ExplainBatch(x=x, target=y, index=index, gt_mask=gt)
    maps = {}
    for group_model, group in groups:
        maps.update(compute_maps(group_model, batch, group, params))
    return maps


def _model_groups(models, selection) -> list:
    """[(model, selection)]: the compiled model (when there is one) for the compilable methods."""
    model, compiled = models
    if compiled is None:
        return [(model, selection)]
    fast = [m for m in selection.names if selection.records[m].compilable]
    rest = [m for m in selection.names if not selection.records[m].compilable]
    return [(g_model, selection.only(group)) for g_model, group in ((compiled, fast), (model, rest)) if group]


def _picture_map(maps, reduction):
    """fp16 maps for pictures, reduced over channels the way ranking reduces them."""
    if maps.shape[1] == 1:
        return maps[:, 0].half()
    if reduction == "value":
        return maps.half()
    return ops.reduce_channels(maps.float().contiguous(), reduction).half()


# ------------------------------------------------------------------------------------------- elsewhere

def check_nameable(executor: str, dataset_name: str, model_name: str | None, methods) -> None:
    """Refuses, in one line, an extraction by `executor` (one whose tasks run elsewhere) of something a worker
    cannot rebuild by its name: a Python object given to roarfast.Study without an import path (the data, the
    model or an estimator)."""
    for what, name in (("dataset", dataset_name), ("model", model_name), *(("estimator", m) for m in methods)):
        if isinstance(name, str) and name.startswith(OBJECT_PREFIX):
            raise UserError(f"--executor {executor}: the {what} {name} was a Python object given to roarfast.Study, "
                            f"which a worker on another node cannot rebuild: give it by its import path "
                            f"(package.module:attribute) or extract with the local executor")


def task_settings(view: dict, selection, *, base: str | None, checkpoint: str | None, device: str, threads: int,
                  passes: tuple, amp: str, keep_maps: bool, compile: bool) -> dict:
    """What a worker needs to compute chunks as this process would: what the driver sees of the run directory
    (`view`, worker_view.driver_view: its absolute path, the data's record, which says how to load the data of
    its fingerprint), the base model's id and weights' sha256, the estimators (names, values, arguments,
    ranking, seed, the compute batch the request set, and the identity of each one's ranks, checked there), the
    device type and CPU threads, the images per pass and per compute batch (`passes`, the driver's: the same
    batches wherever a chunk is computed), --amp, keep maps, compile, and the import paths the user named."""
    return {"view": view, "dataset": view["dataset"], "base": base, "checkpoint": checkpoint,
            "methods": selection.names, "values": dict(selection.values), "args": dict(selection.args),
            "granularity": selection.granularity, "reduction": selection.reduction, "seed": selection.seed,
            "compute_batch": selection.compute_batch,
            "identities": {m: selection.ranks_identity(m) for m in selection.names}, "device": device,
            "threads": threads, "passes": list(passes), "amp": amp, "keep_maps": keep_maps, "compile": compile,
            "imports": named_imports()}


def worker_explainer(run_dir: str, settings: dict, node: str | None = None) -> Explainer:
    """The Explainer of `settings` (task_settings) on the run directory `run_dir`, built once per process and
    settings, once this process (on `node`: this_node's) was seen to see the driver's run directory and data
    (worker_view.check_view); a UserError where this node loads other data, weights or estimator code than the
    driver."""
    key = (run_dir, json.dumps(settings, sort_keys=True, default=repr))
    if key not in _EXPLAINERS:
        node = node or this_node()
        run = check_view(run_dir, settings["view"], node)  # before any work: what the driver sees, or one line
        torch.set_num_threads(settings["threads"])
        device = torch.device(settings["device"])
        with user_named(settings["imports"]):  # what the driver's user named: the records may name it here too
            ds = driver_data(run, settings["view"], node)
            selection = Selection(resolve_methods(settings["methods"]), settings["values"], settings["args"],
                                  settings["granularity"], settings["reduction"], settings["seed"],
                                  settings["compute_batch"])
            model = None
            if selection.needs_model:
                model, meta = run.load_base_model(ds, device, settings["base"])
        changed = [m for m in selection.names if selection.ranks_identity(m) != settings["identities"][m]]
        if changed:
            raise UserError(f"{node} runs other code or values for {', '.join(changed)} than the driver: install the "
                            f"same roarfast and plug-ins on every node")
        if model is not None and meta.get("weights_sha256", settings["checkpoint"]) != settings["checkpoint"]:
            raise UserError(f"{node} read other weights for the base model {settings['base']} than the driver: the "
                            f"run directory must be on a filesystem every node mounts at the same path")
        models = (None, None)
        if model is not None:
            model = explained_model(model, device)
            models = (model, torch.compile(model) if settings["compile"] else None)
        params = selection.method_params(ds, device, settings["amp"])
        _EXPLAINERS.clear()
        _EXPLAINERS[key] = Explainer(ds, models, selection, params, tuple(settings["passes"]), device,
                                     settings["keep_maps"])
    return _EXPLAINERS[key]
