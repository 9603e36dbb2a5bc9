"""Figures from a results frame (`roarfast.results.load(run_dir)`'s DataFrame, or any frame with its columns:
method, mode, fill, fraction, seed, test_acc; kind and test_chance where present), drawn as the report draws
them and returned as matplotlib Figures to restyle, annotate and save in any format:

    import roarfast
    frame = roarfast.results.load("runs/default")
    fig = roarfast.plot.accuracy_curves(frame, fill="dataset-mean")
    fig.axes[0].set_title("ROAR on CIFAR-10"); fig.savefig("roar.pdf")
    fig = roarfast.plot.ranking(frame, mode="kar")

A frame holds one configuration of the cells, or several told apart by a `configuration` column (pick one
with configuration=: its name, any label it was shown with, its id or an id prefix, as `roarfast report --config`
takes them); cells of two configurations are never drawn as one curve: a frame holding the same cell
twice is refused, saying how to filter it.
"""

import math
from dataclasses import dataclass, field

from roarfast.errors import UserError
from roarfast.fills import DEFAULT_FILL
from roarfast.modes import MODES
from roarfast.report.analysis import accuracies, measured
from roarfast.report.figures import (COLUMN, PAGE, accuracy_panel, figure_legend, method_colors, panel_grid,
                                     ranking_panel, styled)
from roarfast.report.load import Context, Loaded
from roarfast.report.sections.rankings import rankings
from roarfast.results import KIND_MODES, RETRAIN
from roarfast.records.ids import SHOWN_CHARS
from roarfast.rundir.labels import select

__all__ = ["accuracy_curves", "ranking", "summary"]

#: the columns a frame needs
COLUMNS = ("method", "mode", "fill", "fraction", "seed", "test_acc")
#: what identifies one cell: a frame holding one twice mixes configurations
_CELL = ("method", "mode", "fill", "fraction", "seed")


def summary(frame, configuration: str | None = None, chance: float | None = None) -> dict:
    """The report's numbers of the frame's retraining cells (roarfast.report.analysis.measured: groups with
    their intervals, verdicts against random, control tests; plus "rankings"), for the plots or a table.
    `chance`: the test split's chance rate, where the cells did not record it (test_chance): without it no
    control is tested, no point marked leaky and no chance line drawn."""
    records = _records(frame)
    if records and "configuration" in records[0]:
        owners = _owners(frame, records)
        if configuration is None and len(owners) > 1:
            raise UserError(f"the frame holds {len(owners)} configurations ({_choices(owners)}): name one with "
                            f"configuration= (its name, a label, its id or an id prefix)")
        if configuration is not None:
            chosen = select(owners, configuration, "configuration=").id
            records = [r for r in records if str(r["configuration"]) == chosen]
    cells = [_cell(r) for r in records if r.get("kind", RETRAIN) == RETRAIN and r.get("status", "done") == "done"
             and r["mode"] in KIND_MODES[RETRAIN]]  # a mode a later roarfast writes is left out, as the report does
    if not cells:
        raise UserError("the frame holds no finished retraining cells (kind 'retrain'): load a run directory "
                        "where `roarfast retrain` or `roarfast sweep` ran")
    seen = set()
    for c in cells:
        key = tuple(c[k] for k in _CELL)
        if key in seen:
            raise UserError(f"the frame holds the cell {dict(zip(_CELL, key))} twice: it mixes configurations; "
                            f"keep one (e.g. frame[frame.config_hash == ...], or roarfast report --config's "
                            f"cells.csv)")
        seen.add(key)
    chances = {c["test_chance"] for c in cells if c["test_chance"] is not None}
    if chance is None and len(chances) == 1:
        chance = chances.pop()
    context = Context(meta={}, chance=chance, chance_source="the frame", n_test=None)
    numbers = measured(Loaded(cells=cells, retrained=[], no_retrain=[], fill_leakage=[], context=context))
    numbers["rankings"] = rankings(accuracies(cells)[0])
    return numbers


def accuracy_curves(frame, fill: str | None = None, modes=None, configuration: str | None = None, ax=None,
                    chance: float | None = None, width: float = PAGE):
    """The paper's figure: test accuracy against the fraction removed (ROAR) or kept (KAR), one line per
    estimator with its 95% interval over seeds, random as the reference, leaky points marked; a panel per mode
    (`modes`: default every one the frame holds), of one `fill` (default: the paper's, else the first), laid out
    `width` inches wide (its print size: COLUMN, 3.3, stacks the panels; PAGE, 7, sets them side by side). With
    `ax`, draws one mode into it; `chance` as summary takes it. Returns the Figure."""
    numbers = summary(frame, configuration, chance)
    fill = _fill(numbers, fill)
    asked = list(MODES if modes is None else ([modes] if isinstance(modes, str) else modes))
    shown = [m for m in asked if any(g["mode"] == m and g["fill"] == fill for g in numbers["groups"])]
    if not shown:
        raise UserError(f"no cells of {', '.join(asked)} with fill {fill} in the frame")
    colors = method_colors(numbers)
    with styled() as plt:
        if ax is not None:
            if len(shown) > 1:
                raise UserError(f"ax= takes one mode: give modes= one of {', '.join(shown)}")
            accuracy_panel(ax, numbers, shown[0], fill, colors, f"{shown[0].upper()} (fill {fill})")
            ax.legend()  # in your axes: the figure is yours to lay out
            return ax.figure
        fig, axes, _ = panel_grid(plt, len(shown), width)
        for panel, mode in zip(axes, shown):
            accuracy_panel(panel, numbers, mode, fill, colors, f"{mode.upper()} (fill {fill})")
        figure_legend(fig, axes)
    return fig


def ranking(frame, mode: str = MODES[0], fill: str | None = None, configuration: str | None = None, ax=None,
            width: float = COLUMN):
    """The estimators ranked by the area under their accuracy curve (mean and 95% interval over seeds; with one
    fraction, the accuracy there) in `mode` and `fill`, best at the top, random marked, `width` inches wide.
    Returns the Figure."""
    if mode not in MODES:
        raise UserError(f"mode={mode!r}: give one of {', '.join(MODES)}")
    numbers = summary(frame, configuration)
    fill = _fill(numbers, fill)
    found = [r for r in numbers["rankings"] if (r["mode"], r["fill"]) == (mode, fill)]
    if not found or not found[0]["entries"]:
        raise UserError(f"no complete {mode} curve with fill {fill} in the frame to rank")
    with styled() as plt:
        if ax is None:
            _, ax = plt.subplots(figsize=(width, 0.2 * len(found[0]["entries"]) + 0.9), layout="constrained")
        ranking_panel(ax, found[0], method_colors(numbers), f"{mode.upper()} (fill {fill})")
    return ax.figure


@dataclass
class _Owner:
    """A configuration of the frame as roarfast.rundir.labels.select reads it: its id and what else selects it."""

    id: str
    known: list = field(default_factory=list)


def _owners(frame, records: list) -> list:
    """The frame's configurations, each with every text it answers to: the names its rows carry, and the names and
    labels results.load recorded (the frame's attrs["configurations"]: {id: [text]})."""
    recorded = getattr(frame, "attrs", {}).get("configurations") or {}
    owners = {}
    for r in records:
        cid = str(r["configuration"])
        owner = owners.setdefault(cid, _Owner(cid, list(recorded.get(cid, ()))))
        name = r.get("name")
        if not _missing(name) and str(name) not in owner.known:
            owner.known.append(str(name))
    return list(owners.values())


def _choices(owners: list) -> str:
    return "; ".join(f"{o.id[:SHOWN_CHARS]} [{o.known[0]}]" if o.known else o.id[:SHOWN_CHARS] for o in owners)


def _fill(numbers: dict, fill: str | None) -> str:
    fills = numbers["fills"]
    if fill is None:
        return DEFAULT_FILL if DEFAULT_FILL in fills or not fills else fills[0]
    if fill not in fills:
        raise UserError(f"fill={fill!r}: the frame's cells have {', '.join(fills) or 'no fill'}")
    return fill


def _records(frame) -> list:
    """The frame's rows as dicts (a DataFrame, or results.load's list of dicts without pandas)."""
    records = frame.to_dict("records") if hasattr(frame, "to_dict") else list(frame)
    missing = [c for c in COLUMNS if records and c not in records[0]]
    if missing:
        raise UserError(f"the frame lacks the columns {', '.join(missing)}: give roarfast.results.load(run_dir)'s")
    return records


def _missing(value) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _cell(record: dict) -> dict:
    """A frame's row as the report's cell: pandas' NaN read as None (a control's fill, a row without chance)."""
    cell = {k: (None if _missing(record.get(k)) else record.get(k)) for k in (*_CELL, "test_acc", "test_chance",
                                                                              "test_images")}
    cell["seed"] = None if cell["seed"] is None else int(cell["seed"])
    return cell
