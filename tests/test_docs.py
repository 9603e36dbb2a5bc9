"""The documentation: the command-line reference lists every command and option of `roarfast` (built alone here,
fast, from docs/reference/cli.md: the whole site is built by .ci/run with `sphinx -W`), and the README stays a
short front page whose links lead somewhere."""

import re
import shutil
import subprocess
import sys
from pathlib import Path

import click
import pytest

from roarfast.cli import main

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"

#: the CLI page alone: its own extensions only; links to the site's other pages are not there to resolve, every
#: other warning (a --help line that is not valid markup, say) fails the build
_CONF = f"""
import sys
sys.path[:0] = [{str(ROOT)!r}, {str(DOCS / "_ext")!r}]
extensions = ["myst_parser", "sphinx_click", "plain_text"]
suppress_warnings = ["myst.xref_missing"]
"""


@pytest.fixture(scope="module")
def cli_page(tmp_path_factory) -> str:
    for module in ("sphinx", "myst_parser", "sphinx_click"):
        pytest.importorskip(module, reason=f"{module} is not installed: pip install -e '.[docs]' builds the docs")
    src, out = tmp_path_factory.mktemp("src"), tmp_path_factory.mktemp("html")
    (src / "conf.py").write_text(_CONF)
    shutil.copy(DOCS / "reference" / "cli.md", src / "index.md")
    done = subprocess.run([sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html", str(src), str(out)],
                          capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    return (out / "index.html").read_text()


def _commands(group, prefix="roarfast"):
    """(the id prefix of each command's section, the command) of `group`, nested groups included."""
    ctx = click.Context(group)
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        yield f"{prefix}-{name}", command
        if isinstance(command, click.Group):
            yield from _commands(command, f"{prefix}-{name}")


def test_cli_reference_has_every_command_and_option(cli_page):
    ids = {found.lower() for found in re.findall(r'id="([^"]+)"', cli_page)}
    missing = []
    for section, command in _commands(main):
        if command.hidden:
            continue
        if section.lower() not in ids:
            missing.append(section)
        for param in command.params:
            if getattr(param, "hidden", False):
                continue
            if isinstance(param, click.Argument):
                expected = [f"cmdoption-{section}-arg-"]
                present = any(i.startswith(expected[0].lower()) for i in ids)
            else:
                expected = [f"cmdoption-{section}-{opt.lstrip('-')}" for opt in param.opts + param.secondary_opts]
                present = all(e.lower() in ids for e in expected)
            if not present:
                missing.append(f"{section}: {param.name} ({', '.join(expected)})")
    assert not missing, "not in docs/reference/cli.md's page: " + "; ".join(missing)


def test_cli_reference_counts_no_command_twice(cli_page):
    # one section per command: a second would mean the page nests the group twice (or lists a command by hand)
    sections = re.findall(r'<section id="(roarfast-[a-z-]+)"', cli_page)
    assert len(sections) == len(set(sections)) and len(sections) == len([c for _, c in _commands(main) if not c.hidden])


README = ROOT / "README.md"


def test_readme_is_short_and_keeps_the_quickstart():
    text = README.read_text()
    assert len(text.split()) <= 1500, f"README.md is {len(text.split())} words: the rest belongs in docs/"
    for command in ("bash scripts/run.sh", "bash scripts/test.sh"):
        assert command in text


def test_readme_links_lead_somewhere():
    text = README.read_text()
    targets = re.findall(r"\]\(([^)\s]+)\)", text)
    assert targets
    broken = [t for t in targets if "://" not in t and not t.startswith("#")
              and not (ROOT / t.split("#")[0]).exists()]
    assert not broken, f"README.md links to files that do not exist: {broken}"
