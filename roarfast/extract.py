"""The extract stage: attribution maps for every image of the train and test splits, ranked on the
device and written chunk by chunk into the rank store (resumable; a no-op on a complete store).
"""

import json
import math
import time
from dataclasses import dataclass, field

from roarfast.errors import UserError
from roarfast.methods.parameters import PARAMETERS, RANKING, check_method_args
from roarfast.options import check_choice, check_positive
from roarfast.recipe import AMP_CHOICES

#: images per store chunk: the unit of resumption after a kill
CHUNK_IMAGES = 512
#: train images a plug-in or Captum estimator is tried on before any store is written (shape, NaN, arguments)
PROBE_IMAGES = 2


@dataclass(frozen=True)
class ExtractOptions:
    """What to extract and how (the flags of `roarfast extract`); each value is checked here, once. The
    estimator parameters (samples, noise level, IG steps and baseline, target, Grad-CAM layer) and the ranking
    options (granularity, reduction) take their defaults and checks from roarfast.methods.parameters;
    `method_args` (--method-arg NAME=VALUE) set any parameter an estimator reads, winning over the fields, or
    an argument it takes (a Captum class's, a plug-in's keyword)."""

    methods: str = "sg-sq"
    splits: tuple = ("train", "test")
    batch_size: int | None = None
    samples: int = PARAMETERS["samples"].default
    noise_level: float = PARAMETERS["noise_level"].default
    ig_steps: int = PARAMETERS["ig_steps"].default
    ig_baseline: object = PARAMETERS["ig_baseline"].default
    target: str = PARAMETERS["target"].default
    granularity: str = RANKING["granularity"].default
    reduction: str = RANKING["reduction"].default
    gradcam_layer: str | None = PARAMETERS["gradcam_layer"].default
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

    def shared_values(self) -> dict:
        """The shared estimator parameters' values: the fields, or the --method-arg values that name them."""
        values = {name: getattr(self, name) for name in PARAMETERS}
        values.update({name: value for name, value in self.method_args.items() if name in PARAMETERS})
        return values


def model_free(method: str) -> bool:
    """Whether a method's ranks ignore the trained model (its record says so: random, sobel, oracle): stored
    without a checkpoint hash, computed without loading one."""
    from roarfast.methods import registry

    return not registry.get(method).uses_model


def default_batch_size(device, image_size: int) -> int:
    """Images per forward/backward: the ensemble multiplies it by its samples, chunked inside."""
    if device.type == "cuda":
        return 512 if image_size <= 64 else 64
    return 256 if image_size <= 64 else 16


def rank_reduction(options: ExtractOptions) -> str:
    return "value" if options.granularity == "value" else options.reduction


def method_params(options: ExtractOptions, seed: int, device, ds):
    from roarfast.methods import MethodParams
    from roarfast.methods.params import black_baseline
    from roarfast.recipe import autocast_dtype

    values = options.shared_values()
    baseline = values["ig_baseline"]
    return MethodParams(noise_level=values["noise_level"], n_samples=values["samples"], ig_steps=values["ig_steps"],
                        ig_baseline=black_baseline(ds.mean, ds.std) if baseline == "black" else tuple(baseline),
                        target=values["target"], gradcam_layer=values["gradcam_layer"],
                        autocast_dtype=autocast_dtype(options.amp, device), seed=seed,
                        args={k: v for k, v in options.method_args.items() if k not in PARAMETERS})


def store_params(method: str, options: ExtractOptions, seed: int) -> dict:
    """What makes one method's ranks what they are, read from its record (never from its name): the parameters
    it reads with their values and the arguments it was given, the identity of its code, the seed only where
    it draws random numbers (so a new seed reuses e.g. sobel's ranks), and how its maps are ranked. A resumed
    or reused store must record the same (provenance_change)."""
    from roarfast.methods import registry

    record = registry.get(method)
    params = {"granularity": options.granularity, "reduction": rank_reduction(options)}
    if record.seeded:
        params["seed"] = seed
    params["parameters"] = record.values(options.shared_values(), options.method_args)
    params["code"] = dict(record.code)
    return params


def provenance_change(manifest: dict | None, params: dict, checkpoint_sha256: str | None) -> str | None:
    """What differs between the provenance a store records (its manifest) and `params` / the checkpoint it
    would be made from now, in one line ("ig_steps 2 -> 20"); None when nothing does (or there is no store)."""
    from roarfast.fingerprint import canonical_json

    if manifest is None:
        return None
    changes = [f"{name} {_short(old)} -> {_short(new)}"
               for name, old, new in _differences(manifest.get("params"), json.loads(canonical_json(params)))]
    if checkpoint_sha256 is not None and manifest.get("checkpoint_sha256") != checkpoint_sha256:
        changes.append(f"base checkpoint {_short(manifest.get('checkpoint_sha256'))} -> {_short(checkpoint_sha256)}")
    return "; ".join(changes) or None


def ranks_to_make(run, methods, options: ExtractOptions, seed: int) -> list[str]:
    """The `methods` whose ranks run_extract would make: missing or incomplete in a split of options.splits, or
    recorded with another provenance (parameters, arguments, code, seed, base checkpoint) than `options` and
    `seed` make now. The sweep extracts these."""
    from roarfast.methods.registry import check_arguments

    check_arguments(methods, options.method_args)
    checkpoint = run.base_checkpoint_sha256() if not all(model_free(m) for m in methods) else None
    out = []
    for method in methods:
        params = store_params(method, options, seed)
        for split in options.splits:
            manifest = run.rank_store.manifest(method, split)
            if manifest is None or not manifest["complete"] or provenance_change(
                    manifest, params, None if model_free(method) else checkpoint):
                out.append(method)
                break
    return out


def options_for(options: ExtractOptions, methods) -> ExtractOptions:
    """`options` for extracting `methods` alone: their names, and the --method-arg values they take."""
    from dataclasses import replace

    from roarfast.methods import registry

    records = [registry.get(m) for m in methods]
    args = {k: v for k, v in options.method_args.items() if any(r.takes(k) for r in records)}
    return replace(options, methods=",".join(methods), method_args=args)


def _differences(recorded, requested, path: str = ""):
    """(name, recorded, requested) of every value that differs, nested mappings walked (the estimator's
    parameters named alone: "ig_steps", not "parameters.ig_steps")."""
    if isinstance(recorded, dict) and isinstance(requested, dict):
        for key in sorted(set(recorded) | set(requested), key=str):
            name = key if path in ("", "parameters") else f"{path}.{key}"
            yield from _differences(recorded.get(key), requested.get(key), name)
    elif recorded != requested:
        yield path, recorded, requested


def _short(value) -> str:
    text = "none" if value is None else json.dumps(value) if not isinstance(value, str) else value
    return text if len(text) <= 40 else text[:37] + "..."


def rank_maps(maps, reduction: str):
    """float maps [B,C,H,W] (or [B,1,H,W]) -> ranks; single-channel maps rank their pixels directly."""
    from roarfast import ops

    if reduction == "value" or maps.shape[1] != 1:
        return ops.rank(maps.float().contiguous(), reduction)
    return ops.rank(maps[:, 0].float().contiguous(), "none")


def run_extract(run_dir, options: ExtractOptions, *, dataset=None, data_dir=None, dataset_options=None, device="auto",
                seed=0, progress=True, model=None, dataset_obj=None):
    """Extracts `options.methods` for `options.splits` into run_dir's rank store.

    Returns {(method, split): {"images": N, "seconds": s, "nonfinite": count, "skipped": bool}}.
    The dataset defaults to the one `train` recorded in run_dir (RunDir.open_dataset).
    `model` / `dataset_obj` let a caller that already holds them (roarfast run) skip reloading.
    """
    import torch

    from roarfast.device import resolve_device
    from roarfast.memory import keep_freed_memory
    from roarfast.methods import parse_methods, registry
    from roarfast.rundir import RunDir

    keep_freed_memory()
    run = RunDir(run_dir)
    device = resolve_device(device)
    try:
        methods = parse_methods(options.methods)
    except ValueError as err:
        raise UserError(str(err)) from None
    registry.check_arguments(methods, options.method_args)
    ds = dataset_obj if dataset_obj is not None else run.open_dataset(dataset, data_dir, dataset_options)
    needs_model = not all(model_free(m) for m in methods)
    ckpt_sha = None
    if needs_model:
        if model is None:
            model, _ = run.load_base_model(ds, device)
        ckpt_sha = run.base_checkpoint_sha256()
        model = explained_model(model, device)
    check_ground_truth(methods, ds.name, ds.train.masks is not None)

    store = run.rank_store
    stale = _stale_stores(store, methods, options, seed, ckpt_sha)
    run.check_writable(_bytes_to_write(store, ds, methods, options, stale))  # before any map is computed
    params = method_params(options, seed, device, ds)
    for line in check_methods(model, ds, methods, params, device):
        print(line)
    batch_size = options.batch_size or default_batch_size(device, ds.image_size)
    # torch.compile'd passes give the same maps (so compile is not part of the store's params); estimators
    # that hook modules keep the plain model, whose hooks a compiled graph would drop
    compiled = torch.compile(model) if options.compile and model is not None else None
    summary = {}
    for split in options.splits:
        summary.update(_extract_split(store, (model, compiled), ds, split, methods, options, params, batch_size, seed,
                                      ckpt_sha, stale, device, progress))
    return summary


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


def _stale_stores(store, methods, options: ExtractOptions, seed: int, ckpt_sha) -> dict:
    """{(method, split): what changed} of the stores recorded with another provenance than this extraction
    makes (unless --force starts them over anyway): each is made again, and says why in one line."""
    stale = {}
    for method in methods:
        params = store_params(method, options, seed)
        for split in options.splits:
            change = None if options.force else provenance_change(
                store.manifest(method, split), params, None if model_free(method) else ckpt_sha)
            if change:
                stale[(method, split)] = change
    return stale


def check_ground_truth(methods, dataset_name: str, ground_truth: bool) -> None:
    """Refuses (UserError) the methods that read ground-truth masks (oracle) when the dataset has none: before
    any stage, so that a sweep says so before it trains a base model."""
    from roarfast.methods import registry

    masked = [repr(m) for m in methods if registry.get(m).ground_truth]
    if masked and not ground_truth:
        raise UserError(f"dataset {dataset_name} has no ground-truth masks, so it has no {', '.join(masked)} method; "
                        f"leave it out of --method")


def check_methods(model, ds, methods, params, device) -> list[str]:
    """Refuses (UserError), before any store is written, methods the model cannot serve
    (roarfast.methods.requirements: ReLU modules for guided backprop, a conv layer for Grad-CAM) and estimators
    from outside roarfast (plug-ins, Captum classes) that fail on the first PROBE_IMAGES train images (wrong
    shape, not finite, an argument missing). Returns the lines to print once (the Grad-CAM layer chosen)."""
    import torch

    from roarfast.data.loader import split_loader
    from roarfast.methods import ExplainBatch, compute_maps, registry
    from roarfast.methods.requirements import check_model
    from roarfast.resolver import BUILTIN

    registry.check_required(methods, params.args)
    explained = [m for m in methods if not model_free(m)]
    notes = check_model(model, explained, params.gradcam_layer) if explained else []
    outside = [m for m in explained if registry.get(m).form != BUILTIN]
    if outside:
        rows = torch.arange(min(PROBE_IMAGES, len(ds.train)))
        x, y, index = next(split_loader(ds, "train", device).batches(rows, rows.shape[0], with_index=True))
        compute_maps(model, ExplainBatch(x=x, target=y, index=index.cpu()), outside, params)
    return notes


def _rank_shape(part, options: ExtractOptions) -> tuple:
    """The store shape of a split's ranks: [N, H, W] per pixel, [N, C, H, W] per value."""
    c, h, w = part.shape
    return (len(part), c, h, w) if options.granularity == "value" else (len(part), h, w)


def _bytes_to_write(store, ds, methods, options: ExtractOptions, stale: dict) -> int:
    """Bytes of the stores this extraction writes (ranks, and maps when kept), incomplete and stale ones counted
    whole."""
    import torch

    from roarfast import ops

    total = 0
    for split in options.splits:
        shape = _rank_shape(ds.split(split), options)
        units = math.prod(shape[1:])
        maps = 2 if options.keep_maps else 0  # float16 maps (store.MAPS_DTYPE)
        row = units * (torch.empty((), dtype=ops.rank_dtype(units)).element_size() + maps)
        for method in methods:
            manifest = None if options.force else store.manifest(method, split)  # --force repairs a damaged one
            if manifest is None or not manifest["complete"] or (method, split) in stale:
                total += shape[0] * row
    return total


def _extract_split(store, models, ds, split, methods, options, params, batch_size, seed, ckpt_sha, stale, device,
                   progress):
    import torch

    from roarfast import ops
    from roarfast.data.loader import split_loader
    from roarfast.progress import progress_bar

    part = ds.split(split)
    n = len(part)
    c = part.shape[0]
    rank_shape = _rank_shape(part, options)
    writers = {}
    summary = {}
    for method in methods:
        change = stale.get((method, split))
        if change:
            print(f"extract: {method} {split} was made with other values ({change}): extracting it again")
        writer = store.open_writer(
            method, split, shape=rank_shape, dtype=ops.rank_dtype(math.prod(rank_shape[1:])),
            chunk_size=CHUNK_IMAGES, params=store_params(method, options, seed),
            checkpoint_sha256=None if model_free(method) else ckpt_sha, dataset_fingerprint=ds.fingerprint,
            keep_maps=options.keep_maps, force=options.force or change is not None)
        summary[(method, split)] = {"images": n, "seconds": 0.0, "nonfinite": 0, "skipped": writer.complete}
        if writer.complete:
            writer.close()
        else:
            writers[method] = writer
    if not writers:
        return summary

    loader = split_loader(ds, split, device)
    reduction = rank_reduction(options)
    work = _pending_work(writers)
    todo = sum(hi - lo for _, bounds in work for lo, hi in bounds.values())
    started = time.perf_counter()
    with progress_bar(total=todo, desc=f"extract {split} ({', '.join(writers)})", unit="img",
                      enabled=progress) as bar:
        for wanted, bounds in work:
            chunks = _ChunkRows(bounds, writers[wanted[0]].chunk_size)
            rows = torch.cat([torch.arange(lo, hi) for lo, hi in bounds.values()])
            for x, y, index in loader.batches(rows, batch_size, with_index=True):
                maps = _batch_maps(models, part, x, y, index.cpu(), wanted, params, device)
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


def _batch_maps(models, part, x, y, index, methods, params, device) -> dict:
    """{method: float maps [B, C|1, H, W]} of one batch; compute_maps finds the predicted class itself, the
    labels serve --target label."""
    from roarfast.methods import ExplainBatch, compute_maps

    gt = part.masks[index].to(device) if part.masks is not None else None
    batch = ExplainBatch(x=x, target=y, index=index, gt_mask=gt)
    maps = {}
    for group_model, group in _model_groups(models, methods):
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


def _model_groups(models, methods):
    """[(model, methods)] with the compiled model (when there is one) for the compilable methods."""
    from roarfast.methods import registry

    model, compiled = models
    if compiled is None:
        return [(model, methods)]
    fast = [m for m in methods if registry.get(m).compilable]
    rest = [m for m in methods if not registry.get(m).compilable]
    return [(g_model, group) for g_model, group in ((compiled, fast), (model, rest)) if group]


def _picture_map(maps, reduction):
    """fp16 maps for pictures, reduced over channels the way ranking reduces them."""
    from roarfast import ops

    if maps.shape[1] == 1:
        return maps[:, 0].half()
    if reduction == "value":
        return maps.half()
    return ops.reduce_channels(maps.float().contiguous(), reduction).half()
