"""The `roarfast` command line. Commands are thin: they parse options into the library's options
dataclasses (which check them: a failed check is a usage error), call the library and print.

The choices come from the library's vocabulary (fills, modes, AMP, presets, executors, metrics), so a new
entry appears here at once. Heavy imports (torch, the extension, DALI) happen inside command bodies so that
`roarfast --help` answers at once. A `--config FILE` (YAML) supplies defaults that flags override:
top-level keys apply to every command, a section named after a command applies to that command only.
"""

import functools
from pathlib import Path

import click

from roarfast.data.registry import DATASET_FORMS
from roarfast.executors import EXECUTORS
from roarfast.fills import DEFAULT_FILL, FILLS, ROAD_FILL
from roarfast.grid import PRESETS
from roarfast.methods.parameters import PARAMETERS, RANKING
from roarfast.methods.registry import method_forms
from roarfast.models import model_forms
from roarfast.modes import MODES, NO_RETRAIN_METRICS, ROAR
from roarfast.options import parse_list
from roarfast.recipe import AMP_CHOICES, PLUGIN_SMALL_IMAGE, RECIPE_FIELDS

DEFAULT_RUN_DIR = "runs/default"
MODEL_HELP = (f"{model_forms()}; models other than the built-ins train with the default recipe of their image "
              f"size (up to {PLUGIN_SMALL_IMAGE} px or larger; README, 'Your model and data'), --recipe changes it")
METHOD_FORMS = method_forms()


def _stack(*decorators):
    """Applies several click decorators as one, so shared options are defined once."""

    def apply(func):
        for decorator in reversed(decorators):
            func = decorator(func)
        return func

    return apply


run_options = _stack(
    click.option("--run-dir", type=click.Path(file_okay=False, path_type=Path), default=DEFAULT_RUN_DIR,
                 show_default=True, help="where checkpoints, the rank store and results live"),
    click.option("--device", default="auto", show_default=True, help="auto | cpu | cuda | cuda:N"),
    click.option("--seed", type=int, default=0, show_default=True, help="seed of the run"),
    click.option("--progress/--no-progress", default=True, show_default=True, help="progress bars"),
)

def _data_options(ctx, param, value):
    """KEY=VALUE pairs (or mappings, from a config file) -> dict, values read as YAML scalars (3 -> int, true ->
    bool)."""
    import yaml

    options = {}
    for item in value or ():
        if isinstance(item, dict):
            options.update({str(key).replace("-", "_"): val for key, val in item.items()})
            continue
        key, sep, text = str(item).partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"expected KEY=VALUE, got {item!r}")
        options[key.strip().replace("-", "_")] = yaml.safe_load(text)
    return options


data_options = _stack(
    click.option("--dataset", default=None,
                 help=f"{DATASET_FORMS}  [default: what `train` recorded in the run directory, else embedded]"),
    click.option("--data-dir", type=click.Path(path_type=Path), default=None,
                 help="dataset root (CIFAR or torchvision on-disk format, a JPEG tree with train/ and val/ or test/, "
                      "or a factory's data_dir)"),
    click.option("--data-option", "data_option", multiple=True, callback=_data_options, metavar="KEY=VALUE",
                 help="loader option, repeatable: embedded num_train/num_test/seed/copies; cifar download=true; "
                      "imagefolder resize/crop/skip_bad/device/stream (stream=auto|true|false: decode batch by "
                      "batch from disk instead of holding the canvases in memory); torchvision:<Class> and a "
                      "factory: their own keyword arguments"),
)

def _recipe(ctx, param, value):
    """--recipe FIELD=VALUE pairs over the config file's recipe: mapping (field by field) -> dict."""
    from click.core import ParameterSource

    configured = {}
    if ctx.get_parameter_source(param.name) is ParameterSource.COMMANDLINE:
        configured = _data_options(ctx, param, ctx.lookup_default(param.name) or ())
    return {**configured, **_data_options(ctx, param, value)}


recipe_option = click.option(
    "--recipe", "recipe", multiple=True, type=click.UNPROCESSED, callback=_recipe, metavar="FIELD=VALUE",
    help=f"training recipe field, repeatable (--recipe lr=0.02 --recipe ema_decay=null); fields: "
         f"{', '.join(RECIPE_FIELDS)}; a config file takes a `recipe:` mapping; wins over --epochs, --batch-size "
         f"and a preset's epochs")


amp_option = click.option(
    "--amp", type=click.Choice(AMP_CHOICES), default="auto",
    help="mixed precision for training: bf16 autocast, or fp16 autocast with a gradient scaler (auto: bf16 on "
         "GPU, fp32 on CPU)")


def _fractions(ctx, param, value):
    """'0.3,0.7' or repeated flags -> sorted unique floats (the options check the range); nothing given ->
    None."""
    if value is None or (isinstance(value, (list, tuple)) and not value):
        return None
    items = value if isinstance(value, (list, tuple)) else [value]
    out = []
    for item in items:
        for part in str(item).split(","):
            if not part.strip():
                continue
            try:
                out.append(float(part))
            except ValueError:
                raise click.BadParameter(f"{part!r} is not a number") from None
    if not out:
        raise click.BadParameter("give at least one fraction")
    return sorted(set(out))


def _load_config(ctx, param, path):
    """Reads a YAML config into ctx.default_map (safe loader; flags still override)."""
    if path is None:
        return None
    import yaml

    try:
        data = yaml.safe_load(Path(path).read_text()) or {}
    except yaml.YAMLError as err:
        raise click.BadParameter(f"{path} is not valid YAML: {err}") from None
    if not isinstance(data, dict):
        raise click.BadParameter(f"{path} should hold a mapping of option names to values")
    commands = ctx.command.commands if isinstance(ctx.command, click.Group) else {}
    shared = {k: v for k, v in data.items() if k not in commands}
    default_map = {}
    for name, command in commands.items():
        section = data.get(name) or {}
        if not isinstance(section, dict):
            raise click.BadParameter(f"section {name!r} of {path} should be a mapping")
        # a mapping (recipe:) in both is merged field by field, the section's fields winning
        merged = {**shared, **{k: {**shared[k], **v} if isinstance(v, dict) and isinstance(shared.get(k), dict) else v
                               for k, v in section.items()}}
        default_map[name] = _defaults_for(command, merged)
        unknown = [k for k in section if str(k).replace("-", "_") not in _option_names(command)]
        if unknown:
            raise click.BadParameter(f"{path}: section {name!r} has unknown option(s) {', '.join(map(str, unknown))}")
    known = set().union(*(_option_names(c) for c in commands.values())) if commands else set()
    unknown = [k for k in shared if str(k).replace("-", "_") not in known]
    if unknown:
        raise click.BadParameter(f"{path}: unknown option(s) {', '.join(map(str, unknown))}")
    ctx.default_map = default_map
    return path


def _option_names(command) -> set:
    return {opt.lstrip("-").replace("-", "_") for p in command.params for opt in getattr(p, "opts", [])}


def _defaults_for(command, values: dict) -> dict:
    """Config keys are option names ("fraction", "run-dir"); click's default_map wants parameter names."""
    by_option = {}
    for param in command.params:
        for opt in getattr(param, "opts", []):
            by_option[opt.lstrip("-").replace("-", "_")] = param
    defaults = {}
    for key, value in values.items():
        param = by_option.get(str(key).replace("-", "_"))
        if param is None:
            continue  # a key meant for another command
        if getattr(param, "multiple", False) and not isinstance(value, (list, tuple)):
            value = [value]
        defaults[param.name] = value
    return defaults


def _options(factory, **values):
    """factory(**values): an options dataclass, whose checks' UserError is a usage error (exit code 2)."""
    from roarfast.errors import UserError

    try:
        return factory(**values)
    except UserError as err:
        raise click.UsageError(str(err)) from None


def _friendly_errors(func):
    """Turns errors the user can fix (bad input, a missing or stale extension build, a full disk or a
    read-only directory) into one-line messages instead of tracebacks."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        from roarfast._extension import ExtensionError
        from roarfast.errors import UserError, is_write_refused, write_error

        try:
            return func(*args, **kwargs)
        except (UserError, ExtensionError) as err:
            raise click.ClickException(str(err)) from None
        except OSError as err:
            if not is_write_refused(err):
                raise
            raise click.ClickException(str(write_error(err, err.filename or "a file", "what was written before is "
                                                                                       "intact"))) from None

    return wrapper


@click.group(context_settings={"help_option_names": ["-h", "--help"], "show_default": True})
@click.option("--config", type=click.Path(exists=True, dir_okay=False), callback=_load_config, is_eager=True,
              expose_value=False, help="YAML file of defaults: top-level keys for every command, or a section per command")
@click.version_option(package_name="roarfast")
def main():
    """roarfast: the ROAR interpretability benchmark (RemOve And Retrain), end to end, fast.

    A session on the embedded dataset: `roarfast train`, then `roarfast extract --method sg-sq`,
    then `roarfast retrain --fraction 0.7`; or everything at once with `roarfast run`.
    """
    from roarfast.memory import keep_freed_memory

    keep_freed_memory()  # before torch loads: every command's CPU work reuses freed memory (issue 13)


@main.command()
@run_options
@data_options
@click.option("--model", default=None, help=MODEL_HELP + " (default: by dataset and device)")
@click.option("--epochs", type=int, default=None, help="training epochs (default: the model's recipe)")
@click.option("--batch-size", type=int, default=None, help="batch size (default: the model's recipe)")
@recipe_option
@amp_option
@_friendly_errors
def train(run_dir, device, seed, progress, dataset, data_dir, data_option, model, epochs, batch_size, recipe, amp):
    """Train the base classifier on the unmodified dataset (validation split held out for model selection)."""
    from roarfast.basemodel import TrainOptions, run_train

    options = _options(TrainOptions, model=model, epochs=epochs, batch_size=batch_size, amp=amp, recipe=recipe)
    summary = run_train(run_dir, options, dataset=dataset, data_dir=data_dir, dataset_options=data_option,
                        device=device, seed=seed, progress=progress)
    click.echo(f"base model: val {summary['val_acc']:.2%}, test {summary['test_acc']:.2%} "
               f"-> {summary['checkpoint']}")


def _parameter_option(parameter):
    """The flag of an estimator or ranking parameter, its type, default and help from its table entry."""
    kind = click.Choice(parameter.choices) if parameter.choices else parameter.kind
    return click.option(*parameter.flags, parameter.name, type=kind, default=parameter.default, help=parameter.help)


#: the estimator parameters that have flags, and the ranking options (roarfast.methods.parameters)
parameter_options = _stack(*(_parameter_option(p) for p in (*PARAMETERS.values(), *RANKING.values()) if p.flags))

method_arg_option = click.option(
    "--method-arg", "method_arg", multiple=True, callback=_data_options, metavar="NAME=VALUE",
    help="an estimator's parameter or argument, repeatable, values read as YAML (--method-arg samples=30, "
         "--method-arg sliding_window_shapes=[3,8,8] for captum:Occlusion); each estimator gets those it takes, "
         "and a name none takes is refused with what each takes")


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
@_friendly_errors
def extract(run_dir, device, seed, progress, dataset, data_dir, data_option, methods, splits, batch_size, method_arg,
            amp, keep_maps, force, compile_model, **parameters):
    """Attribution maps for every train and test image -> per-pixel ranks in the rank store. A store made with
    other values (a parameter, an argument, the estimator's code, the base model) is made again."""
    from roarfast.extract import ExtractOptions, run_extract

    options = ExtractOptions(methods=methods, splits=parse_list(splits), batch_size=batch_size, amp=amp,
                             keep_maps=keep_maps, force=force, compile=compile_model, method_args=method_arg,
                             **parameters)
    run_extract(run_dir, options, dataset=dataset, data_dir=data_dir, dataset_options=data_option, device=device,
                seed=seed, progress=progress)


#: --group-size of retrain and sweep (a cell's results do not depend on it: how cells train, not what)
GROUP_SIZE_OPTION = click.option(
    "--group-size", type=click.IntRange(min=1), default=None,
    help="cells trained together by one loop, each with its own seed, masks and row (default: the device's, "
         "from benchmarks/RESULTS.md: 1 on CPU and GPU)")


@main.command()
@run_options
@data_options
@click.option("--fraction", "fractions", multiple=True, callback=_fractions, default=["0.7"],
              help="fraction(s) of pixels removed (ROAR) or kept (KAR); repeat or comma-separate")
@click.option("--method", "methods", default=None, help="methods to retrain on (default: every stored method, plus random)")
@click.option("--mode", "modes", default=ROAR, help=f"{', '.join(MODES)} or {','.join(MODES)}")
@click.option("--seeds", type=int, default=1, help="retrainings per cell (seeds 0..N-1)")
@click.option("--model", default=None, help=f"model to retrain: {MODEL_HELP} (default: the base model's)")
@click.option("--epochs", type=int, default=None, help="training epochs (default: the base model's recipe)")
@recipe_option
@click.option("--fill", type=click.Choice(FILLS.names), default=DEFAULT_FILL,
              help=f"what replaces removed pixels: {FILLS.listing()}")
@click.option("--mask-only/--no-mask-only", default=False,
              help="beside every cell, a control trained and tested on its removal pattern alone (mode "
                   "roar-mask / kar-mask): how much the mask's shape tells about the class")
@amp_option
@GROUP_SIZE_OPTION
@_friendly_errors
def retrain(run_dir, device, seed, progress, dataset, data_dir, data_option, fractions, methods, modes, seeds, model,
            epochs, recipe, fill, mask_only, amp, group_size):
    """Retrain from scratch on masked data for each method and fraction; evaluate on masked test."""
    from roarfast.cli.tables import retrain_table
    from roarfast.retrain import RetrainOptions, run_retrain

    options = _options(RetrainOptions, fractions=tuple(fractions), methods=methods, modes=parse_list(modes),
                       seeds=seeds, model=model, epochs=epochs, fill=fill, amp=amp, mask_only=mask_only, recipe=recipe)
    rows = run_retrain(run_dir, options, dataset=dataset, data_dir=data_dir, dataset_options=data_option,
                       device=device, seed=seed, progress=progress, group_size=group_size)
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
@click.option("--model", default=None,
              help=f"{MODEL_HELP} (default: the base model's, else by dataset and device); trains the base model "
                   f"when the run directory has none, and every cell")
@click.option("--epochs", type=int, default=None,
              help="training epochs of each cell (default: the preset's, else the model's recipe)")
@recipe_option
@amp_option
@click.option("--cam-layer", "gradcam_layer", default=None, help=PARAMETERS["gradcam_layer"].help)
@method_arg_option
@click.option("--executor", type=click.Choice(EXECUTORS), default="local",
              help="local: cells one after another in this process; ray: one Ray task per cell")
@click.option("--address", default=None, help="Ray cluster address (default: start a local Ray instance)")
@click.option("--cpus-per-cell", type=float, default=None,
              help="Ray: CPUs per cell, each a training thread  [default: the threads a cell trains with under "
                   "--executor local (torch's count: one per core, or OMP_NUM_THREADS), so both give the same rows]")
@click.option("--gpus-per-cell", type=float, default=0.0, help="Ray: GPUs per cell, fractions allowed (0.25: four "
              "small models share a GPU)")
@click.option("--dry-run", is_flag=True, help="print the plan (cells done, to do, ETA) and stop")
@GROUP_SIZE_OPTION
@_friendly_errors
def sweep(run_dir, device, seed, progress, dataset, data_dir, data_option, preset, methods, fractions, modes, seeds,
          control, control_seeds, fill, model, epochs, recipe, amp, gradcam_layer, method_arg, executor, address,
          cpus_per_cell, gpus_per_cell, dry_run, group_size):
    """The whole grid: base model, ranks, then every cell (method x mode x fraction x seed, each with its
    mask-only control) that results.sqlite lacks. Safe to kill and rerun; several sweeps may share a run
    directory (cells are claimed before they are trained)."""
    from roarfast.executors import RayOptions
    from roarfast.extract import ExtractOptions
    from roarfast.grid import preset_grid
    from roarfast.sweep import run_sweep

    grid = _options(preset_grid, name=preset, methods=methods, fractions=tuple(fractions) if fractions else None,
                    modes=None if modes is None else parse_list(modes), seeds=seeds, control=control,
                    control_seeds=control_seeds, fill=fill, model=model, epochs=epochs, amp=amp, first_seed=seed,
                    recipe=recipe or None)
    ray = _options(RayOptions, address=address, cpus_per_cell=cpus_per_cell, gpus_per_cell=gpus_per_cell)
    run_sweep(run_dir, grid, executor=executor, ray=ray, dry_run=dry_run, dataset=dataset, data_dir=data_dir,
              dataset_options=data_option, device=device, seed=seed, progress=progress,
              extract_options=_options(ExtractOptions, gradcam_layer=gradcam_layer, method_args=method_arg),
              echo=click.echo, group_size=group_size)


@main.command()
@run_options
@click.option("--data-option", "data_option", multiple=True, callback=_data_options, metavar="KEY=VALUE",
              help="embedded dataset option, repeatable: num_train, num_test, seed, copies")
@click.option("--fraction", "fractions", multiple=True, callback=_fractions, default=None,
              help="fractions of the grid (default: the one covering the object, 0.25, 0.5)")
@click.option("--method", "methods", default=None, help=METHOD_FORMS + " (default: the quick preset's)")
@click.option("--seeds", type=int, default=None, help="retrainings per cell (default: the quick preset's 3)")
@click.option("--epochs", type=int, default=None, help="training epochs of each cell (default: the quick preset's)")
@_friendly_errors
def run(run_dir, device, seed, progress, data_option, fractions, methods, seeds, epochs):
    """The main job on the embedded dataset: the quick sweep (train, extract, retrain ROAR and KAR over seeds
    with mask-only controls), then the report; prints the verdicts and the dataset's own checks."""
    from roarfast.demo import run_demo

    run_demo(run_dir, device=device, seed=seed, progress=progress, fractions=fractions, methods=methods, seeds=seeds,
             epochs=epochs, dataset_options=data_option)


@main.command()
@run_options
@data_options
@click.option("--metric", "metrics", default=",".join(NO_RETRAIN_METRICS),
              help=f"{', '.join(NO_RETRAIN_METRICS)} (road = MoRF and LeRF with the imputation fill), comma-separated")
@click.option("--fraction", "fractions", multiple=True, callback=_fractions, default=["0.1,0.3,0.5,0.7,0.9"],
              help="fraction(s) of pixels replaced; repeat or comma-separate")
@click.option("--method", "methods", default=None, help="methods to evaluate (default: every method with test ranks)")
@click.option("--batch-size", type=int, default=None, help="images per batch (default: by device)")
@_friendly_errors
def evaluate(run_dir, device, seed, progress, dataset, data_dir, data_option, metrics, fractions, methods, batch_size):
    """No-retrain evaluations of the base model on the rank store: MoRF, LeRF, ROAD (results.sqlite)."""
    from roarfast.cli.tables import no_retrain_table
    from roarfast.noretrain import NoRetrainOptions, run_noretrain

    options = _options(NoRetrainOptions, metrics=parse_list(metrics), fractions=tuple(fractions), methods=methods,
                       batch_size=batch_size)
    rows = run_noretrain(run_dir, options, dataset=dataset, data_dir=data_dir, dataset_options=data_option,
                         device=device, progress=progress)
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
@_friendly_errors
def leakage(run_dir, device, seed, progress, dataset, data_dir, data_option, fills, fractions, method, max_images):
    """Fill leakage: a per-pixel detector's accuracy at finding removed pixels after each fill, vs the base rate."""
    from roarfast.cli.tables import fill_leakage_table
    from roarfast.fill_leakage import FillLeakageOptions, run_fill_leakage

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
@_friendly_errors
def report(run_dir, out_dir):
    """Tables, figures and verdicts (estimators against random, leakage, ranking) from results.sqlite."""
    from roarfast.report import write_report

    written = write_report(run_dir, out_dir)
    for line in written.verdict_lines():
        click.echo(line)
    click.echo(f"report: {written.index_html}")


@main.command()
def doctor():
    """Versions, whether CUDA kernels were compiled and for which archs, GPUs, DALI, Ray."""
    from roarfast.doctor import report_lines

    for line in report_lines():
        click.echo(line)
