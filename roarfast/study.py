"""roarfast.Study: a ROAR study from Python (a notebook), through the functions the command line calls.

    from roarfast import Study
    study = Study("runs/mine", model=MyNet(10), dataset=(train, test), methods=["grad", my_saliency],
                  fractions=(0.3, 0.7), modes=("roar", "kar"), seeds=3)
    cells = study.run()          # base model, ranks, every retraining cell (resumable): its configuration's, a DataFrame
    study.evaluate(["morf", "lerf"])
    report = study.report()      # report.index_html, report.verdict_lines(): the latest run()'s configuration
    study.configurations()       # what the run directory keeps (roarfast ls); study.report(config="all")

In a notebook a Study displays what run() would do (its preview: grid, cells done and to do, estimated time;
study.preview() is that plan, printed as `sweep --dry-run` prints it) and a report displays its page inline.

`model`, `dataset` and the methods take what the command line takes (names, `package.module:attribute`,
timm:, torchvision:) and Python objects besides. An object with an import path is recorded under it, so
`roarfast ... --run-dir` goes on with the run; one without (a notebook's class, an nn.Module instance, a
pair of tensors) is recorded as object:<name>, and a later command line says to pass it to a Study again.
"""

import os
from collections.abc import Mapping
from dataclasses import replace

from roarfast.stages.basemodel import TrainOptions, adopted_model, base_spec, run_train
from roarfast.stages.cells import cell_estimators
from roarfast.data import load_dataset
from roarfast.common.device import resolve_device
from roarfast.stages.extract import ExtractOptions
from roarfast.stages.fill_leakage import FillLeakageOptions, run_fill_leakage
from roarfast.fills import DEFAULT_FILL, ROAD_FILL
from roarfast.records.head import set_command
from roarfast.rundir.inventory import listing
from roarfast.rundir.labels import check_name
from roarfast.methods.selection import Selection
from roarfast.stages.noretrain import NoRetrainOptions, run_noretrain
from roarfast.common.options import MAX_SEEDS, check_positive, check_seed, check_types, parse_list
from roarfast.errors import UserError
from roarfast.common.plugins import user_named
from roarfast.common.run_options import CellLayout, RunOptions
from roarfast.data.options import DataOptions
from roarfast.planning.grid_options import GridOptions
from roarfast.planning.preview import preview_sweep
from roarfast.models.probe import checked_model
from roarfast.stages.executor import Executor
from roarfast.execution.registry import EXECUTORS, ExecutorOptions
from roarfast.report import write_report
from roarfast.results import load
from roarfast.rundir.directory import RunDir
from roarfast.orchestration.seeds_auto import run_seeds_auto
from roarfast.orchestration.sweep import run_sweep
from roarfast.stats.levels import margin_of


def _check_arguments(run_dir, methods, fractions, modes, seeds, fill, device, preset, dataset_options, epochs, recipe,
                     control, control_seeds, method_args, seed, progress, executor, trust_run_dir, name) -> None:
    """Study's arguments checked by type, each refused in one line naming it (their values are checked where the
    command line's are)."""
    none, texts = type(None), (str, list, tuple)
    check_types({
        "run_dir": (run_dir, (str, os.PathLike), "a path"),
        "methods": (methods, (none, str, list, tuple, Mapping) if not callable(methods) else (object,),
                    "names, functions or {name: function}, as a list or a comma-separated string"),
        "fractions": (fractions, (none, list, tuple, range), "fractions in (0, 1], as a list"),
        "modes": (modes, (none, *texts), '"roar", "kar" or a list of them'),
        "seeds": (seeds, (none, int, str), 'an int (retrainings per cell) or "auto"'),
        "epochs": (epochs, (none, int), "an int"), "control_seeds": (control_seeds, (none, int), "an int"),
        "control": (control, (none, bool), "True or False"), "progress": (progress, (bool,), "True or False"),
        "trust_run_dir": (trust_run_dir, (bool,), "True or False"),
        "fill": (fill, (str,), "a fill's name"), "device": (device, (str,), '"auto", "cpu", "cuda" or "cuda:N"'),
        "preset": (preset, (str,), '"quick" or "paper"'),
        "executor": (executor, (str, Executor), ", ".join(f'"{name}"' for name in EXECUTORS.names) + " or an Executor"),
        "dataset_options": (dataset_options, (none, Mapping), "a dict"), "recipe": (recipe, (none, Mapping), "a dict"),
        "method_args": (method_args, (none, Mapping), "a dict"), "seed": (seed, (int,), "an int (a seed)"),
        "name": (name, (none, str), "a configuration's name (text)")})
    check_seed("seed", seed)


def _check_backends(backends: dict) -> None:
    """Refuses, as Python refuses an unknown keyword, one that names no backend with options of its own."""
    takes = [entry.name for entry in EXECUTORS if entry.options_type is not None]
    unknown = sorted(set(backends) - set(takes))
    if unknown:
        raise TypeError(f"Study() got an unexpected keyword argument {unknown[0]!r} (a backend's options go by its "
                        f"name: {', '.join(takes)})")


class Study:
    """One run directory's study (README, "Your model and data"); every argument is checked here, before any work.

    Args:
        run_dir: the run directory (created by the first step that writes).
        model: a built-in name, "package.module:factory", "timm:<name>", a factory(num_classes, image_size,
            in_channels) or an nn.Module (its copies re-initialized per training); None: the dataset's default.
        dataset: a built-in name, "torchvision:<Class>", "package.module:factory", a factory, the data itself
            as (train, test[, classes]) (each a uint8/int64 tensor pair or a torch Dataset of (image, label)),
            or a roarfast Dataset; None: the run directory's latest (HEAD's), else the embedded one (said which).
        methods: estimator names ("sg-sq", "captum:Saliency", "package.module:function") and functions
            function(model, images, target) -> maps (a partial, a callable object), as a list or a
            comma-separated string; or a dict name -> function, each recorded as object:<name> (a list may hold
            such dicts beside names). A function with no import path and no given name is recorded as
            object:<its name>-<a digest of its identity>. random is always added. None: the preset's.
        fractions, modes, seeds, fill, epochs, control, control_seeds: the grid, as `roarfast sweep` takes them
            (None: the preset's).
        device: "auto", "cpu", "cuda" or "cuda:N".
        preset: "quick" or "paper", the grid the other arguments change.
        data_dir, dataset_options: as --data-dir and --data-option.
        recipe: Recipe fields overriding the model's recipe ({"lr": 0.02}), as --recipe.
        extract_options: roarfast.stages.extract.ExtractOptions (or a dict of its fields) for the ranks.
        method_args: the estimators' parameters and arguments ({"sliding_window_shapes": (3, 8, 8)} for
            captum:Occlusion), as --method-arg; each estimator gets those it takes.
        seed: the first seed (the base model's and the ranks').
        progress: progress bars and the sweep's lines.
        group_size: retraining cells trained together, as --group-size (None: the device's default).
        workers_per_cell: processes that train each cell data-parallel, as --workers-per-cell.
        threads_per_cell: CPU threads each cell trains with, as --threads-per-cell (None: the executor's default).
        weights: a state-dict file (safetensors, or a torch.save file, read with weights_only=True) adopted as the
            base model of `model` (default: the dataset's) instead of training one, as `train --weights`: run()
            adopts it first; its ranks and cells go on from it.
        executor: a backend's name, as --executor: "local", "ray" (the ranks' chunks and the cells as tasks on a Ray
            cluster) or any of roarfast.execution.registry.EXECUTORS; or an Executor object (roarfast.stages.executor).
        <backend>: a backend's own options, as a keyword named after it (its flags on the command line): its options
            dataclass or a dict of its fields, checked whichever executor runs; ray= a RayOptions
            (roarfast.execution.backends.ray: address, cpus_per_task, gpus_per_task, cpus_per_cell, gpus_per_cell).
        trust_run_dir: let the run directory's records name code to import (a plug-in model, dataset or
            estimator this Study was not given), as --trust-run-dir; without it, only what the Study was given.
        name: what run() calls its configuration, as --name (`report(config=name)`, `results(config=name)`);
            None: the label it gets when made, saying what differs from the configuration before it.
        margin: the smallest accuracy difference worth reporting, in points, as --margin (the learning rule's and
            the equivalence test's; None: the one the sweep recorded, else 5).
        seeds="auto", detect, max_seeds: seeds added only where a verdict is undecided, as `sweep --seeds auto
            --detect POINTS --max-seeds N` (roarfast.orchestration.seeds_auto).
    """

    def __init__(self, run_dir, *, model=None, dataset=None, methods=None, fractions=None, modes=None,
                 seeds=None, fill: str = DEFAULT_FILL, device="auto", preset: str = "quick", data_dir=None,
                 dataset_options=None, epochs=None, recipe=None, control=None, control_seeds=None,
                 extract_options=None, method_args=None, seed: int = 0, progress: bool = True,
                 group_size: int | None = None, workers_per_cell: int = 1, weights=None, executor: str = "local",
                 trust_run_dir: bool = False, name: str | None = None, threads_per_cell: int | None = None,
                 margin: float | None = None, detect: float | None = None, max_seeds: int | None = None, **backends):
        _check_arguments(run_dir, methods, fractions, modes, seeds, fill, device, preset, dataset_options, epochs,
                         recipe, control, control_seeds, method_args, seed, progress, executor, trust_run_dir, name)
        _check_backends(backends)
        # the option objects the command line builds from its flags, here from the arguments
        run = RunOptions(run_dir=run_dir, device=device, seed=seed, progress=progress)
        self.run_dir = run.run_dir
        self.name = None if name is None else check_name(name)
        if isinstance(seeds, str) and seeds != "auto":
            raise UserError(f'seeds should be an int or "auto", got {seeds!r}')
        self.auto = {"detect": margin_of(detect, "detect"), "max_seeds": check_positive(
            "max_seeds", max_seeds, optional=True, most=MAX_SEEDS)} if seeds == "auto" else None
        self.margin = margin
        margin_of(margin, "margin")  # refused now, before any work
        seeds = None if seeds == "auto" else seeds
        if isinstance(methods, (str, Mapping)) or callable(methods):
            methods = [methods]
        self.grid = GridOptions(preset=preset, methods=None if methods is None else tuple(methods), fractions=fractions,
                                modes=modes, seeds=seeds, control=control, control_seeds=control_seeds, fill=fill,
                                model=model, epochs=epochs, recipe=recipe).grid(seed)
        if isinstance(extract_options, dict):
            extract_options = ExtractOptions(**extract_options)
        self.extract_options = extract_options or ExtractOptions()
        if method_args is not None:
            self.extract_options = replace(self.extract_options, method_args=method_args)
        # every method resolved and registered now, a bad one or an argument none takes refused now
        selection = Selection.of(cell_estimators(self.grid.methods), self.extract_options, seed)
        self.selection = selection  # what run() hands the sweep: no name looked up again
        self.device = resolve_device(run.device)
        self.seed = run.seed
        self.progress = run.progress
        layout = CellLayout(group_size=group_size, workers_per_cell=workers_per_cell, threads_per_cell=threads_per_cell)
        self.group_size, self.workers_per_cell = layout.group_size, layout.workers_per_cell
        self.threads_per_cell = layout.threads_per_cell
        self.weights = weights
        # the one place a Study's executor is chosen; each backend's options are checked whichever runs
        self.executor = ExecutorOptions(executor=executor, backends=backends).make(flag="executor")
        self._trust = trust_run_dir
        data = DataOptions(dataset=dataset, data_dir=data_dir, options=dataset_options)
        self.dataset = self._load_dataset(data.data_dir, data.options) if data.dataset is None else load_dataset(
            data.dataset, data.data_dir, **data.options)
        named = [self.dataset.name, *selection.names]
        if model is not None:
            named.append(checked_model(model, self.dataset).name)
        self._named = tuple(named)

    def _load_dataset(self, data_dir, dataset_options):
        """The dataset of the run directory's latest request (HEAD's), else the embedded one; says which."""
        run = RunDir(self.run_dir)
        recorded = run.dataset_record()
        with user_named((), self.run_dir if self._trust else None):  # a recorded plug-in: only when trusted
            name, where, options = run.dataset_spec(None, data_dir, dataset_options)
            dataset = load_dataset(name, where, **options)
        self._echo(f"Study: dataset {dataset.name} (" + (f"the run directory's latest, as {run.dataset_path} records it)"
                                                         if recorded else "embedded: the run directory records none)"))
        return dataset

    def _records(self):
        """The scope of a step: the run directory's records may name what this Study was given (and any code,
        with trust_run_dir) (roarfast.common.plugins.user_named)."""
        return user_named(self._named, self.run_dir if self._trust else None)

    def run(self, fill: str | None = None):
        """The sweep (roarfast sweep): the base model and the ranks where missing, then every cell of the grid
        that results.sqlite lacks (with `fill` instead of the Study's, when given; seeds="auto": added where verdicts
        are undecided). Returns its configuration's cells (results(config=its id)), none of another configuration's,
        its study's status in the `study_status` column (conclusive, inconclusive, underpowered)."""
        grid = self.grid if fill is None else replace(self.grid, fill=fill)
        set_command("Study.run()" if fill is None else f"Study.run(fill={fill!r})")
        with self._records():
            if self.weights is not None:  # the adopted base model (reused once adopted), which the sweep takes
                run_train(self.run_dir, TrainOptions(model=grid.model, weights=self.weights), dataset_obj=self.dataset,
                          device=self.device, seed=self.seed, progress=self.progress, echo=self._echo)
            swept = dict(dataset_obj=self.dataset, device=self.device, seed=self.seed, progress=self.progress,
                         extract_options=self.extract_options, echo=self._echo, group_size=self.group_size,
                         workers_per_cell=self.workers_per_cell, executor=self.executor, selection=self.selection,
                         name=self.name, threads_per_cell=self.threads_per_cell)
            margin = margin_of(self.margin, "margin")
            swept = run_sweep(self.run_dir, grid, reading=None if margin is None else {"margin": margin}, **swept) \
                if self.auto is None else run_seeds_auto(self.run_dir, grid, margin=margin, **self.auto, **swept)
        return self.results(config=swept["configuration"])

    def evaluate(self, metrics=("morf", "lerf", "road"), fractions=(0.1, 0.3, 0.5, 0.7, 0.9), methods=None):
        """The no-retrain evaluations (roarfast evaluate) of the base model on the stored test ranks; returns
        results(kind="no-retrain")."""
        options = NoRetrainOptions(metrics=tuple(metrics), fractions=tuple(fractions), methods=methods)
        with self._records():
            run_noretrain(self.run_dir, options, dataset_obj=self.dataset, device=self.device, progress=self.progress,
                          seed=self.seed)
        return self.results(kind="no-retrain")

    def leakage(self, fills=(DEFAULT_FILL, ROAD_FILL), fractions=(0.3, 0.5, 0.7), method: str = "random",
                max_images: int = 5000):
        """Fill leakage (roarfast leakage): how visible each fill's holes are; returns results(kind="fill-leakage")."""
        options = FillLeakageOptions(fills=tuple(fills), fractions=tuple(fractions), method=method,
                                     max_images=max_images)
        run_fill_leakage(self.run_dir, options, dataset_obj=self.dataset, device=self.device, seed=self.seed)
        return self.results(kind="fill-leakage")

    def report(self, out_dir=None, config: str | None = None):
        """The report (roarfast report) with this Study's dataset for chance and the example images, of the
        configuration `config` names (its id or an id prefix, its name or any label it was shown with; "all": every
        one apart; None: the latest request's); returns the roarfast.report.Report (index_html, verdict_lines(), summary)."""
        return write_report(self.run_dir, out_dir, dataset=self.dataset, config=config, margin=self.margin)

    def configurations(self):
        """What the run directory keeps (roarfast ls): a row per configuration (label, id, whether it is the
        latest request's, cells done and in its grids, bytes of its base model and ranks, when requested, by
        which command), as a pandas DataFrame (a list of dicts without pandas)."""
        rows = listing(self.run_dir)["configurations"]
        try:
            import pandas
        except ImportError:
            return rows
        return pandas.DataFrame.from_records(rows)

    def results(self, kind: str | None = "retrain", config: str | None = None):
        """The run directory's measurements of `kind` (None: all) as a pandas DataFrame (roarfast.results.load: a
        retraining row's configuration id and name in columns), of the configuration `config` names when given
        (its id or an id prefix, its name or any label it was shown with)."""
        return load(self.run_dir, kind=kind, config=config, margin=self.margin)

    def preview(self, plan_device: str | None = None, workers: int = 1):
        """What run() would do now, doing none of it: a roarfast.planning.preview.Preview, which prints as
        `roarfast sweep --dry-run` does and displays as a table in Jupyter: the data, the base model's recipe and
        whether it is reused (by id) or trained beside those kept, the ranks to extract and those reused, the grid, the cells done and to do in the run directory, and
        each stage's images, bytes on disk, peak memory and time, on this device or `plan_device` (as
        --plan-device), shared by `workers` workers (as --plan-workers); steps are measured once per machine
        (roarfast.stages.step_times). With weights=, the base model is those weights, adopted first."""
        with self._records():
            adopting = None if self.weights is None else adopted_model(
                base_spec(self.grid.model, self.dataset, self.device), self.dataset, self.weights)
            return preview_sweep(RunDir(self.run_dir), self.grid, self.selection, dataset_obj=self.dataset,
                                 device=self.device, seed=self.seed, extract_options=self.extract_options,
                                 plan_device=plan_device, workers=workers,
                                 cell_threads=self.executor.cell_threads(self.device, self.threads_per_cell,
                                                                         workers_per_cell=self.workers_per_cell),
                                 adopting=adopting,
                                 **({} if self.auto is None else {"seeds_auto": True, **self.auto}))

    def __repr__(self) -> str:
        return "\n".join([f"Study({str(self.run_dir)!r}, device {self.device})",
                          *(f"  {line}" for line in self.preview().lines())])

    def _repr_html_(self) -> str:
        return self.preview().html(f"Study {self.run_dir} (device {self.device})")

    def _echo(self, line: str) -> None:
        if self.progress:
            print(line)
