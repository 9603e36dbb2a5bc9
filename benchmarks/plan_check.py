"""A GPU round's command lines checked on a machine without a GPU, so that a loan's minutes are not spent on a
typo or an import that moved (scripts/gpu_check.sh --plan runs each of its stages' commands through this):

    python benchmarks/plan_check.py [env V=X] [timeout N] [compute-sanitizer --tool T ...] PYTHON COMMAND...

COMMAND is checked without running it:
  -m pytest ARGS      collected (--collect-only) with its -m and -k: at least one test must be selected
  -m roarfast.cli ... parsed by the click group and its command (option values checked by their callbacks)
  SCRIPT.py ARGS      every import the script makes (at its top and inside its functions, and those of the
                      benchmarks modules it imports) resolved, its arguments parsed by its own main(); a script
                      defining plan(args) is then handed the parsed arguments to check the commands it would run
  setup.py ...        the file is there (the build itself needs the GPU machine's nvcc and torch)
Exit 0 when the command would start; else 1, with one line saying what would fail.
"""

import argparse
import ast
import importlib
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
#: compute-sanitizer's options that the stages use: each takes one value
SANITIZER_VALUED = ("--tool", "--error-exitcode", "--target-processes", "--racecheck-report", "--leak-check")


class Parsed(Exception):
    """Raised by the patched ArgumentParser.parse_args with what it parsed: the script stops before any work."""

    def __init__(self, namespace):
        super().__init__("parsed")
        self.namespace = namespace


def strip_wrappers(argv: list) -> list:
    """The command under `env V=X ...`, `timeout [--opt] N` and `compute-sanitizer OPTIONS`: PYTHON ARGS..."""
    argv = list(argv)
    while argv:
        if argv[0] == "env":
            argv = argv[1:]
            while argv and "=" in argv[0] and not argv[0].startswith("-"):
                argv = argv[1:]
        elif argv[0] == "timeout":
            argv = argv[1:]
            while argv and argv[0].startswith("-"):
                argv = argv[1:]
            argv = argv[1:]  # the duration
        elif Path(argv[0]).name == "compute-sanitizer":
            argv = argv[1:]
            while argv and argv[0].startswith("--"):
                argv = argv[2:] if argv[0] in SANITIZER_VALUED else argv[1:]
        else:
            return argv
    return argv


def imports_of(path: Path) -> list:
    """(line, module, names) of each absolute import in `path`, at any depth, except those under a `try` that
    catches ImportError (optional there by design)."""
    tree = ast.parse(path.read_text(), str(path))
    optional = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Try) and any(
                h.type is None or "ImportError" in ast.unparse(h.type) or "Exception" in ast.unparse(h.type)
                for h in node.handlers):
            optional.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    found = []
    for node in ast.walk(tree):
        if id(node) in optional:
            continue
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name, ()) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            found.append((node.lineno, node.module, tuple(a.name for a in node.names)))
    return sorted(found)


def unresolved(path: Path, seen: set | None = None) -> list:
    """One line per import of `path` (and of the benchmarks modules it imports) that does not resolve here."""
    seen = set() if seen is None else seen
    seen.add(path)
    lines = []
    for line, module, names in imports_of(path):
        where = f"{path.relative_to(ROOT)}:{line}"
        try:
            loaded = importlib.import_module(module)
        except ImportError as error:
            lines.append(f"{where}: import {module}: {error}")
            continue
        for name in names:
            if name != "*" and not hasattr(loaded, name):
                try:
                    importlib.import_module(f"{module}.{name}")
                except ImportError:
                    lines.append(f"{where}: {module} has no {name}")
        if module.split(".")[0] == "benchmarks":
            for candidate in [module, *(f"{module}.{n}" for n in names)]:
                file = ROOT / (candidate.replace(".", "/") + ".py")
                if file.is_file() and file not in seen:
                    lines += unresolved(file, seen)
    return lines


def parse_script(script: Path, args: list):
    """The script's arguments as its main() parses them (its module imported, its work never started)."""
    name = "benchmarks." + script.stem if script.parent == ROOT / "benchmarks" else script.stem
    module = importlib.import_module(name)
    original = argparse.ArgumentParser.parse_args

    def parse_only(self, argv=None, namespace=None):
        raise Parsed(original(self, argv, namespace))

    argparse.ArgumentParser.parse_args = parse_only
    try:
        module.main(args)
    except Parsed as parsed:
        return module, parsed.namespace
    finally:
        argparse.ArgumentParser.parse_args = original
    raise SystemExit(f"{script}: main() returned without parsing its arguments")


def click_parses(args: list) -> None:
    """`roarfast ARGS` parsed as the command line would, without running the command (SystemExit on a bad one)."""
    import click  # late: only the roarfast commands need it, and it loads with roarfast.cli

    from roarfast.cli import main as group

    try:
        with group.make_context("roarfast", list(args)) as ctx:
            name, command, rest = group.resolve_command(ctx, [*ctx.protected_args, *ctx.args])
            command.make_context(name, rest, parent=ctx).close()
    except click.ClickException as error:
        raise SystemExit(f"roarfast {' '.join(args)}: {error.format_message()}") from None


def selected(collected: str) -> int:
    """Tests listed by `pytest --collect-only`: one `path::name` line each (-q), or `path: N` per file (-qq)."""
    count = 0
    for line in collected.splitlines():
        if "::" in line:
            count += 1
        elif line.endswith(tuple("0123456789")) and ".py: " in line:
            count += int(line.rsplit(": ", 1)[1])
    return count


def check(argv: list) -> str:
    """What `argv` would run, checked; returns a line saying what was checked (SystemExit when it would fail)."""
    command = strip_wrappers(argv)
    if len(command) < 2:
        raise SystemExit(f"not a Python command: {' '.join(argv)}")
    args = command[1:]
    if args[:2] == ["-m", "pytest"]:
        collect = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q",
                                  *[a for a in args[2:] if not a.startswith("--junitxml")]],
                                 cwd=ROOT, capture_output=True, text=True)
        tests = selected(collect.stdout)
        if collect.returncode not in (0, 5) or not tests:
            tail = (collect.stdout + collect.stderr).strip().splitlines()[-3:]
            raise SystemExit(f"pytest {' '.join(args[2:])}: {tests} tests selected; {' / '.join(tail)}")
        return f"pytest: {tests} tests selected"
    if args[:2] == ["-m", "roarfast.cli"]:
        click_parses(args[2:])
        return f"roarfast {args[2]}: parsed"
    script = (ROOT / args[0]).resolve()
    if not script.is_file():
        raise SystemExit(f"{args[0]}: no such file")
    if script.name == "setup.py":
        return "setup.py: present (built on the GPU machine)"
    missing = unresolved(script)
    if missing:
        raise SystemExit("; ".join(missing))
    module, namespace = parse_script(script, args[1:])
    detail = module.plan(namespace) if hasattr(module, "plan") else None
    return f"{args[0]}: imports resolve, arguments parse" + (f"; {detail}" if detail else "")


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--"]:
        argv = argv[1:]
    print(check(argv))


if __name__ == "__main__":
    main()
