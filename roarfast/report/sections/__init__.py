"""The report's sections, one module each. A section is one object holding its numbers (the summary.json
keys it computes from the loaded measurements), its tables or lines, and its figures; the page (index.md,
index.html, summary.json with its list of figures) is assembled from the ordered list of sections, so a
section cannot be computed and then left out, nor a figure drawn and never shown.

Adding a section is one module here plus its test:

    from roarfast.report.sections import Figure, Table, register

    def numbers(loaded, summary):            # analyse: {summary.json key: JSON-able value}
        ...
    def tables(summary):                     # render: [Table | Lines], from the whole summary
        ...
    def figures(summary, context, run):      # draw: [Figure], each drawn at the width asked
        ...
    register("name", "what it shows, in one line", order=75, numbers=numbers, blocks=tables, figures=figures)

Each of the three is optional. `order` places the section on the page (the built-ins use 5, 10, ... 150);
its figures follow its blocks. Every module of this package is imported at the first listing
(roarfast.common.resolver's package discovery), which runs its `register`.

A section sees one configuration of the cells at a time (`scope=CONFIGURATION`, the default): a run
directory holding several (roarfast.rundir.catalog) has each analysed, drawn and shown apart, its
titles carrying the configuration's label, so no section can compare cells of two. What is the same in
every configuration is shown once. A section about the whole run (the configurations themselves, the
notes) registers with `scope=RUN`.

What the steps hand a section: `loaded` (roarfast.report.load.Loaded: one configuration's cells, raw rows
and context; with scope RUN, the LoadedRun), `summary` (roarfast.report.analysis.measured's shared numbers
of that configuration: configuration, fills, base, chance, groups, leakage, verdicts, notes; plus the
numbers of the sections placed before it; when rendering, all of it; with scope RUN, the run's summary,
whose configurations analysis.parts_of lists), `context` (load.Context: chance, the dataset when it could be
opened) and `run` (the RunDir).
"""

from collections.abc import Callable
from dataclasses import dataclass

from roarfast.common.resolver import Entry, Resolver, declaring_module

#: what a section sees: one configuration of the cells at a time, or the whole run
CONFIGURATION, RUN = "configuration", "run"
#: every report section, found in this package's modules
SECTIONS = Resolver("report section", "section", package=__name__)


@dataclass(frozen=True)
class Table:
    """A table: `header` (all empty: none shown) and `rows` of cells (rendered with str)."""

    title: str
    header: list
    rows: list


@dataclass(frozen=True)
class Lines:
    """A list of lines under a title."""

    title: str
    lines: list


@dataclass(frozen=True)
class Figure:
    """A figure a section draws: `draw(width)` returns the matplotlib Figure laid out `width` inches wide, its
    print size (roarfast.report.figures: COLUMN, PAGE; None: nothing to draw, so neither saved nor shown), saved
    as `file` and shown under `title`, which says what it shows (a paper's caption). `fill`: the fill it shows, if
    one (summary.json lists the figures fill by fill, then those of the whole run); `wide`: a paper prints it
    across the page rather than in a column (both widths are written)."""

    file: str
    title: str
    draw: Callable
    fill: str | None = None
    wide: bool = True


@dataclass(frozen=True)
class Section:
    """One part of the report (see the module's docstring for what each callable receives and returns)."""

    name: str
    numbers: Callable | None = None
    blocks: Callable | None = None
    figures: Callable | None = None
    scope: str = CONFIGURATION

    def __post_init__(self):
        if self.scope not in (CONFIGURATION, RUN):
            raise ValueError(f"report section {self.name!r}: scope should be {CONFIGURATION!r} or {RUN!r}, "
                             f"got {self.scope!r}")


def register(name: str, description: str, order: float, *, numbers=None, blocks=None, figures=None,
             scope: str = CONFIGURATION) -> Section:
    """Registers a section (a module of this package calls this as it is imported) and returns it; sections of
    one order follow the modules that define them."""
    section = Section(name, numbers, blocks, figures, scope)
    SECTIONS.register(Entry(name, description, value=section, order=order,
                            module=declaring_module(numbers or blocks or figures)))
    return section


def ordered() -> list[Section]:
    """The sections in page order."""
    return [entry.load() for entry in SECTIONS]
