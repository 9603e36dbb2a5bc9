"""The extract stage: attribution maps for every image of the train and test splits, ranked on the
device and written chunk by chunk into the rank store of their id (roarfast.history.ids: the method's ranks'
identity, the base checkpoint, the data), beside the stores of other ids (resumable; a no-op on a complete
store, which is reused).
"""

import math
import time
from dataclasses import dataclass, field

from roarfast.errors import UserError
from roarfast.methods.parameters import PARAMETERS, RANKING, check_method_args, parameter_fields
from roarfast.options import check_choice, check_positive
from roarfast.recipe import AMP_CHOICES

#: images per store chunk: the unit of resumption after a kill
CHUNK_IMAGES = 512


@dataclass(frozen=True)
@parameter_fields(PARAMETERS, RANKING)
class ExtractOptions:
    """What to extract and how (the flags of `roarfast extract`); each value is checked here, once. Besides the
    fields below, a field per estimator parameter (samples, noise_level, ig_steps, ig_baseline, target,
    gradcam_layer) and per ranking option (granularity, reduction), named, defaulted and checked as
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

    def __post_init__(self):
        bad = [split for split in self.splits if split not in ("train", "test")]
        if bad:  # before any work, so that `--split train,val` does not extract train first
            raise UserError(f"--split takes train and test, got {bad[0]!r}")
        check_positive("--batch-size", self.batch_size, optional=True)
        for parameter in (*PARAMETERS.values(), *RANKING.values()):
            parameter.check(getattr(self, parameter.name))
        object.__setattr__(self, "method_args", check_method_args(self.method_args))
        check_choice("--amp", self.amp, AMP_CHOICES)


def run_extract(run_dir, options: ExtractOptions, *, dataset=None, data_dir=None, dataset_options=None, device="auto",
                seed=0, progress=True, model=None, dataset_obj=None):
    """Extracts `options.methods` for `options.splits` into run_dir's rank stores of their ids (RunDir.rank_ids),
    beside the others; HEAD's ranks of those methods become these.

    Returns {(method, split): {"images": N, "seconds": s, "nonfinite": count, "skipped": bool}}.
    The dataset defaults to the one `train` recorded in run_dir (RunDir.open_dataset).
    `model` / `dataset_obj` let a caller that already holds them (roarfast run) skip reloading.
    """
    import torch

    from roarfast.device import default_batch_size, resolve_device
    from roarfast.history.migrate import upgrade
    from roarfast.memory import keep_freed_memory
    from roarfast.methods.requirements import check_methods
    from roarfast.methods.selection import Selection
    from roarfast.rundir import RunDir

    keep_freed_memory()
    run = RunDir(run_dir)
    upgrade(run)
    device = resolve_device(device)
    selection = Selection.resolve(options.methods, options, seed)
    ds = dataset_obj if dataset_obj is not None else run.open_dataset(dataset, data_dir, dataset_options)
    ckpt_sha = None
    if selection.needs_model:
        if model is None:
            model, _ = run.load_base_model(ds, device)
        ckpt_sha = run.base_checkpoint_sha256()
        model = explained_model(model, device)
    selection.check_ground_truth(ds.name, ds.train.masks is not None)

    ids = run.rank_ids(selection, ds.fingerprint)
    store = run.ranks_for(ids)
    for line in _beside_lines(run, selection, options):
        print(line)
    run.check_writable(_bytes_to_write(store, ds, selection, options))  # before any map is computed
    params = selection.method_params(ds, device, options.amp)
    for line in check_methods(model, ds, selection, params, device):
        print(line)
    batch_size = options.batch_size or default_batch_size(device, ds.image_size)
    # torch.compile'd passes give the same maps (so compile is not part of the store's params); estimators
    # that hook modules keep the plain model, whose hooks a compiled graph would drop
    compiled = torch.compile(model) if options.compile and model is not None else None
    summary = {}
    for split in options.splits:
        summary.update(_extract_split(store, (model, compiled), ds, split, selection, options, params, batch_size,
                                      ckpt_sha, device, progress))
    run.update_head("roarfast.extract.run_extract()", ranks={**run.head().ranks, **ids})
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


def explained_model(model, device):
    """`model` as extraction runs it: on `device`, in eval mode, channels_last as recipes train it
    (Recipe.channels_last), which oneDNN's and cuDNN's convolutions take faster (benchmarks/cpu_formats.py);
    its maps differ from an NCHW model's by float rounding alone."""
    import torch

    return model.to(device, memory_format=torch.channels_last).eval()


def summary_line(summary: dict, where) -> str:
    """The one line that ends `roarfast extract`, from run_extract's summary: which methods it wrote for which
    splits (how many images each), into `where`, in how long; or that every store was there already."""
    from roarfast.progress import format_duration

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
    import torch

    from roarfast import ops

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


def _extract_split(store, models, ds, split, selection, options, params, batch_size, ckpt_sha, device, progress):
    import torch

    from roarfast import ops
    from roarfast.data.loader import split_loader
    from roarfast.methods.compute import rank_maps
    from roarfast.progress import progress_bar

    part = ds.split(split)
    n = len(part)
    c = part.shape[0]
    rank_shape = _rank_shape(part, options)
    writers = {}
    summary = {}
    for method in selection.names:
        writer = store.open_writer(
            method, split, shape=rank_shape, dtype=ops.rank_dtype(math.prod(rank_shape[1:])),
            chunk_size=CHUNK_IMAGES, params=selection.ranks_identity(method),
            checkpoint_sha256=selection.ranks_checkpoint(method, ckpt_sha), dataset_fingerprint=ds.fingerprint,
            keep_maps=options.keep_maps, force=options.force)
        summary[(method, split)] = {"images": n, "seconds": 0.0, "nonfinite": 0, "skipped": writer.complete}
        if writer.complete:
            writer.close()
        else:
            writers[method] = writer
    if not writers:
        return summary

    loader = split_loader(ds, split, device)
    reduction = selection.reduction
    work = _pending_work(writers)
    todo = sum(hi - lo for _, bounds in work for lo, hi in bounds.values())
    started = time.perf_counter()
    with progress_bar(total=todo, desc=f"extract {split} ({', '.join(writers)})", unit="img",
                      enabled=progress) as bar:
        for wanted, bounds in work:
            chunks = _ChunkRows(bounds, writers[wanted[0]].chunk_size)
            rows = torch.cat([torch.arange(lo, hi) for lo, hi in bounds.values()])
            groups = _model_groups(models, selection.only(wanted))
            for x, y, index in loader.batches(rows, batch_size, with_index=True):
                maps = _batch_maps(groups, params, part, x, y, index.cpu(), device)
                out = {}
                for m in wanted:
                    summary[(m, split)]["nonfinite"] += int((~torch.isfinite(maps[m])).sum())
                    # ranked per value, a one-value-per-pixel map (sobel, oracle) scores a pixel's channels alike
                    unit_maps = maps[m].expand(-1, c, -1, -1) if reduction == "value" else maps[m]
                    out[m] = (rank_maps(unit_maps, reduction).cpu(),
                              _picture_map(unit_maps, reduction).cpu() if options.keep_maps else None)
                for chunk, done in chunks.add(index.cpu(), out):
                    for m, (ranks, pictures) in done.items():
                        writers[m].write_chunk(chunk, ranks, maps=pictures)
                bar.update(index.shape[0])
    seconds = time.perf_counter() - started
    for m, writer in writers.items():
        writer.close()
        summary[(m, split)]["seconds"] = seconds
        if summary[(m, split)]["nonfinite"]:
            print(f"warning: {m} on {split}: {summary[(m, split)]['nonfinite']} NaN/Inf map values, ranked last")
    return summary


def _pending_work(writers) -> list:
    """[(methods, {chunk: (start, stop)})]: the pending chunks grouped by which methods still need them
    (and by chunk size: a resumed store keeps the one it was made with), so each group is one pass."""
    groups = {}
    for m, writer in writers.items():
        for chunk in writer.pending_chunks():
            groups.setdefault((writer.chunk_size, chunk), []).append(m)
    work = {}
    for (size, chunk), wanted in sorted(groups.items()):
        bounds = work.setdefault((size, tuple(wanted)), {})
        bounds[chunk] = writers[wanted[0]].chunk_rows(chunk)
    return [(list(wanted), bounds) for (_, wanted), bounds in work.items()]


def _batch_maps(groups, params, part, x, y, index, device) -> dict:
    """{method: float maps [B, C|1, H, W]} of one batch, each (model, selection) group by its model;
    compute_maps finds the predicted class itself, the labels serve --target label."""
    from roarfast.methods import ExplainBatch, compute_maps

    gt = part.masks[index].to(device) if part.masks is not None else None
    batch = ExplainBatch(x=x, target=y, index=index, gt_mask=gt)
    maps = {}
    for group_model, group in groups:
        maps.update(compute_maps(group_model, batch, group, params))
    return maps


class _ChunkRows:
    """Per-method rank (and picture) rows of store chunks, collected batch by batch (a batch may span two
    chunks); `add` returns the chunks it completed, rows in order, ready to write."""

    def __init__(self, bounds: dict, chunk_size: int):
        self.bounds = bounds
        self.chunk_size = chunk_size
        self.parts = {chunk: [] for chunk in bounds}  # chunk -> [(row index, {method: (ranks, maps)})]
        self.filled = dict.fromkeys(bounds, 0)

    def add(self, index, out: dict):
        import torch

        completed = []
        owner = torch.div(index, self.chunk_size, rounding_mode="floor")
        for chunk in owner.unique().tolist():
            pick = (owner == chunk).nonzero().flatten()
            self.parts[chunk].append((index[pick], {m: tuple(None if t is None else t[pick] for t in pair)
                                                     for m, pair in out.items()}))
            self.filled[chunk] += pick.shape[0]
            lo, hi = self.bounds[chunk]
            if self.filled[chunk] == hi - lo:
                completed.append((chunk, self._assemble(self.parts.pop(chunk))))
        return completed

    @staticmethod
    def _assemble(parts) -> dict:
        import torch

        order = torch.cat([rows for rows, _ in parts]).argsort()
        done = {}
        for m in parts[0][1]:
            ranks = torch.cat([pieces[m][0] for _, pieces in parts])[order]
            maps = None if parts[0][1][m][1] is None else torch.cat([pieces[m][1] for _, pieces in parts])[order]
            done[m] = (ranks, maps)
        return done


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
    from roarfast import ops

    if maps.shape[1] == 1:
        return maps[:, 0].half()
    if reduction == "value":
        return maps.half()
    return ops.reduce_channels(maps.float().contiguous(), reduction).half()
