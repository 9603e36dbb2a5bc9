"""The options of the `roarfast` commands, each declared once. The library's option groups (RunOptions,
CellLayout, DataOptions, GridOptions, ExecutorOptions and each executor's own: dataclasses whose fields declare
their flags, roarfast.common.options.flag) become click options here (`options_of`, `executor_options`), and a
command receives each group as one object, built and checked (a failed check: one line, exit code 2); a single
field's flag serves commands that take it alone (`field_option`: --model, --recipe, --amp, --fill). And the
options several commands stack that no group holds: --name, --method-arg, the estimators' parameters,
--trust-run-dir.

Light on purpose: every declaration read here imports no torch, so that every --help answers at once.
"""

import functools
from dataclasses import MISSING, fields, is_dataclass
from pathlib import Path

import click
from click.core import ParameterSource

from roarfast.cli.errors import built
from roarfast.common.options import FLAG, Flag, flags_of, parse_pairs
from roarfast.common.plugins import TRUST_FLAG, user_named
from roarfast.errors import UserError
from roarfast.execution.registry import EXECUTORS, ExecutorOptions
from roarfast.methods.parameters import PARAMETERS, RANKING
from roarfast.methods.registry import method_forms
from roarfast.planning.grid_options import GridOptions, model_help
from roarfast.rundir.labels import check_name, name_refusal

METHOD_FORMS = method_forms()
#: --model's help on the stages that load the base model
NAMED_AGAIN = ("the base model, named again as `train` took it: needed only where it is a plug-in "
               "(package.module:factory), which the run directory's record alone never imports")


def _text(value) -> str:
    """A help that is text, or a function returning it (read now)."""
    return value() if callable(value) else value


def _click_type(declared: Flag):
    if declared.choices is not None:
        return click.Choice(list(_text(declared.choices)))
    if declared.kind is Path:
        return click.Path(file_okay=not declared.directory, path_type=Path)
    if declared.kind is int and (declared.low is not None or declared.high is not None):
        return click.IntRange(declared.low, declared.high)
    if declared.kind is object:  # the value as it comes: a config file's mapping whole
        return click.UNPROCESSED
    return declared.kind


def _callback(declared: Flag):
    """The click callback of a flag whose value is parsed (declared.parse): its UserError is the option's one-line
    usage error; a `layered` flag given on the command line lays its pairs over the config file's."""
    if declared.parse is None:
        return None

    def parse(ctx, param, value):
        try:
            configured = {}
            if declared.layered and ctx.get_parameter_source(param.name) is ParameterSource.COMMANDLINE:
                configured = declared.parse(ctx.lookup_default(param.name) or ())
            parsed = declared.parse(value)
            return {**configured, **parsed} if declared.layered else parsed
        except UserError as err:
            raise click.BadParameter(str(err)) from None

    return parse


def click_option(name: str, declared: Flag, *, default=None, help=None):
    """The click option of a declared flag, its parameter `name`; `default` (a repeated flag's: its texts) and
    `help` as this command shows it (default: the declaration's help)."""
    switch = {"is_flag": True} if declared.kind is bool and "/" not in declared.decls[0] else {}
    return click.option(*declared.decls, name, type=None if switch else _click_type(declared), default=default,
                        multiple=declared.multiple, metavar=declared.metavar, show_default=declared.show_default,
                        callback=_callback(declared), help=_text(declared.help if help is None else help), **switch)


def _default(each) -> object:
    """A field's default as its flag takes it: a repeated flag's None (it parses an empty tuple)."""
    if each.metadata[FLAG].multiple or each.default is MISSING:
        return None
    return each.default


def field_option(cls, name: str, **changes):
    """The flag of the field `name` of the options dataclass `cls`, as a click option of that parameter name;
    `changes`: its default or help on this command."""
    each = next(each for each in fields(cls) if each.name == name)
    return click_option(name, each.metadata[FLAG], **{"default": _default(each), **changes})


def options_of(cls, keyword: str, **changes):
    """Decorator: the flags of the options dataclass `cls` as click options, the command receiving them as one
    object, `keyword`=cls(**values), built and checked (a UserError: one line, exit code 2). `changes`: {field:
    {"default": ..., "help": ...}} where this command shows a flag otherwise."""
    declared = flags_of(cls)

    def decorate(func):
        @functools.wraps(func)
        def command(*args, **kwargs):
            values = {each.name: kwargs.pop(each.name) for each, _ in declared}
            return func(*args, **{keyword: built(cls, **values)}, **kwargs)

        for each, _ in reversed(declared):
            command = field_option(cls, each.name, **changes.get(each.name, {}))(command)
        return command

    return decorate


def executor_options(*uses: str):
    """Decorator: --executor and the flags of every backend's options that apply to the work `uses` names (CELLS,
    CHUNKS: roarfast.common.options), as the registry declares them; the command receives
    executor=ExecutorOptions, each backend's options built from its flags (those not shown at their defaults)."""
    declared = [(entry.name, each, each.metadata[FLAG]) for entry in EXECUTORS if entry.options_type is not None
                for each, flag in flags_of(entry.options_type) if set(flag.uses) & set(uses)]
    taken = [decl for _, _, flag in declared for decl in flag.decls]
    if len(taken) != len(set(taken)):
        raise ValueError(f"executors declare the same flag twice: {sorted(d for d in taken if taken.count(d) > 1)}")

    def decorate(func):
        @functools.wraps(func)
        def command(*args, executor, **kwargs):
            backends = {entry.name: {} for entry in EXECUTORS if entry.options_type is not None}
            for backend, each, _ in declared:
                backends[backend][each.name] = kwargs.pop(_param(backend, each.name))
            return func(*args, executor=built(ExecutorOptions, executor=executor, backends=backends), **kwargs)

        for backend, each, flag in reversed(declared):
            command = click_option(_param(backend, each.name), flag, default=_default(each))(command)
        return field_option(ExecutorOptions, "executor")(command)

    return decorate


def _param(backend: str, name: str) -> str:
    """The click parameter of a backend's option: the backend's name before the field's (two may share one)."""
    return f"{backend}_{name}".replace("-", "_")


#: --chunk-images of extract and sweep (ExtractOptions.chunk_images)
chunk_images_option = click.option(
    "--chunk-images", type=int, default=None,
    help="images per chunk of a new rank store: the unit of resumption, and of a task on Ray, rounded up to whole "
         "compute batches  [default: 512]")
#: --compute-batch of extract and sweep: the batch the estimators compute (part of a rank store's id where given)
compute_batch_option = click.option("--compute-batch", type=int, default=None, help=RANKING["compute_batch"].help)


def _name(ctx, param, value):
    """--name: checked before any work (roarfast.rundir.labels.name_refusal); one used by another configuration is
    refused when the configuration is recorded, before any cell trains."""
    if value is None:
        return None
    why = name_refusal(value)
    if why is not None:
        raise click.BadParameter(why)
    return check_name(value)


name_option = click.option(
    "--name", "name", default=None, callback=_name, metavar="NAME",
    help="what to call this request's configuration: `report --config NAME` and `roarfast ls` use it; refused when "
         "another configuration of the run directory goes by it  [default: a label saying what differs from the "
         "configuration before it]")


def model_option(text: str):
    """--model, its help `text` with {models} replaced by the forms it takes and the built-ins (model_help)."""
    return field_option(GridOptions, "model", help=model_help(text))


recipe_option = field_option(GridOptions, "recipe")
amp_option = field_option(GridOptions, "amp")


def _named(kwargs) -> tuple:
    """(the run directory, the specs the command's --model, --dataset and --method name) of a command's
    arguments, read from its option groups (RunOptions, DataOptions, GridOptions) and its own options."""
    found = dict(kwargs)
    for value in kwargs.values():
        if is_dataclass(value) and not isinstance(value, type):
            found.update({each.name: getattr(value, each.name) for each in fields(value)})
    specs = [found.get("model"), found.get("dataset")]
    for key in ("methods", "method"):  # comma-separated estimators
        specs += str(found.get(key) or "").split(",")
    return found["run_dir"], specs


def trust_option(func):
    """--trust-run-dir, and the scope the command runs in (roarfast.common.plugins.user_named): a record of the run
    directory may name the import paths the command's --model, --dataset and --method name again, or any with
    --trust-run-dir; otherwise opening a run directory imports nothing it names."""
    @functools.wraps(func)
    def command(*args, trust_run_dir=False, **kwargs):
        run_dir, specs = _named(kwargs)
        with user_named(specs, run_dir if trust_run_dir else None):
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


def parameter_options(func):
    """The estimator parameters that have flags, and the ranking options (roarfast.methods.parameters)."""
    for parameter in reversed([p for p in (*PARAMETERS.values(), *RANKING.values()) if p.flags]):
        func = _parameter_option(parameter)(func)
    return func


def _pairs(ctx, param, value):
    try:
        return parse_pairs(value)
    except UserError as err:
        raise click.BadParameter(str(err)) from None


method_arg_option = click.option(
    "--method-arg", "method_arg", multiple=True, callback=_pairs, metavar="NAME=VALUE",
    help="an estimator's parameter or argument, repeatable, values read as YAML (--method-arg samples=30, "
         "--method-arg sliding_window_shapes=[3,8,8] for captum:Occlusion); each estimator gets those it takes, "
         "and a name none takes is refused with what each takes")


#: --margin of report, sweep and run (points; roarfast.stats.levels.MARGIN says why 5)
margin_option = click.option(
    "--margin", type=click.FloatRange(min=0, max=100, min_open=True, max_open=True), default=None, metavar="POINTS",
    help="the smallest accuracy difference worth reporting, in points: a learner must beat chance by more to show "
         "learning, an estimator within it of random is \"no different\" (two one-sided tests)  [default: the one the "
         "sweep recorded, else 5]")


#: --detect and --max-seeds of sweep: what the seeds are planned for
_DETECT = click.option(
    "--detect", type=click.FloatRange(min=0, max=100, min_open=True), default=None, metavar="POINTS",
    help="the difference from random (accuracy points) the seeds should detect with 80% power: the dry run says how "
         "many seeds that needs; with --seeds auto, the most seeds it adds")
_MAX_SEEDS = click.option("--max-seeds", type=click.IntRange(min=2, max=1000), default=None,
                          help="--seeds auto: the most seeds per cell  [default: what --detect needs, at most 10]")


def seeds_plan_options(func):
    """Decorator: --detect and --max-seeds."""
    return _DETECT(_MAX_SEEDS(func))
