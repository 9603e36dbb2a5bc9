"""One test image masked exactly as retraining saw it: a row per method, a column per mode and fraction.
The only part of the report that reads the dataset and the rank store, and imports the compiled extension
(when it draws); a grid that cannot be drawn becomes a note. About the reported configurations of the data it
draws (the report's: roarfast.report.load): its methods and columns are those of every one, each method's ranks
those of the first that names it (HEAD's where none does: cells made before base models were recorded)."""

from functools import partial

import numpy as np
import torch

from roarfast._extension import ExtensionError
from roarfast.data.base import FileSet
from roarfast.errors import UserError
from roarfast.fills import DEFAULT_FILL, resolve_fill
from roarfast.modes import MODES
from roarfast.report.analysis import parts_of
from roarfast.report.figures import pyplot
from roarfast.report.load import method_order
from roarfast.report.sections import RUN, Figure, register

EXAMPLE_INDEX = 0  # the test image drawn in the example grid


def figures(summary: dict, context, run) -> list:
    fills = sorted({fill for p in parts_of(summary) for fill in p["fills"]})
    shown = f"the fill {shown_fill(fills)}" if fills else "the fill"
    return [Figure("examples.png", f"Test image {EXAMPLE_INDEX} as retraining saw it, the removed pixels given {shown} "
                                   f"(rows: estimators; columns: mode and fraction)",
                   partial(_draw, summary, context, run))]


def shown_fill(fills: list) -> str:
    """The fill the grid shows: the paper's where the cells have it, else the first."""
    return DEFAULT_FILL if DEFAULT_FILL in fills else fills[0]


def _draw(summary: dict, context, run, width: float):
    """The figure `width` inches wide, or None (with a note in the summary, once, when the store or the extension
    cannot serve)."""
    try:
        grid = example_grid(summary, context, run)
    except (UserError, ExtensionError) as err:
        note = f"example images not drawn: {err}"
        if note not in summary["notes"]:
            summary["notes"].append(note)
        return None
    return None if grid is None else figure_examples(*grid, width)


def example_grid(summary: dict, context, run):
    """(images float ndarray[rows, cols, H, W, C] in [0, 1], row labels, column labels, fill name) of test image
    EXAMPLE_INDEX of `context.dataset` (the LoadedRun's) masked as retraining masked it (the fill's `apply`,
    then back to pixels), or None when there is nothing to draw. Raises UserError when the store or fill cannot serve.
    The only part of the report that needs the compiled extension: it is imported here."""
    ds = context.dataset
    if ds is None:
        return None
    # the configurations of the data drawn (cells of other data have their ranks of that data: not drawn here)
    parts = [p for p in parts_of(summary) if _made(p["configuration"]).get("dataset") in (None, ds.fingerprint)]
    fills = sorted({fill for p in parts for fill in p["fills"]})
    groups = [g for p in parts for g in p["groups"]]
    if not fills:
        return None
    if isinstance(ds.test, FileSet):
        raise UserError("the dataset is streamed from disk; the grid draws in-memory datasets only")
    fill_name = shown_fill(fills)
    fill = resolve_fill(fill_name)
    columns = [(mode, f) for mode in MODES for f in sorted({g["fraction"] for g in groups
                                                            if g["mode"] == mode and g["fill"] == fill_name})]
    ids, bases = {}, {}
    for part in reversed(parts):  # the first configuration naming a method gives its ranks
        configuration = part["configuration"]
        ids.update(configuration.get("ranks") or {})
        bases.update(dict.fromkeys(configuration.get("ranks") or {}, _made(configuration).get("base")))
    store = run.ranks_for({**run.head().ranks, **ids})
    stored = set(store.methods("test"))
    methods = sorted({g["method"] for g in groups if g["mode"] in MODES} & stored, key=method_order)
    if not methods or not columns:
        return None
    image = ds.test.images[EXAMPLE_INDEX:EXAMPLE_INDEX + 1]
    mean = torch.tensor(ds.mean).view(1, -1, 1, 1)
    std = torch.tensor(ds.std).view(1, -1, 1, 1)
    original = image.float().div(255)[0].permute(1, 2, 0).numpy()
    rows = []
    for method in methods:
        ranks = run.read_ranks(method, "test", ds.fingerprint, rank_id=ids.get(method),
                               base=bases.get(method)).rows([EXAMPLE_INDEX])
        row = [original]
        for mode, fraction in columns:
            x = fill.apply(image, ranks, float(fraction), mode == "kar", mean=ds.mean, std=ds.std,
                           ids=torch.tensor([EXAMPLE_INDEX]))
            row.append((x * std + mean).clamp(0, 1)[0].permute(1, 2, 0).numpy())
        rows.append(row)
    labels = ["original"] + [f"{mode.upper()}\n{f:.0%}" for mode, f in columns]
    return np.stack([np.stack(r) for r in rows]), methods, labels, fill_name


#: the room the row labels (estimators' names) and the column labels take beside the images (inches)
LABEL_WIDTH, LABEL_HEIGHT = 0.7, 0.35


def figure_examples(images, row_labels: list, col_labels: list, fill: str, width: float):
    """The example grid `width` inches wide: rows = methods, columns = original then mode x fraction (the fill is
    the caption's to say)."""
    plt = pyplot()

    rows, cols = images.shape[:2]
    side = min(1.0, (width - LABEL_WIDTH) / cols)  # square images, no larger than an inch
    fig, axes = plt.subplots(rows, cols, figsize=(width, side * rows + LABEL_HEIGHT), squeeze=False,
                             layout="constrained")
    for r in range(rows):
        for c in range(cols):
            ax = axes[r][c]
            picture = images[r, c]
            ax.imshow(picture[..., 0] if picture.shape[-1] == 1 else picture, cmap="gray" if picture.shape[-1] == 1
                      else None, vmin=0, vmax=1, interpolation="nearest")
            ax.set_xticks([])
            ax.set_yticks([])
            ax.spines[:].set_visible(False)
            if r == 0:
                ax.set_title(col_labels[c])
            if c == 0:
                ax.set_ylabel(row_labels[r])
    return fig


register("examples", "one test image masked as retraining saw it, per method, mode and fraction", 90,
         figures=figures, scope=RUN)


def _made(configuration: dict) -> dict:
    """What a configuration's cells were made with, as its summary holds it (its data, its base model), or {}."""
    return (configuration.get("config") or {}).get("config") or {}
