"""The `roarfast` command line. Commands are thin: they parse options into the library's options
dataclasses (which check them: a failed check is a usage error), call the library and print.

The choices come from the library's vocabulary (fills, modes, AMP, presets, executors, metrics), so a new
entry appears here at once. Heavy imports (torch, the extension, DALI) happen inside command bodies so that
`roarfast --help` answers at once. A `--config FILE` (YAML) supplies defaults that flags override:
top-level keys apply to every command, a section named after a command applies to that command only.
"""

import json
import shlex
import sys
from pathlib import Path

import click

from roarfast.cli.options import (DEFAULT_RUN_DIR, OneLineGroup, _data_options, _fractions, _friendly_errors,
                                  _load_config, _options, amp_option, data_options, executor_options, method_arg_option,
                                  model_option, name_option, parameter_options, recipe_option, run_options,
                                  trust_option)
from roarfast.cli.doctor import report_lines
from roarfast.cli.listing import KINDS as LIST_KINDS, listing, listing_lines
from roarfast.fills import DEFAULT_FILL, FILLS, ROAD_FILL
from roarfast.planning.grid import PRESETS, preset_grid
from roarfast.rundir.head import set_command
from roarfast.common.memory import preload_allocator
from roarfast.methods.parameters import PARAMETERS
from roarfast.methods.registry import method_forms
from roarfast.modes import MODES, NO_RETRAIN_METRICS, ROAR
from roarfast.common.options import parse_list
from roarfast.planning.costs import STATED
from roarfast.execution.ray_cluster import RayOptions
from roarfast.execution.registry import make_executor
from roarfast.recipe import AMP_CHOICES

METHOD_FORMS = method_forms()
#: --model's help on the stages that load the base model
NAMED_AGAIN = ("the base model, named again as `train` took it: needed only where it is a plug-in "
               "(package.module:factory), which the run directory's record alone never imports")


@click.group(cls=OneLineGroup, context_settings={"help_option_names": ["-h", "--help"], "show_default": True})
@click.option("--config", type=click.Path(exists=True, dir_okay=False), callback=_load_config, is_eager=True,
              expose_value=False, help="YAML file of defaults: top-level keys for every command, or a section per command")
@click.version_option(package_name="roarfast")
@click.pass_context
def main(ctx):
    """roarfast: the ROAR interpretability benchmark (RemOve And Retrain), end to end, fast.

    A session on the embedded dataset: `roarfast train`, then `roarfast extract --method sg-sq`,
    then `roarfast retrain --fraction 0.7`; or everything at once with `roarfast run`.
    """
    preload_allocator()  # before torch loads: the command starts again, once, with a well-kept allocator
    # what HEAD and the configurations record: the command line, where this process is roarfast's own
    own = Path(sys.argv[0]).name == "roarfast" or Path(sys.argv[0]).parts[-2:] == ("cli", "__main__.py")
    set_command(shlex.join(["roarfast", *sys.argv[1:]]) if own else f"roarfast {ctx.invoked_subcommand}")


@main.command()
@run_options
@data_options
@model_option("{models} (default: by dataset and device)")
@click.option("--epochs", type=int, default=None, help="training epochs (default: the model's recipe)")
@click.option("--batch-size", type=int, default=None, help="batch size (default: the model's recipe)")
@recipe_option
@amp_option
@click.option("--weights", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="adopt trained weights as the base model instead of training it: a state dict of --model for this "
                   "data, as safetensors or a torch.save file (loaded with weights_only=True); loaded strictly, "
                   "evaluated, recorded with its digest")
@trust_option
@_friendly_errors
def train(run_dir, device, seed, progress, dataset, data_dir, data_option, model, epochs, batch_size, recipe, amp,
          weights):
    """Train the base classifier on the unmodified dataset (validation split held out for model selection), or
    adopt trained weights as the base model (--weights)."""
    # late: loads torch, and --help imports this module
    from roarfast.stages.basemodel import TrainOptions, run_train

    options = _options(TrainOptions, model=model, epochs=epochs, batch_size=batch_size, amp=amp, recipe=recipe,
                       weights=weights)
    summary = run_train(run_dir, options, dataset=dataset, data_dir=data_dir, dataset_options=data_option,
                        device=device, seed=seed, progress=progress, echo=click.echo)
    adopted = summary["adopted"]
    made = "adopted" if adopted else "trained"
    reused = f"reusing {summary['model']} ({made} {summary['trained']}): " if summary["reused"] else ""
    source = f"{summary['model']} adopted from {adopted['file']} (sha256 {adopted['file_sha256'][:12]}): " \
        if adopted and not summary["reused"] else ""
    click.echo(f"base model: {reused}{source}val {summary['val_acc']:.2%}, test {summary['test_acc']:.2%} "
               f"-> {summary['checkpoint']}")


@main.command()
@run_options
@data_options
@click.option("--method", "methods", default="sg-sq", help=METHOD_FORMS)
@click.option("--split", "splits", default="train,test", help="splits to attribute, comma-separated")
@click.option("--batch-size", type=int, default=None, help="images per batch (default: by device)")
@parameter_options
@method_arg_option
@click.option("--amp", type=click.Choice(AMP_CHOICES), default="auto",
              help="autocast for the model's passes (auto: bf16 on GPU, off on CPU)")
@click.option("--keep-maps/--no-keep-maps", default=False, help="also store fp16 maps (for pictures)")
@click.option("--force", is_flag=True, help="recompute a complete store")
@click.option("--compile/--no-compile", "compile_model", default=False,
              help="torch.compile the model for its passes (pays a compile first; worth it on large runs)")
@executor_options
@model_option(NAMED_AGAIN)
@trust_option
@_friendly_errors
def extract(run_dir, device, seed, progress, dataset, data_dir, data_option, methods, splits, batch_size, method_arg,
            amp, keep_maps, force, compile_model, executor, address, cpus_per_task, gpus_per_task, chunk_images, model,
            **parameters):
    """Attribution maps for every train and test image -> per-pixel ranks in the rank store. A store made with
    other values (a parameter, an argument, the estimator's code, the base model) is made again. Resumable chunk
    by chunk; on a Ray cluster (--executor ray) each chunk left is a task, written here as it comes back."""
    # late: loads torch, and --help imports this module
    from roarfast.stages.extract import ExtractOptions, run_extract, summary_line
    from roarfast.rundir.directory import RunDir

    RunDir(run_dir).check_named_model(model)
    options = ExtractOptions(methods=methods, splits=parse_list(splits), batch_size=batch_size, amp=amp,
                             keep_maps=keep_maps, force=force, compile=compile_model, method_args=method_arg,
                             chunk_images=chunk_images, **parameters)
    ray = _options(RayOptions, address=address, cpus_per_task=cpus_per_task, gpus_per_task=gpus_per_task)
    summary = run_extract(run_dir, options, dataset=dataset, data_dir=data_dir, dataset_options=data_option,
                          device=device, seed=seed, progress=progress, executor=make_executor(executor, ray))
    click.echo(summary_line(summary, RunDir(run_dir).ranks_root))


#: --group-size of retrain and sweep (a cell's results do not depend on it: how cells train, not what)
GROUP_SIZE_OPTION = click.option(
    "--group-size", type=click.IntRange(min=1), default=None,
    help="cells trained together by one loop, each with its own seed, masks and row (default: the device's, "
         "from benchmarks/RESULTS.md: 1 on CPU and GPU)")
#: --workers-per-cell of retrain and sweep (how a cell trains, not what: recorded beside its row, like --group-size)
WORKERS_OPTION = click.option(
    "--workers-per-cell", type=click.IntRange(min=1), default=1, show_default=True,
    help="processes that train each cell data-parallel (one per GPU; gloo on CPUs), on one machine or Ray node: "
         "for a model larger than one device; the cell's batch is split between them, its row means the same")


@main.command()
@run_options
@data_options
@click.option("--fraction", "fractions", multiple=True, callback=_fractions, default=["0.7"],
              help="fraction(s) of pixels removed (ROAR) or kept (KAR); repeat or comma-separate")
@click.option("--method", "methods", default=None, help="methods to retrain on (default: every stored method, plus random)")
@click.option("--mode", "modes", default=ROAR, help=f"{', '.join(MODES)} or {','.join(MODES)}")
@click.option("--seeds", type=int, default=1, help="retrainings per cell (seeds 0..N-1)")
@model_option("model to retrain: {models} (default: the base model's)")
@click.option("--epochs", type=int, default=None, help="training epochs (default: the base model's recipe)")
@recipe_option
@click.option("--fill", type=click.Choice(FILLS.names), default=DEFAULT_FILL,
              help=f"what replaces removed pixels: {FILLS.listing()}")
@click.option("--mask-only/--no-mask-only", default=False,
              help="beside every cell, a control trained and tested on its removal pattern alone (mode "
                   "roar-mask / kar-mask): how much the mask's shape tells about the class")
@amp_option
@GROUP_SIZE_OPTION
@WORKERS_OPTION
@name_option
@trust_option
@_friendly_errors
def retrain(run_dir, device, seed, progress, dataset, data_dir, data_option, fractions, methods, modes, seeds, model,
            epochs, recipe, fill, mask_only, amp, group_size, workers_per_cell, name):
    """Retrain from scratch on masked data for each method and fraction; evaluate on masked test."""
    # late: loads torch, and --help imports this module
    from roarfast.cli.tables import retrain_table
    from roarfast.stages.retrain import RetrainOptions, run_retrain

    options = _options(RetrainOptions, fractions=tuple(fractions), methods=methods, modes=parse_list(modes),
                       seeds=seeds, model=model, epochs=epochs, fill=fill, amp=amp, mask_only=mask_only, recipe=recipe)
    rows = run_retrain(run_dir, options, dataset=dataset, data_dir=data_dir, dataset_options=data_option,
                       device=device, seed=seed, progress=progress, group_size=group_size,
                       workers_per_cell=workers_per_cell, name=name)
    click.echo(retrain_table(rows))


@main.command()
@run_options
@data_options
@click.option("--preset", type=click.Choice(list(PRESETS)), default="quick",
              help="the grid: quick (what `roarfast run` uses) or paper (14 estimators x 5 fractions x roar,kar x "
                   "5 seeds); the flags below override its parts")
@click.option("--method", "methods", default=None, help=METHOD_FORMS + " (default: the preset's)")
@click.option("--fraction", "fractions", multiple=True, callback=_fractions, default=None,
              help="fractions removed (ROAR) or kept (KAR); repeat or comma-separate (default: the preset's)")
@click.option("--mode", "modes", default=None, help=f"{', '.join(MODES)} or {','.join(MODES)} (default: the preset's)")
@click.option("--seeds", type=int, default=None, help="retrainings per cell, seeds --seed.. (default: the preset's)")
@click.option("--control/--no-control", default=None,
              help="the mask-only control beside every cell (default: on)")
@click.option("--control-seeds", type=int, default=None,
              help="controls for the first N seeds only (a control is tested against chance on the test split, "
                   "which one seed allows; default: the preset's)")
@click.option("--fill", type=click.Choice(FILLS.names), default=DEFAULT_FILL,
              help=f"what replaces removed pixels: {FILLS.listing()}")
@model_option("{models} (default: the base model's, else by dataset and device); trains the base model when the "
              "run directory has none, and every cell")
@click.option("--epochs", type=int, default=None,
              help="training epochs of each cell (default: the preset's, else the model's recipe)")
@recipe_option
@amp_option
@click.option("--cam-layer", "gradcam_layer", default=None, help=PARAMETERS["gradcam_layer"].help)
@method_arg_option
@executor_options
@click.option("--cpus-per-cell", type=float, default=None,
              help="Ray: CPUs per cell (per worker with --workers-per-cell), each a training thread  [default: the "
                   "threads a cell trains with under --executor local (torch's count: one per core, or "
                   "OMP_NUM_THREADS), so both give the same rows]")
@click.option("--gpus-per-cell", type=float, default=0.0, help="Ray: GPUs per cell, fractions allowed (0.25: four "
              "small models share a GPU); 1 with --workers-per-cell (a GPU per worker)")
@click.option("--dry-run", is_flag=True, help="print the plan (what is reused by id, what is made, cells done and to "
              "do; per stage images, bytes on disk, peak memory, device-hours, ETA) and stop")
@click.option("--plan-device", type=click.Choice(list(STATED)), default=None,
              help="--dry-run: cost the stages on this device from its stated peak and the steps' FLOPs, where it is "
                   "not the one here  [default: this machine's device, from steps measured on it]")
@click.option("--plan-workers", type=click.IntRange(min=1), default=1,
              help="--dry-run: the stages' time shared by N workers (the base model data-parallel, extraction by "
                   "chunks, one cell per worker)")
@GROUP_SIZE_OPTION
@WORKERS_OPTION
@name_option
@trust_option
@_friendly_errors
def sweep(run_dir, device, seed, progress, dataset, data_dir, data_option, preset, methods, fractions, modes, seeds,
          control, control_seeds, fill, model, epochs, recipe, amp, gradcam_layer, method_arg, executor, address,
          cpus_per_task, gpus_per_task, chunk_images, cpus_per_cell, gpus_per_cell, dry_run, plan_device, plan_workers,
          group_size, workers_per_cell, name):
    """The whole grid: base model, ranks, then every cell (method x mode x fraction x seed, each with its
    mask-only control) that results.sqlite lacks. Safe to kill and rerun; several sweeps may share a run
    directory (cells are claimed before they are trained)."""
    # late: loads torch, and --help imports this module
    from roarfast.stages.extract import ExtractOptions
    from roarfast.stages.sweep import run_sweep

    if not dry_run and (plan_device is not None or plan_workers != 1):
        raise click.UsageError("--plan-device and --plan-workers cost a dry run: add --dry-run")
    grid = _options(preset_grid, name=preset, methods=methods, fractions=tuple(fractions) if fractions else None,
                    modes=None if modes is None else parse_list(modes), seeds=seeds, control=control,
                    control_seeds=control_seeds, fill=fill, model=model, epochs=epochs, amp=amp, first_seed=seed,
                    recipe=recipe or None)
    ray = _options(RayOptions, address=address, cpus_per_cell=cpus_per_cell, gpus_per_cell=gpus_per_cell,
                   cpus_per_task=cpus_per_task, gpus_per_task=gpus_per_task)
    run_sweep(run_dir, grid, executor=make_executor(executor, ray), dry_run=dry_run, dataset=dataset,
              data_dir=data_dir, dataset_options=data_option, device=device, seed=seed, progress=progress,
              extract_options=_options(ExtractOptions, gradcam_layer=gradcam_layer, method_args=method_arg,
                                       chunk_images=chunk_images),
              echo=click.echo, group_size=group_size, workers_per_cell=workers_per_cell, plan_device=plan_device,
              plan_workers=plan_workers, name=name)


@main.command()
@run_options
@click.option("--data-option", "data_option", multiple=True, type=click.UNPROCESSED, callback=_data_options,
              metavar="KEY=VALUE",
              help="embedded dataset option, repeatable: num_train, num_test, seed, copies")
@click.option("--fraction", "fractions", multiple=True, callback=_fractions, default=None,
              help="fractions of the grid (default: the one covering the object, 0.25, 0.5)")
@click.option("--method", "methods", default=None, help=METHOD_FORMS + " (default: the quick preset's)")
@click.option("--seeds", type=int, default=None, help="retrainings per cell (default: the quick preset's 3)")
@click.option("--epochs", type=int, default=None, help="training epochs of each cell (default: the quick preset's)")
@name_option
@_friendly_errors
def run(run_dir, device, seed, progress, data_option, fractions, methods, seeds, epochs, name):
    """The main job on the embedded dataset: the quick sweep (train, extract, retrain ROAR and KAR over seeds
    with mask-only controls), then the report; prints the verdicts and the dataset's own checks."""
    # late: loads torch, and --help imports this module
    from roarfast.stages.demo import run_demo

    run_demo(run_dir, device=device, seed=seed, progress=progress, fractions=fractions, methods=methods, seeds=seeds,
             epochs=epochs, dataset_options=data_option, name=name)


@main.command()
@run_options
@data_options
@click.option("--metric", "metrics", default=",".join(NO_RETRAIN_METRICS),
              help=f"{', '.join(NO_RETRAIN_METRICS)} (road = MoRF and LeRF with the imputation fill), comma-separated")
@click.option("--fraction", "fractions", multiple=True, callback=_fractions, default=["0.1,0.3,0.5,0.7,0.9"],
              help="fraction(s) of pixels replaced; repeat or comma-separate")
@click.option("--method", "methods", default=None, help="methods to evaluate (default: every method with test ranks)")
@click.option("--batch-size", type=int, default=None, help="images per batch (default: by device)")
@model_option(NAMED_AGAIN)
@trust_option
@_friendly_errors
def evaluate(run_dir, device, seed, progress, dataset, data_dir, data_option, metrics, fractions, methods, batch_size,
             model):
    """No-retrain evaluations of the base model on the rank store: MoRF, LeRF, ROAD (results.sqlite)."""
    # late: loads torch, and --help imports this module
    from roarfast.cli.tables import no_retrain_table
    from roarfast.stages.noretrain import NoRetrainOptions, run_noretrain
    from roarfast.rundir.directory import RunDir

    RunDir(run_dir).check_named_model(model)
    options = _options(NoRetrainOptions, metrics=parse_list(metrics), fractions=tuple(fractions), methods=methods,
                       batch_size=batch_size)
    rows = run_noretrain(run_dir, options, dataset=dataset, data_dir=data_dir, dataset_options=data_option,
                         device=device, progress=progress, seed=seed)
    click.echo(no_retrain_table(rows))


@main.command()
@run_options
@data_options
@click.option("--fill", "fills", default=f"{DEFAULT_FILL},{ROAD_FILL}",
              help=f"fills to compare, comma-separated: {', '.join(FILLS.names)}")
@click.option("--fraction", "fractions", multiple=True, callback=_fractions, default=["0.3,0.5,0.7"],
              help="fraction(s) of pixels removed; repeat or comma-separate")
@click.option("--method", default="random", help="whose stored ranks give the removal patterns")
@click.option("--max-images", type=int, default=5000, help="train and test images used, each")
@trust_option
@_friendly_errors
def leakage(run_dir, device, seed, progress, dataset, data_dir, data_option, fills, fractions, method, max_images):
    """Fill leakage: a per-pixel detector's accuracy at finding removed pixels after each fill, vs the base rate."""
    # late: loads torch, and --help imports this module
    from roarfast.cli.tables import fill_leakage_table
    from roarfast.stages.fill_leakage import FillLeakageOptions, run_fill_leakage

    options = _options(FillLeakageOptions, fills=parse_list(fills), fractions=tuple(fractions), method=method,
                       max_images=max_images)
    rows = run_fill_leakage(run_dir, options, dataset=dataset, data_dir=data_dir, dataset_options=data_option,
                            device=device, seed=seed)
    click.echo(fill_leakage_table(rows))


@main.command()
@click.option("--run-dir", type=click.Path(file_okay=False, path_type=Path), default=DEFAULT_RUN_DIR,
              show_default=True, help="the run directory to report on")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="where to write the report  [default: RUN_DIR/report]")
@click.option("--config", "config", default=None, metavar="NAME|LABEL|ID",
              help="the configuration to report: its id or an id prefix, its --name, or any label it was shown with "
                   "(`roarfast ls` lists them)  [default: the latest request's]")
@click.option("--all", "every", is_flag=True, help="every configuration of the run directory, each apart")
@click.option("--figure-format", "figure_formats", default="png", metavar="png,svg,pdf",
              help="the figures' formats, comma-separated (the page embeds the PNG, else the SVG)")
@click.option("--dpi", type=int, default=None, help="a PNG figure's resolution  [default: the report's, for a screen]")
@trust_option
@_friendly_errors
def report(run_dir, out_dir, config, every, figure_formats, dpi):
    """Tables, figures and verdicts (estimators against random, leakage, ranking) from results.sqlite, with
    the tables a paper quotes as tables.tex (booktabs) and tables.md, for the configuration of the latest request (a sweep, `run`, `retrain`, Study.run()) unless --config or --all say
    otherwise; its first lines list the other configurations and the command that reports each."""
    # late: loads torch, and --help imports this module
    from roarfast.report import ALL, write_report

    if config is not None and every:
        raise click.UsageError("--config and --all: give one of them")
    written = write_report(run_dir, out_dir, config=ALL if every else config, figure_formats=figure_formats, dpi=dpi)
    for line in written.verdict_lines():
        click.echo(line)
    click.echo(f"report: {written.index_html}")


@main.command(name="ls")
@click.option("--run-dir", type=click.Path(file_okay=False, path_type=Path), default=DEFAULT_RUN_DIR,
              show_default=True, help="the run directory to list")
@click.option("--long", "long_", is_flag=True,
              help="also a table of what differs between the configurations: a column per setting, every value whole")
@_friendly_errors
def ls(run_dir, long_):
    """What the run directory keeps: each configuration (its name or label, id, cells done / in its grid, the bytes
    of its base model and ranks, when it was requested, by which command; * the latest request's), and the base
    models and rank stores no configuration uses."""
    # late: loads torch, and --help imports this module
    from roarfast.cli.tables import differs_table
    from roarfast.rundir.inventory import listing, ls_lines

    found = listing(run_dir)
    for line in ls_lines(run_dir, found):
        click.echo(line)
    if long_:
        click.echo(differs_table(found["configurations"]))


@main.command()
@click.argument("names", nargs=-1, metavar="NAME|LABEL|ID...")
@click.option("--run-dir", type=click.Path(file_okay=False, path_type=Path), default=DEFAULT_RUN_DIR,
              show_default=True, help="the run directory to prune")
@click.option("--dry-run", is_flag=True, help="say what would be removed, and remove nothing")
@_friendly_errors
def prune(names, run_dir, dry_run):
    """Remove the configurations named (names, labels or ids: `roarfast ls` lists them): their records, and their cells,
    rank stores and base models that no other configuration nor the latest request uses. Run it with --dry-run
    first."""
    # late: loads torch, and --help imports this module
    from roarfast.rundir.inventory import prune as prune_run

    for line in prune_run(run_dir, names, dry_run=dry_run):
        click.echo(line)


@main.command()
def doctor():
    """Versions, whether CUDA kernels were compiled and for which archs, GPUs, DALI, Ray."""
    for line in report_lines():
        click.echo(line)


@main.command()
@click.argument("run_dirs", nargs=-1, required=True, type=click.Path(file_okay=False, path_type=Path),
                metavar="RUN_DIR...")
@click.option("--config", "configs", multiple=True, metavar="LABEL|ID",
              help="repeatable: with one RUN_DIR, the configurations to compare, the first the baseline (default: "
                   "every one); with several, one per RUN_DIR in their order (default: each one's latest request's)")
@click.option("--json", "as_json", is_flag=True, help="print the comparison as JSON")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="also write compare.md, compare.csv and compare.json into this directory")
@_friendly_errors
def compare(run_dirs, configs, as_json, out_dir):
    """Configurations side by side: two or more of one run directory, or those of several. Per mode, fill and
    fraction each side's accuracy and verdict, each side's AUC, what differs between them and each side's
    change from the first (the difference with its Welch 95% interval over seeds, Holm-corrected p)."""
    # late: loads numpy and scipy (the statistics), and --help imports this module
    from roarfast.cli.tables import text_table
    from roarfast.report.compare import compare as compare_runs

    comparison = compare_runs(run_dirs, configs)
    written = comparison.write(out_dir) if out_dir is not None else []
    if as_json:
        click.echo(json.dumps(comparison.to_dict(), indent=1, sort_keys=True))
        return
    for line in comparison.legend() + [f"note: {n}" for n in comparison.notes]:
        click.echo(line)
    for table in comparison.tables():
        click.echo(f"\n{table.title}\n{text_table(table.header, table.rows)}")
    for path in written:
        click.echo(f"written: {path}")


@main.command(name="list")
@click.argument("kinds", nargs=-1, type=click.Choice(LIST_KINDS), metavar=f"[{'|'.join(LIST_KINDS)}]...")
@click.option("--json", "as_json", is_flag=True, help="print the listing as JSON")
@click.option("--captum/--no-captum", default=True,
              help="list the installed Captum's attribution classes among the estimators (loads torch)")
@_friendly_errors
def list_names(kinds, as_json, captum):
    """Every name the commands take: estimators (--method; the installed Captum's classes as captum:<Class>),
    models (--model), datasets (--dataset), fills (--fill), no-retrain metrics (evaluate --metric), each with
    a one-line description and its parameters."""

    listed = listing(kinds or LIST_KINDS, captum=captum)
    if as_json:
        click.echo(json.dumps(listed, indent=1))
        return
    for line in listing_lines(listed):
        click.echo(line)
