"""The extract stage's unit of work: one chunk of one split (a rank store's chunk, the unit of resumption), its
maps computed by every method whose store still lacks it and ranked on the device (`Explainer.ranks`), in this
process or, with --executor ray, as a Ray task on a node of the cluster (`RayChunks`). A task rebuilds the
dataset, the base model and the estimators from the run directory (a shared filesystem across nodes) and the
driver's settings (`task_settings`), checking each against what the driver recorded, and computes its chunk
as this process would: the same model in the same memory format, every random draw keyed by its image's index
in the split (roarfast.methods.draws, through each batch's `index`), so the stored bytes depend neither on where
a chunk was computed nor on how the split was cut into chunks and batches (at a given CPU thread count).

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
from dataclasses import dataclass

import torch

from roarfast import ops
from roarfast.data import load_dataset
from roarfast.data.loader import split_loader
from roarfast.errors import UserError
from roarfast.methods import ExplainBatch, compute_maps
from roarfast.methods.compute import rank_maps
from roarfast.methods.registry import resolve_methods
from roarfast.methods.selection import Selection
from roarfast.common.plugins import OBJECT_PREFIX, named_imports, user_named
from roarfast.execution.ray_cluster import RAY_TASK_RETRIES, WAIT_S, connect, local_threads, slots, task_resources
from roarfast.rundir.directory import RunDir

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
    None), the Selection and its MethodParams, the images per pass, the device and whether maps are kept; a
    loader per split, made at its first chunk (an in-memory split may be normalized whole, once)."""

    def __init__(self, ds, models: tuple, selection, params, batch_size: int, device, keep_maps: bool):
        self.ds, self.models, self.selection, self.params = ds, models, selection, params
        self.batch_size, self.device, self.keep_maps = batch_size, device, keep_maps
        self.loaders = {}

    def ranks(self, chunk: Chunk, on_batch=None) -> dict:
        """{method: (ranks, maps or None, NaN/Inf map values)} of `chunk`'s rows in order (CPU tensors), its
        rows taken `batch_size` at a time; `on_batch(images)` after each batch."""
        if chunk.split not in self.loaders:
            self.loaders[chunk.split] = split_loader(self.ds, chunk.split, self.device)
        part = self.ds.split(chunk.split)
        c = part.shape[0]
        reduction = self.selection.reduction
        groups = _model_groups(self.models, self.selection.only(chunk.methods))
        pieces = {m: ([], [], 0) for m in chunk.methods}
        rows = torch.arange(chunk.start, chunk.stop)
        for x, y, index in self.loaders[chunk.split].batches(rows, self.batch_size, with_index=True):
            maps = _batch_maps(groups, self.params, part, x, y, index.cpu())
            for m in chunk.methods:
                ranks, pictures, nonfinite = pieces[m]
                # ranked per value, a one-value-per-pixel map (sobel, oracle) scores a pixel's channels alike
                unit_maps = maps[m].expand(-1, c, -1, -1) if reduction == "value" else maps[m]
                ranks.append(rank_maps(unit_maps, reduction).cpu())
                if self.keep_maps:
                    pictures.append(_picture_map(unit_maps, reduction).cpu())
                pieces[m] = (ranks, pictures, nonfinite + int((~torch.isfinite(maps[m])).sum()))
            if on_batch is not None:
                on_batch(index.shape[0])
        return {m: (torch.cat(ranks), torch.cat(pictures) if pictures else None, nonfinite)
                for m, (ranks, pictures, nonfinite) in pieces.items()}


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


# ------------------------------------------------------------------------------------------------- on Ray

def check_nameable(dataset_name: str, model_name: str | None, methods) -> None:
    """Refuses, in one line, an extraction on Ray of something a worker cannot rebuild by its name: a Python
    object given to roarfast.Study without an import path (the data, the model or an estimator)."""
    for what, name in (("dataset", dataset_name), ("model", model_name), *(("estimator", m) for m in methods)):
        if isinstance(name, str) and name.startswith(OBJECT_PREFIX):
            raise UserError(f"--executor ray: the {what} {name} was a Python object given to roarfast.Study, which "
                            f"a Ray worker cannot rebuild: give it by its import path (package.module:attribute) "
                            f"or extract with the local executor")


def task_settings(ds, selection, *, base: str | None, checkpoint: str | None, device: str, threads: int,
                  batch_size: int, amp: str, keep_maps: bool, compile: bool) -> dict:
    """What a Ray worker needs to compute chunks as this process would: the data (its fingerprint: its record in
    the run directory says how to load it), the base model's id and weights' sha256, the estimators (names,
    values, arguments, ranking, seed, and the identity of each one's ranks, checked there), the device type and
    CPU threads, the images per pass, --amp, keep maps, compile, and the import paths the user named."""
    return {"dataset": ds.fingerprint, "base": base, "checkpoint": checkpoint, "methods": selection.names,
            "values": dict(selection.values), "args": dict(selection.args), "granularity": selection.granularity,
            "reduction": selection.reduction, "seed": selection.seed,
            "identities": {m: selection.ranks_identity(m) for m in selection.names}, "device": device,
            "threads": threads, "batch_size": batch_size, "amp": amp, "keep_maps": keep_maps, "compile": compile,
            "imports": named_imports()}


def worker_explainer(run_dir: str, settings: dict) -> Explainer:
    """The Explainer of `settings` (task_settings) on the run directory `run_dir`, built once per process and
    settings; a UserError where this node loads other data, weights or estimator code than the driver."""
    key = (run_dir, json.dumps(settings, sort_keys=True, default=repr))
    if key not in _EXPLAINERS:
        torch.set_num_threads(settings["threads"])
        device = torch.device(settings["device"])
        run = RunDir(run_dir)
        with user_named(settings["imports"]):  # what the driver's user named: the records may name it here too
            record = run.dataset_record(settings["dataset"])
            ds = load_dataset(record["name"], record["data_dir"], **record["options"])
            selection = Selection(resolve_methods(settings["methods"]), settings["values"], settings["args"],
                                  settings["granularity"], settings["reduction"], settings["seed"])
            model = None
            if selection.needs_model:
                model, meta = run.load_base_model(ds, device, settings["base"])
        if ds.fingerprint != settings["dataset"]:
            raise UserError(f"a Ray worker loaded the data of {run.dataset_record_path(settings['dataset'])} with "
                            f"fingerprint {ds.fingerprint}, the driver's is {settings['dataset']}: the files differ "
                            f"on this node; the run directory and --data-dir must be one shared filesystem")
        changed = [m for m in selection.names if selection.ranks_identity(m) != settings["identities"][m]]
        if changed:
            raise UserError(f"a Ray worker runs other code or values for {', '.join(changed)} than the driver: "
                            f"install the same roarfast and plug-ins on every node")
        if model is not None and meta.get("weights_sha256", settings["checkpoint"]) != settings["checkpoint"]:
            raise UserError(f"a Ray worker read other weights for the base model {settings['base']} than the driver: "
                            f"the run directory must be one shared filesystem")
        models = (None, None)
        if model is not None:
            model = explained_model(model, device)
            models = (model, torch.compile(model) if settings["compile"] else None)
        params = selection.method_params(ds, device, settings["amp"])
        _EXPLAINERS.clear()
        _EXPLAINERS[key] = Explainer(ds, models, selection, params, settings["batch_size"], device,
                                     settings["keep_maps"])
    return _EXPLAINERS[key]


def _ray_chunk(run_dir: str, settings: dict, chunk: Chunk) -> dict:
    """A Ray task: the ranks of `chunk` ({method: (ranks, maps or None, NaN/Inf count)}, numpy arrays) and the
    Ray node that computed them."""
    import ray

    out = worker_explainer(run_dir, settings).ranks(chunk)
    return {"ranks": {m: (ranks.numpy(), None if maps is None else maps.numpy(), nonfinite)
                      for m, (ranks, maps, nonfinite) in out.items()},
            "node": ray.get_runtime_context().get_node_id()}


class RayChunks:
    """Chunks computed as Ray tasks on the cluster of `options` (a roarfast.execution.ray_cluster.RayOptions), each with
    --cpus-per-task CPUs (default: this process's threads, at most the largest node's) and --gpus-per-task GPUs
    (then on CUDA). A task whose worker or node dies runs again elsewhere (RAY_TASK_RETRIES); as many are in
    flight as the live nodes run, counted again as nodes leave or join (with none left, it waits for one)."""

    def __init__(self, options):
        self.ray = connect(options)
        self.cpus, self.gpus = task_resources(self.ray, options.cpus_per_task, options.gpus_per_task, unit="task")
        self.device = torch.device("cuda" if self.gpus > 0 else "cpu")
        self.threads = max(1, int(self.cpus)) if self.gpus == 0 else local_threads()

    def results(self, run_dir: str, settings: dict, chunks: list):
        """Yields (chunk, {method: (ranks, maps or None, NaN/Inf count)}, node id) as the tasks of `chunks`
        finish; a task that raised ends the extraction in one line (the chunks written are kept)."""
        remote = self.ray.remote(num_cpus=self.cpus, num_gpus=self.gpus, max_retries=RAY_TASK_RETRIES,
                                 retry_exceptions=False)(_ray_chunk)
        pending, in_flight = list(chunks), {}
        try:
            while pending or in_flight:
                room = slots(self.ray, self.cpus, self.gpus)
                while pending and len(in_flight) < room:
                    chunk = pending.pop(0)
                    in_flight[remote.remote(run_dir, settings, chunk)] = chunk
                ready, _ = self.ray.wait(list(in_flight), num_returns=1, timeout=WAIT_S)
                for ref in ready:
                    chunk = in_flight.pop(ref)
                    result = self._get(ref, chunk)
                    yield chunk, result["ranks"], result["node"]
        finally:
            for ref in in_flight:  # an interrupted or failed extraction leaves nothing computing
                self.ray.cancel(ref, force=True)

    def _get(self, ref, chunk: Chunk) -> dict:
        """The task's result; its exception as one line (a UserError as it was raised)."""
        try:
            return self.ray.get(ref)
        except self.ray.exceptions.RayTaskError as err:
            cause = getattr(err, "cause", None) or err
        except self.ray.exceptions.RayError as err:
            cause = err
        if isinstance(cause, UserError):
            raise UserError(str(cause)) from None
        first = str(cause).strip().splitlines()[-1] if str(cause).strip() else ""
        raise UserError(f"extract on Ray: {chunk.describe()} failed ({type(cause).__name__}: {first}); the chunks "
                        f"written are kept, and the same command goes on with the rest") from None
