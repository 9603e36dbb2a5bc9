"""`roarfast --config FILE`: a YAML file of defaults that flags override, read into click's default_map: top-level
keys apply to every command, a section named after a command to that command only; a key no command takes, or a
number option's value that its flag would refuse, is a usage error naming the file."""

from pathlib import Path

import click
import yaml

from roarfast.common.options import yaml_error


def load_config(ctx, param, path):
    """Reads a YAML config into ctx.default_map (safe loader; flags still override)."""
    if path is None:
        return None

    try:
        data = yaml.safe_load(Path(path).read_text()) or {}
    except yaml.YAMLError as err:
        raise click.BadParameter(f"{path} is not valid YAML ({yaml_error(err)})") from None
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
