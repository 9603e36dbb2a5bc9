"""The options the `roarfast` commands share, defined once and stacked on several commands (run directory,
dataset, model, recipe, AMP, the estimators' parameters), the parsing of option text (KEY=VALUE pairs,
fractions), the `--config FILE` defaults, and the one-line errors every command shows instead of a
traceback: an option value that does not parse or check is one line naming the option and the text
(`OneLineGroup`, `OptionError`). The commands themselves are in roarfast/cli/__init__.py.

Light on purpose: the model and dataset lists come from their declarations (roarfast.models.registry,
roarfast.data.registry), which import no torch, so that every --help answers at once.
"""

import functools
from pathlib import Path

import click
import yaml
from click.core import ParameterSource

from roarfast._extension import ExtensionError
from roarfast.data.registry import DATASETS
from roarfast.errors import UserError, is_write_refused, write_error
from roarfast.methods.parameters import PARAMETERS, RANKING
from roarfast.models import MODELS
from roarfast.common.plugins import TRUST_FLAG, user_named
from roarfast.common.options import MAX_SEED
from roarfast.execution.registry import EXECUTORS
from roarfast.recipe import AMP_CHOICES, PLUGIN_SMALL_IMAGE, RECIPE_FIELDS
from roarfast.rundir.labels import check_name

DEFAULT_RUN_DIR = "runs/default"


class OptionError(click.ClickException):
    """A bad option value, shown as one line ("Error: ..."), with a usage error's exit code but without click's
    usage banner."""

    exit_code = 2


class _OneLineUsage:
    """A click command whose usage errors (an option's value that does not parse, an unknown option) are
    OptionError's one line, without the usage and the hint click prints above them."""

    def make_context(self, *args, **kwargs):
        try:
            return super().make_context(*args, **kwargs)
        except click.exceptions.NoArgsIsHelpError:
            raise  # the help itself, not an error
        except click.UsageError as err:
            raise OptionError(err.format_message()) from None


class OneLineCommand(_OneLineUsage, click.Command):
    """A `roarfast` command (OneLineGroup.command_class)."""


class OneLineGroup(_OneLineUsage, click.Group):
    """The `roarfast` group: its own options and its commands' (command_class) fail in one line."""

    command_class = OneLineCommand


def _stack(*decorators):
    """Applies several click decorators as one, so shared options are defined once."""

    def apply(func):
        for decorator in reversed(decorators):
            func = decorator(func)
        return func

    return apply


def model_option(text: str):
    """--model, its help `text` with {models} replaced by the forms it takes and the built-ins (MODELS)."""
    return click.option("--model", default=None, help=text.format(
        models=f"{MODELS.forms()}; the built-ins: {MODELS.listing()}; models other than the built-ins train with the "
               f"default recipe of their image size (up to {PLUGIN_SMALL_IMAGE} px or larger; README, 'Your model and "
               f"data'), --recipe changes it"))


def _dataset_help() -> str:
    """--dataset's help: the forms it takes and the built-ins (DATASETS) with their options."""
    builtins = "; ".join(f"{entry.name}: {entry.description}"
                         + (f" (--data-option {', '.join(entry.options)})" if entry.options else "")
                         for entry in DATASETS)
    return (f"{DATASETS.forms()}; the built-ins: {builtins}  [default: what `train` recorded in the run directory, "
            f"else embedded]")


run_options = _stack(
    click.option("--run-dir", type=click.Path(file_okay=False, path_type=Path), default=DEFAULT_RUN_DIR,
                 show_default=True, help="where checkpoints, the rank store and results live"),
    click.option("--device", default="auto", show_default=True, help="auto | cpu | cuda | cuda:N"),
    click.option("--seed", type=click.IntRange(0, MAX_SEED), default=0, show_default=True, help="seed of the run"),
    click.option("--progress/--no-progress", default=True, show_default=True, help="progress bars"),
)


def _yaml_error(err) -> str:
    """A YAML parse error in one line: what was wrong and where (PyYAML's own message spans several)."""
    mark = getattr(err, "problem_mark", None)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    return f"{getattr(err, 'problem', None) or type(err).__name__}{where}"


def _data_options(ctx, param, value):
    """KEY=VALUE pairs (or mappings, from a config file) -> dict, values read as YAML scalars (3 -> int, true ->
    bool)."""
    options = {}
    for item in value or ():
        if isinstance(item, dict):
            options.update({str(key).replace("-", "_"): val for key, val in item.items()})
            continue
        key, sep, text = str(item).partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"expected KEY=VALUE, got {item!r}")
        try:
            options[key.strip().replace("-", "_")] = yaml.safe_load(text)
        except yaml.YAMLError as err:
            raise click.BadParameter(f"{item!r}: {text!r} is not a YAML value ({_yaml_error(err)}); write a number, "
                                     f"true/false, null, a list [3, 8, 8], or a string (quoted where it holds "
                                     f"[ ] {{ }} , : #)") from None
    return options


data_options = _stack(
    click.option("--dataset", default=None, help=_dataset_help()),
    click.option("--data-dir", type=click.Path(path_type=Path), default=None,
                 help="dataset root (CIFAR or torchvision on-disk format, a JPEG tree with train/ and val/ or test/, "
                      "or a factory's data_dir)"),
    # UNPROCESSED: a config file's mapping reaches _data_options whole (a str type would stringify it)
    click.option("--data-option", "data_option", multiple=True, type=click.UNPROCESSED, callback=_data_options,
                 metavar="KEY=VALUE",
                 help="loader option, repeatable: every dataset num_train/num_test (a seeded subset, each class in "
                      "proportion; embedded generates that many), embedded seed/copies; cifar download=true; "
                      "imagefolder resize/crop (default: the images' own size when they share one, else 256/224), "
                      "skip_bad/device/stream (stream=auto|true|false: decode batch by batch from disk instead of "
                      "holding the canvases in memory); torchvision:<Class> and a factory: their own keyword "
                      "arguments"),
)

#: where the work runs: here, or on a Ray cluster (extract's chunks; a sweep's chunks and cells)
executor_options = _stack(
    click.option("--executor", type=click.Choice(EXECUTORS.names), default="local",
                 help="local: in this process; ray: on a Ray cluster, each chunk of a split's images (--chunk-images) "
                      "and each retraining cell a task (README, 'On a cluster')"),
    click.option("--address", default=None, help="Ray cluster address (default: start a local Ray instance)"),
    click.option("--cpus-per-task", type=float, default=None,
                 help="Ray: CPUs per extraction task, each a thread  [default: the threads of this process (torch's "
                      "count: one per core, or OMP_NUM_THREADS), so that the ranks equal a local extraction's; 1 "
                      "with --gpus-per-task]"),
    click.option("--gpus-per-task", type=float, default=0.0, show_default=True,
                 help="Ray: GPUs per extraction task (then computed on CUDA), fractions allowed"),
    click.option("--chunk-images", type=int, default=None,
                 help="images per chunk of a new rank store: the unit of resumption, and of a task on Ray  [default: "
                      "512]"),
)


def _recipe(ctx, param, value):
    """--recipe FIELD=VALUE pairs over the config file's recipe: mapping (field by field) -> dict."""
    configured = {}
    if ctx.get_parameter_source(param.name) is ParameterSource.COMMANDLINE:
        configured = _data_options(ctx, param, ctx.lookup_default(param.name) or ())
    return {**configured, **_data_options(ctx, param, value)}


recipe_option = click.option(
    "--recipe", "recipe", multiple=True, type=click.UNPROCESSED, callback=_recipe, metavar="FIELD=VALUE",
    help=f"training recipe field, repeatable (--recipe lr=0.02 --recipe ema_decay=null); fields: "
         f"{', '.join(RECIPE_FIELDS)}; a config file takes a `recipe:` mapping; wins over --epochs, --batch-size "
         f"and a preset's epochs")


def _name(ctx, param, value):
    """--name: checked before any work (roarfast.rundir.labels.check_name); one used by another configuration is
    refused when the configuration is recorded, before any cell trains."""
    if value is None:
        return None
    try:
        return check_name(value)
    except UserError as err:
        raise click.BadParameter(str(err).removeprefix(f"--name {value}: ")) from None


name_option = click.option(
    "--name", "name", default=None, callback=_name, metavar="NAME",
    help="what to call this request's configuration: `report --config NAME` and `roarfast ls` use it; refused when "
         "another configuration of the run directory goes by it  [default: a label saying what differs from the "
         "configuration before it]")


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

    try:
        data = yaml.safe_load(Path(path).read_text()) or {}
    except yaml.YAMLError as err:
        raise click.BadParameter(f"{path} is not valid YAML ({_yaml_error(err)})") from None
    except (OSError, UnicodeDecodeError) as err:
        raise click.BadParameter(f"cannot read {path} as YAML text ({err})") from None
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
        default_map[name] = _defaults_for(command, merged, path)
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


def _defaults_for(command, values: dict, path) -> dict:
    """Config keys are option names ("fraction", "run-dir"); click's default_map wants parameter names. The
    values of number options are checked as a flag's text would be (_config_number)."""
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
        defaults[param.name] = _config_number(param, key, value, path)
    return defaults


def _config_number(param, key, value, path):
    """`value` of a number option from the config file `path`, refused (naming the option and the file) where
    the flag would refuse its text: click casts a default with int(), which would silently truncate
    `epochs: 1.7` to 1 and read `seeds: true` as 1."""
    integer = isinstance(param.type, click.types.IntParamType)
    if not integer and not isinstance(param.type, click.types.FloatParamType):
        return value
    if isinstance(value, str):  # parsed as the flag's text is
        try:
            ok = (int if integer else float)(value) is not None
        except ValueError:
            ok = False
    else:
        ok = not isinstance(value, bool) and isinstance(value, int if integer else (int, float))
    if not ok:
        raise click.BadParameter(f"{path}: {key} should be {'an integer' if integer else 'a number'} (as "
                                 f"{param.opts[0]} takes it), got {value!r}")
    return value


def _options(factory, **values):
    """factory(**values): an options dataclass, whose checks' UserError is a usage error (exit code 2, one
    line)."""
    try:
        return factory(**values)
    except UserError as err:
        raise OptionError(str(err)) from None


def _friendly_errors(func):
    """Turns errors the user can fix (bad input, a missing or stale extension build, a full disk or a
    read-only directory) into one-line messages instead of tracebacks."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
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


def trust_option(func):
    """--trust-run-dir, and the scope the command runs in (roarfast.common.plugins.user_named): a record of the run
    directory may name the import paths the command's --model, --dataset and --method name again, or any with
    --trust-run-dir; otherwise opening a run directory imports nothing it names."""
    @functools.wraps(func)
    def command(*args, trust_run_dir=False, **kwargs):
        specs = [kwargs.get("model"), kwargs.get("dataset")]
        for key in ("methods", "method"):  # comma-separated estimators
            specs += str(kwargs.get(key) or "").split(",")
        with user_named(specs, kwargs["run_dir"] if trust_run_dir else None):
            return func(*args, **kwargs)

    return click.option(TRUST_FLAG, "trust_run_dir", is_flag=True,
                        help="let the run directory's records (its model, dataset and estimators) name code to "
                             "import: only for run directories whose author you trust (without it, a plug-in the "
                             "records name is imported only when you name it again: --model, --dataset, --method)"
                        )(command)


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


#: --margin of report, sweep and run (points; roarfast.stats.levels.MARGIN says why 5)
margin_option = click.option(
    "--margin", type=click.FloatRange(min=0, max=100, min_open=True, max_open=True), default=None, metavar="POINTS",
    help="the smallest accuracy difference worth reporting, in points: a learner must beat chance by more to show "
         "learning, an estimator within it of random is \"no different\" (two one-sided tests)  [default: the one the "
         "sweep recorded, else 5]")


class SeedsType(click.ParamType):
    """--seeds of sweep: a number of seeds, or `auto` (added where a verdict is undecided: roarfast.stages.seeds_auto)."""

    name = "N|auto"

    def convert(self, value, param, ctx):
        if value is None or isinstance(value, int) or value == "auto":
            return value
        try:
            return int(value)
        except ValueError:
            self.fail(f"expected a number of seeds or `auto`, got {value!r}", param, ctx)


#: --detect and --max-seeds of sweep: what the seeds are planned for
seeds_plan_options = _stack(
    click.option("--detect", type=click.FloatRange(min=0, max=100, min_open=True), default=None, metavar="POINTS",
                 help="the difference from random (accuracy points) the seeds should detect with 80% power: the dry "
                      "run says how many seeds that needs; with --seeds auto, the most seeds it adds"),
    click.option("--max-seeds", type=click.IntRange(min=2, max=1000), default=None,
                 help="--seeds auto: the most seeds per cell  [default: what --detect needs, at most 10]"))
