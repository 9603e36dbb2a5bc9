"""The extract stage: attribution maps for every image of the train and test splits, ranked on the
device and written chunk by chunk into the rank store of their id (roarfast.records.ids: the method's ranks'
identity, the base checkpoint, the data), beside the stores of other ids (resumable; a no-op on a complete
store, which is reused). The chunks left are computed here, or as Ray tasks on a cluster's nodes, and written
here, by the store's one writer, as each comes back (roarfast.stages.extract_tasks says why).
"""

import math
import time
from contextlib import closing
from dataclasses import dataclass, field

import torch

from roarfast import ops
from roarfast.common.device import resolve_device
from roarfast.errors import UserError
from roarfast.stages.extract_tasks import Chunk, Explainer, check_nameable, explained_model, task_settings
from roarfast.stages.worker_view import driver_view
from roarfast.methods.batches import compute_batch, whole_batches
from roarfast.methods.parameters import PARAMETERS, RANKING, check_method_args, parameter_fields
from roarfast.methods.requirements import check_methods
from roarfast.methods.selection import Selection
from roarfast.common.options import check_choice, check_positive
from roarfast.common.progress import format_duration, progress_bar
from roarfast.recipe import AMP_CHOICES
from roarfast.rundir.writing import open_for_writing

#: images per store chunk: the unit of resumption after a kill
CHUNK_IMAGES = 512


@dataclass(frozen=True)
@parameter_fields(PARAMETERS, RANKING)
class ExtractOptions:
    """What to extract and how (the flags of `roarfast extract`); each value is checked here, once. Besides the
    fields below, a field per estimator parameter (samples, noise_level, ig_steps, ig_baseline, target,
    gradcam_layer) and per ranking option (granularity, reduction, and compute_batch: the images the estimators take
    at once, roarfast.methods.batches), named, defaulted and checked as
    roarfast.methods.parameters says; `method_args` (--method-arg NAME=VALUE) set any parameter an estimator
    reads, winning over the fields, or an argument it takes (a Captum class's, a plug-in's keyword). A stage
    resolves the methods with these values into a roarfast.methods.selection.Selection."""

    methods: str = "sg-sq"
    splits: tuple = ("train", "test")
    batch_size: int | None = None
    method_args: dict = field(default_factory=dict)
    amp: str = "auto"
    keep_maps: bool = False
    force: bool = False
    compile: bool = False
    chunk_images: int | None = None  # a new store's chunk: CHUNK_IMAGES when None (a resumed one keeps its own)

    def __post_init__(self):
        bad = [split for split in self.splits if split not in ("train", "test")]
        if bad:  # before any work, so that `--split train,val` does not extract train first
            raise UserError(f"--split takes train and test, got {bad[0]!r}")
        check_positive("--batch-size", self.batch_size, optional=True)
        check_positive("--chunk-images", self.chunk_images, optional=True)
        for parameter in (*PARAMETERS.values(), *RANKING.values()):
            parameter.check(getattr(self, parameter.name))
        object.__setattr__(self, "method_args", check_method_args(self.method_args))
        check_choice("--amp", self.amp, AMP_CHOICES)

    def chunk_rows(self, batch: int) -> int:
        """Rows of a new store's chunk: chunk_images, else CHUNK_IMAGES, rounded up to whole compute batches of
        `batch` images."""
        return whole_batches(self.chunk_images or CHUNK_IMAGES, batch)

    def pass_images(self, batch: int) -> int:
        """Images a pass reads at once: batch_size rounded to whole compute batches of `batch` images (at least
        one), else one compute batch."""
        return max(1, round((self.batch_size or batch) / batch)) * batch

    def cut_lines(self, batch: int, where: str) -> list[str]:
        """A line per flag of this cut that was rounded to whole compute batches of `batch` images (`where`: the
        device and image size they are the default of, or the flag that set them)."""
        why = (f"whole compute batches of {batch} images ({where}), so that the ranks are the same bytes however "
               f"the work is cut")
        lines = []
        if self.batch_size is not None and self.pass_images(batch) != self.batch_size:
            lines.append(f"extract: --batch-size {self.batch_size} taken as {self.pass_images(batch)}: a pass reads "
                         f"{why}")
        if self.chunk_images is not None and self.chunk_rows(batch) != self.chunk_images:
            lines.append(f"extract: --chunk-images {self.chunk_images} rounded up to {self.chunk_rows(batch)}: a "
                         f"new store's chunk holds {why}")
        return lines


def run_extract(run_dir, options: ExtractOptions, *, dataset=None, data_dir=None, dataset_options=None, device="auto",
                seed=0, progress=True, model=None, dataset_obj=None, executor=None, selection=None):
    """Extracts `options.methods` for `options.splits` into run_dir's rank stores of their ids (RunDir.rank_ids),
    beside the others; HEAD's ranks of those methods become these. `executor`: where the chunks left are
    computed (an Executor, roarfast.stages.executor, made by the caller from the user's --executor; None: here);
    on Ray each is a task on the cluster, written here as it comes back. `selection`: the estimators as the caller
    resolved them (a roarfast.methods.selection.Selection: a sweep's), else options.methods resolved here, once.

    Returns {(method, split): {"images": N, "seconds": s, "nonfinite": count, "skipped": bool}}.
    The dataset defaults to the one `train` recorded in run_dir (RunDir.open_dataset).
    `model` / `dataset_obj` let a caller that already holds them (roarfast run) skip reloading.
    """
    run = open_for_writing(run_dir)
    device = resolve_device(device)
    if selection is None:
        selection = Selection.resolve(options.methods, options, seed)
    ds = dataset_obj if dataset_obj is not None else run.open_dataset(dataset, data_dir, dataset_options)
    ckpt_sha = None
    if selection.needs_model:
        if model is None:
            model, _ = run.load_base_model(ds, device)
        ckpt_sha = run.base_checkpoint_sha256()
        model = explained_model(model, device)
    selection.check_ground_truth(ds.name, ds.train.masks is not None)
    if executor is not None and executor.remote:  # before any work: what a worker cannot rebuild
        check_nameable(executor.name, ds.name, run.base_meta().get("model") if selection.needs_model else None,
                       selection.names)
    # before any work too: a cluster that cannot run a task says so
    cluster = executor.chunk_runner() if executor is not None else None
    if cluster is not None and cluster.note:
        print(cluster.note)

    ids = run.rank_ids(selection, ds.fingerprint)
    store = run.ranks_for(ids)
    for line in _beside_lines(run, selection, options):
        print(line)
    # the compute batch of the device that computes (a Ray task's, on Ray): chunks and passes hold whole ones
    computing = cluster.device if cluster is not None else device
    batch = compute_batch(selection, computing, ds.image_size)
    # before any map is computed; an extraction that finds every store in place writes nothing (so its answer may
    # be kept: roarfast.common.kept)
    if options.force or store.incomplete(selection.names, options.splits):
        run.check_writable(_bytes_to_write(store, ds, selection, options))
    params = selection.method_params(ds, device, options.amp)
    for line in check_methods(model, ds, selection, params, device):
        print(line)
    summary, writers = _open_writers(store, ds, selection, options, ckpt_sha, batch)
    try:
        chunks = _pending_chunks(writers, options.splits)
        if chunks:
            where = "--compute-batch" if selection.compute_batch else f"{computing.type} at {ds.image_size} px"
            for line in [*options.cut_lines(batch, where), *_unaligned_lines(writers, batch)]:
                print(line)
        passes = (options.pass_images(batch), batch)
        if cluster is not None:
            run.remember_dataset(ds)  # the record a worker loads the data by
            base = run.head().base if selection.needs_model else None
            view = driver_view(run, ds, base)  # the absolute run directory, and what a worker checks it sees
            settings = task_settings(view, selection, base=base, checkpoint=ckpt_sha, device=cluster.device.type,
                                     threads=cluster.threads, passes=passes, amp=options.amp,
                                     keep_maps=options.keep_maps, compile=options.compile)
            results = cluster.results(view["run_dir"], settings, chunks)
        else:
            # torch.compile'd passes give the same maps (so compile is not part of the store's params); estimators
            # that hook modules keep the plain model, whose hooks a compiled graph would drop
            compiled = torch.compile(model) if options.compile and model is not None else None
            results = Explainer(ds, (model, compiled), selection, params, passes, device, options.keep_maps).ranks
        _compute(chunks, results, writers, summary, progress, cluster.threads if cluster is not None else None)
    finally:
        for writer in writers.values():
            writer.close()
    recorded = run.head().ranks
    ranks = {**recorded, **ids}
    if ranks != recorded:  # HEAD records a request that changed what it names, with its command and time
        run.update_head("roarfast.stages.extract.run_extract()", ranks=ranks)
    return summary


def _beside_lines(run, selection, options: ExtractOptions) -> list[str]:
    """A line per method whose latest ranks (HEAD's) were made with other values than these: the new ones are
    made beside them, which stay (a request with the old values reuses them)."""
    head = run.head()
    lines = []
    for method in selection.names:
        rid = head.ranks.get(method)
        store = run.ranks_for({method: rid}) if rid else None
        try:
            manifest = next(filter(None, (store.manifest(method, s) for s in options.splits)), None) if store else None
        except UserError:  # damaged: what --force repairs, or a reader refuses
            manifest = None
        change = selection.ranks_change(method, manifest, None)
        if change:
            lines.append(f"extract: {method} with other values than its latest ranks ({change}): made beside them, "
                         f"which are kept")
    return lines


def summary_line(summary: dict, where) -> str:
    """The one line that ends `roarfast extract`, from run_extract's summary: which methods it wrote for which
    splits (how many images each), into `where`, in how long; or that every store was there already."""
    written = {key: value for key, value in summary.items() if not value["skipped"]}
    if not written:
        methods = list(dict.fromkeys(m for m, _ in summary))
        splits = list(dict.fromkeys(s for _, s in summary))
        return (f"extract: nothing to do: the ranks of {', '.join(methods)} for {' and '.join(splits)} are already in "
                f"{where} (--force makes them again)")
    methods = list(dict.fromkeys(m for m, _ in written))
    images = {split: value["images"] for (_, split), value in written.items()}
    # the methods of a split are extracted in one pass: its time is counted once
    seconds = sum(max(v["seconds"] for (_, s), v in written.items() if s == split) for split in images)
    kept = list(dict.fromkeys(m for (m, _), value in summary.items() if value["skipped"] and m not in methods))
    return (f"extract: wrote the ranks of {', '.join(methods)} for "
            f"{' and '.join(f'{split} ({n:,} images)' for split, n in images.items())} into {where} in "
            f"{format_duration(seconds)}" + (f"; {', '.join(kept)} already there" if kept else ""))


def _rank_shape(part, options: ExtractOptions) -> tuple:
    """The store shape of a split's ranks: [N, H, W] per pixel, [N, C, H, W] per value."""
    c, h, w = part.shape
    return (len(part), c, h, w) if options.granularity == "value" else (len(part), h, w)


def _bytes_to_write(store, ds, selection, options: ExtractOptions) -> int:
    """Bytes of the stores this extraction writes (ranks, and maps when kept), incomplete ones counted whole."""
    total = 0
    for split in options.splits:
        shape = _rank_shape(ds.split(split), options)
        units = math.prod(shape[1:])
        maps = 2 if options.keep_maps else 0  # float16 maps (store.MAPS_DTYPE)
        row = units * (torch.empty((), dtype=ops.rank_dtype(units)).element_size() + maps)
        for method in selection.names:
            manifest = None if options.force else store.manifest(method, split)  # --force repairs a damaged one
            if manifest is None or not manifest["complete"]:
                total += shape[0] * row
    return total




def _open_writers(store, ds, selection, options: ExtractOptions, ckpt_sha, batch: int) -> tuple:
    """(summary, writers): each (method, split)'s summary entry, and the writers {(method, split): RankWriter} of
    the stores not yet complete (new, with chunks of whole compute batches of `batch` images, or resumed), each
    holding its store's lock until closed."""
    summary, writers = {}, {}
    try:
        for split in options.splits:
            rank_shape = _rank_shape(ds.split(split), options)
            for method in selection.names:
                writer = store.open_writer(
                    method, split, shape=rank_shape, dtype=ops.rank_dtype(math.prod(rank_shape[1:])),
                    chunk_size=options.chunk_rows(batch), params=selection.ranks_identity(method),
                    checkpoint_sha256=selection.ranks_checkpoint(method, ckpt_sha),
                    dataset_fingerprint=ds.fingerprint, keep_maps=options.keep_maps, force=options.force)
                summary[(method, split)] = {"images": rank_shape[0], "seconds": 0.0, "nonfinite": 0,
                                            "skipped": writer.complete}
                if writer.complete:
                    writer.close()
                else:
                    writers[(method, split)] = writer
    except BaseException:
        for writer in writers.values():
            writer.close()
        raise
    return summary, writers


def _unaligned_lines(writers: dict, batch: int) -> list[str]:
    """A line per store resumed with chunks that are not whole compute batches of `batch` images (begun by an
    earlier release, or on another device kind): its chunks left are computed from their first image on."""
    lines = []
    for (method, split), writer in writers.items():
        if writer.chunk_size % batch:
            lines.append(f"extract: {method}'s {split} store was begun with chunks of {writer.chunk_size} images, not "
                         f"whole compute batches of {batch}: its chunks left are computed in batches cut at their "
                         f"bounds, whose maps may round otherwise (--force makes it again)")
    return lines


def _pending_chunks(writers: dict, splits) -> list:
    """The chunks left ([Chunk]), split by split in row order, each once for every method whose store lacks it
    (stores of one chunk size together: a resumed store keeps the one it was made with)."""
    groups = {}
    for (method, split), writer in writers.items():
        for index in writer.pending_chunks():
            groups.setdefault((splits.index(split), writer.chunk_size, index), []).append(method)
    chunks = []
    for (order, _, index), methods in sorted(groups.items(), key=lambda item: (item[0][0], item[0][2], item[0][1])):
        start, stop = writers[(methods[0], splits[order])].chunk_rows(index)
        chunks.append(Chunk(splits[order], index, start, stop, tuple(methods)))
    return chunks


def _compute(chunks: list, results, writers: dict, summary: dict, progress: bool, threads: int | None) -> None:
    """Writes each chunk's ranks as it comes: `results` is the local Explainer's `ranks(chunk, on_batch)`, or the
    Ray tasks' (chunk, ranks, node) as they finish, each computed with `threads` CPU threads. A split's seconds are
    the time spent until its chunks came; on Ray, a line says how many chunks each node computed, and with how many
    threads."""
    if not chunks:
        return
    splits = list(dict.fromkeys(c.split for c in chunks))
    methods = list(dict.fromkeys(m for c in chunks for m in c.methods))
    nodes = {}
    with progress_bar(total=sum(c.stop - c.start for c in chunks), desc=f"extract {', '.join(splits)} "
                      f"({', '.join(methods)})", unit="img", enabled=progress) as bar:
        if callable(results):  # computed here, one chunk after another
            explain = results
            results = ((chunk, explain(chunk, bar.update), None) for chunk in chunks)
        last = time.perf_counter()
        with closing(results):
            for chunk, out, node in results:
                for m in chunk.methods:
                    ranks, maps, nonfinite = out[m]
                    writers[(m, chunk.split)].write_chunk(chunk.index, ranks, maps=maps)
                    summary[(m, chunk.split)]["nonfinite"] += nonfinite
                del out, ranks, maps  # written: not held while the next chunk is computed
                now = time.perf_counter()
                for m in chunk.methods:
                    summary[(m, chunk.split)]["seconds"] += now - last
                last = now
                if node is not None:
                    nodes[node] = nodes.get(node, 0) + 1
                    bar.update(chunk.stop - chunk.start)
    if nodes:
        print(f"extract: {len(chunks)} chunk(s) on Ray, {threads} thread(s) each: "
              + ", ".join(f"{count} on node {node[:8]}" for node, count in sorted(nodes.items())))
    for (m, split), value in summary.items():
        if value["nonfinite"]:
            print(f"warning: {m} on {split}: {value['nonfinite']} NaN/Inf map values, ranked last")
