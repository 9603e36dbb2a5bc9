"""The report's figures (matplotlib, Agg: files only), drawn from the summary (roarfast.report.analysis):
the paper's accuracy-vs-fraction panels, base estimators against their SmoothGrad ensembles, each method
beside its mask-only control, and one test image masked exactly as retraining saw it (the example grid,
which alone reads the dataset and the rank store, and imports the compiled extension when it draws).
"""

from collections import defaultdict
from pathlib import Path

from roarfast.errors import UserError
from roarfast.fills import DEFAULT_FILL, resolve_fill
from roarfast.modes import KAR, MODES, ROAR, control_mode
from roarfast.report.analysis import LEAK_INCONCLUSIVE, LEAK_STANDS, LEAKY_NO_VERDICT, shown_bounds
from roarfast.report.load import method_order

BASE_ESTIMATORS = ("grad", "ig", "gb")
ENSEMBLES = ("sg", "sg-sq", "var")
AXIS = {ROAR: "fraction of pixels removed (%)", KAR: "fraction of pixels kept (%)"}
#: how a leaky cell is marked on its curve, per leak reading: (marker, colour, legend label)
LEAK_MARKS = {LEAK_STANDS: ("o", "black", "leaky control, verdict stands"),
              LEAK_INCONCLUSIVE: ("s", "red", "leaky control, verdict INCONCLUSIVE"),
              LEAKY_NO_VERDICT: ("D", "0.45", "leaky control, no verdict drawn")}
EXAMPLE_INDEX = 0  # the test image drawn in the example grid
FIGURE_DPI = 110


def write_figures(summary: dict, run, context, out_dir: Path) -> list:
    """Draws and saves every figure of RunDir `run`'s summary into out_dir; returns [{file, title, kind}]. An
    example grid that cannot be drawn becomes a note in the summary."""
    plt = _pyplot()
    files = []

    def save(fig, name, title, kind):
        if fig is None:
            return
        fig.savefig(out_dir / name, dpi=FIGURE_DPI, bbox_inches="tight")
        plt.close(fig)
        files.append({"file": name, "title": title, "kind": kind})

    for fill in summary["fills"]:
        save(figure_accuracy(summary, fill), f"accuracy_{fill}.png",
             f"Test accuracy against the fraction of pixels removed (ROAR) or kept (KAR), fill {fill}", "accuracy")
        save(figure_ensembles(summary, fill), f"ensembles_{fill}.png",
             f"Base estimators against their SmoothGrad ensembles, fill {fill}", "ensembles")
    save(figure_fills(summary), "fills.png", "The fills side by side, with how visible each fill's holes are",
         "fills")
    save(figure_controls(summary), "controls.png", "Each method's ROAR/KAR curve beside its mask-only control",
         "controls")
    from roarfast._extension import ExtensionError

    try:
        grid = example_grid(summary, context, run)
    except (UserError, ExtensionError) as err:
        summary["notes"].append(f"example images not drawn: {err}")
        grid = None
    if grid is not None:
        save(figure_examples(*grid), "examples.png",
             f"Test image {EXAMPLE_INDEX} as retraining saw it (rows: methods; columns: mode and fraction)",
             "examples")
    return files


def _pyplot():
    """matplotlib.pyplot on the Agg backend: files only, no display needed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _groups(summary: dict, mode: str, fill) -> dict:
    """method -> sorted [(fraction, group)] of one mode and fill."""
    out = defaultdict(list)
    for g in summary["groups"]:
        if g["mode"] == mode and g["fill"] == fill:
            out[g["method"]].append((g["fraction"], g))
    return {m: sorted(v, key=lambda t: t[0]) for m, v in out.items()}


def _colors(summary: dict) -> dict:
    """method -> colour, the same in every figure: tab20's dark shades first, then its light ones."""
    import matplotlib

    palette = matplotlib.colormaps["tab20"].colors
    palette = palette[0::2] + palette[1::2]
    methods = sorted({g["method"] for g in summary["groups"]} - {"random"})
    return {m: palette[i % len(palette)] for i, m in enumerate(methods)}


def _draw_curve(ax, points, label, color=None, linestyle="-"):
    """One method's mean accuracy (%) against fraction (%), its 95% interval shaded where n >= 2."""
    x = [100 * f for f, _ in points]
    y = [100 * g["mean"] for _, g in points]
    (line,) = ax.plot(x, y, marker="o", markersize=4, label=label, color=color, linestyle=linestyle)
    spread = [(xi, *(100 * b for b in shown_bounds(g))) for xi, (_, g) in zip(x, points) if g["low"] is not None]
    if spread:
        xs, lo, hi = zip(*spread)
        ax.fill_between(xs, lo, hi, color=line.get_color(), alpha=0.15, linewidth=0)
    return line


def _draw_random(ax, points):
    """random as a grey band (its 95% interval; its mean alone with one seed) with a dashed mean."""
    x = [100 * f for f, _ in points]
    y = [100 * g["mean"] for _, g in points]
    bounds = [shown_bounds(g) if g["low"] is not None else (g["mean"], g["mean"]) for _, g in points]
    ax.fill_between(x, [100 * lo for lo, _ in bounds], [100 * hi for _, hi in bounds], color="0.6", alpha=0.35,
                    linewidth=0, label="random, 95% interval")
    ax.plot(x, y, color="0.35", linestyle="--", label="random")


def _figure_legend(fig, axes) -> None:
    """One legend for all panels, right of them: every label drawn in any panel, once."""
    entries = {}
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            entries.setdefault(label, handle)
    fig.legend(list(entries.values()), list(entries), loc="outside right center", fontsize=8)


def _decorate(ax, summary, mode, title):
    if summary["chance"] is not None:
        ax.axhline(100 * summary["chance"], color="0.2", linestyle=":", linewidth=1, label="chance")
    if summary["base"].get("test_acc") is not None:
        ax.axhline(100 * summary["base"]["test_acc"], color="tab:green", linestyle="-.", linewidth=1,
                   label="base model (unmodified)")
    fractions = sorted({100 * g["fraction"] for g in summary["groups"] if g["mode"] in (mode, control_mode(mode))})
    ax.set_xticks(fractions)
    ax.set_xlabel(AXIS.get(mode, "fraction (%)"))
    ax.set_ylabel("test accuracy (%)")
    ax.set_title(title)
    ax.set_ylim(0, 102)
    ax.grid(alpha=0.3)


def figure_accuracy(summary: dict, fill: str):
    """The paper's figure: a ROAR and a KAR panel, one line per estimator with its 95% interval, random as
    a shaded band. Returns the Figure (None when neither mode has cells with this fill)."""
    plt = _pyplot()

    modes = [m for m in MODES if _groups(summary, m, fill)]
    if not modes:
        return None
    colors = _colors(summary)
    fig, axes = plt.subplots(1, len(modes), figsize=(6.5 * len(modes) + 2.5, 4.8), squeeze=False,
                             layout="constrained")
    for ax, mode in zip(axes[0], modes):
        _accuracy_panel(ax, summary, mode, fill, colors, f"{mode.upper()} (fill {fill})")
    _figure_legend(fig, axes.flat)
    fig.suptitle("Test accuracy after retraining; shaded: 95% t-interval over seeds")
    return fig


def _accuracy_panel(ax, summary: dict, mode: str, fill: str, colors: dict, title: str) -> None:
    """One panel of the paper's figure: every estimator's curve of `mode` and `fill`, random as a band, leaky
    points marked by what their leak does to the verdict (LEAK_MARKS)."""
    curves = _groups(summary, mode, fill)
    if "random" in curves:
        _draw_random(ax, curves["random"])
    for method in sorted(curves, key=method_order):
        if method != "random":
            _draw_curve(ax, curves[method], method, colors[method])
    _decorate(ax, summary, mode, title)
    for leak, (marker, color, label) in LEAK_MARKS.items():  # last: their legend entries stay together
        # ringed: the control alone is above chance, so the point partly measures the pattern's shape;
        # the mark says whether the verdict survives that (DESIGN.md section 13)
        leaky = [e for e in summary["verdicts"] if (e["mode"], e["fill"], e["leak"]) == (mode, fill, leak)]
        if leaky:
            ax.scatter([100 * e["fraction"] for e in leaky], [100 * e["mean"] for e in leaky], s=160,
                       marker=marker, facecolors="none", edgecolors=color, linewidths=1.4, zorder=5, label=label)


def figure_fills(summary: dict):
    """The fills side by side: a row per fill (ROAR and KAR panels), each row's title with how visible that
    fill's holes are (fill leakage: the detector's accuracy against the base rate, per fraction measured).
    None unless the cells hold two fills or more."""
    plt = _pyplot()

    fills = summary["fills"]
    modes = [m for m in MODES if any(_groups(summary, m, fill) for fill in fills)]
    if len(fills) < 2 or not modes:
        return None
    colors = _colors(summary)
    leakage = defaultdict(list)
    for row in summary.get("fill_leakage") or []:
        leakage[row["fill"]].append(row)
    fig, axes = plt.subplots(len(fills), len(modes), figsize=(6.0 * len(modes) + 2.5, 4.5 * len(fills)),
                             squeeze=False, layout="constrained")
    for row, fill in enumerate(fills):
        for col, mode in enumerate(modes):
            # the detector removes pixels whatever the mode: said once per row, in its first panel
            holes = _holes_found(leakage[fill]) if col == 0 else ""
            _accuracy_panel(axes[row][col], summary, mode, fill, colors, f"{mode.upper()}, fill {fill}{holes}")
            axes[row][col].title.set_fontsize(10 if holes else 11)
    _figure_legend(fig, axes.flat)
    fig.suptitle("Test accuracy after retraining, one row per fill (hole detector: pixel accuracy at finding the "
                 "removed pixels vs the base rate); shaded: 95% t-interval over seeds")
    return fig


def _holes_found(rows: list) -> str:
    """A panel title's lines for one fill's leakage rows: the hole detector's pixel accuracy per fraction
    removed, and the base rates it must beat ("" when the fill was not measured)."""
    if not rows:
        return ""
    rows = sorted(rows, key=lambda r: r["fraction"])

    def percents(key):
        return ", ".join(f"{r[key]:.0%}" for r in rows)

    return (f"\nhole detector: {percents('accuracy')} at {percents('fraction')} removed\n"
            f"(base rates {percents('base_rate')})")


def _family(method: str) -> str | None:
    """The base estimator of a method of the SmoothGrad families (grad for sg-sq-grad), or None."""
    for base in BASE_ESTIMATORS:
        if method == base or any(method == f"{e}-{base}" for e in ENSEMBLES):
            return base
    return None


def figure_ensembles(summary: dict, fill: str):
    """Base estimators against their SG / SG-SQ / VAR ensembles: a panel per base estimator present (and
    mode), random as a band. None when no base estimator has an ensemble member in the results."""
    plt = _pyplot()

    modes = [m for m in MODES if _groups(summary, m, fill)]
    panels = []
    for base in BASE_ESTIMATORS:
        members = {m for mode in modes for m in _groups(summary, mode, fill) if _family(m) == base}
        if len(members) >= 2 or (members and base not in members):
            panels.append((base, sorted(members, key=lambda m: (m != base, m))))
    if not panels:
        return None
    colors = _colors(summary)
    fig, axes = plt.subplots(len(modes), len(panels), figsize=(5.2 * len(panels) + 2.5, 4.2 * len(modes)),
                             squeeze=False, layout="constrained")
    for row, mode in enumerate(modes):
        curves = _groups(summary, mode, fill)
        for col, (base, members) in enumerate(panels):
            ax = axes[row][col]
            if "random" in curves:
                _draw_random(ax, curves["random"])
            for method in members:
                if method in curves:
                    _draw_curve(ax, curves[method], method, colors[method])
            _decorate(ax, summary, mode, f"{base} and its ensembles, {mode.upper()}")
    _figure_legend(fig, axes.flat)
    fig.suptitle(f"Base estimators against SG / SG-SQ / VAR (fill {fill}); shaded: 95% t-interval over seeds")
    return fig


def figure_controls(summary: dict):
    """A panel per method and mode: its ROAR (KAR) curve per fill beside its mask-only control and chance.
    None when there are no controls."""
    plt = _pyplot()

    panels = []
    for mode in MODES:
        controls = _groups(summary, control_mode(mode), None)
        panels += [(mode, method) for method in sorted(controls, key=method_order)]
    if not panels:
        return None
    cols = min(4, len(panels))
    rows = -(-len(panels) // cols)
    leaky = {(e["method"], e["mode"]) for e in summary["leakage"] if e["leaky"]}
    fig, axes = plt.subplots(rows, cols, figsize=(4.3 * cols + 2.5, 3.6 * rows), squeeze=False,
                             layout="constrained")
    for ax in axes.flat[len(panels):]:
        ax.set_visible(False)
    for ax, (mode, method) in zip(axes.flat, panels):
        for fill in summary["fills"]:
            curve = _groups(summary, mode, fill).get(method)
            if curve:
                _draw_curve(ax, curve, f"{mode.upper()} ({fill})")
        _draw_curve(ax, _groups(summary, control_mode(mode), None)[method], "mask-only control", color="tab:red",
                    linestyle="--")
        _decorate(ax, summary, mode, f"{method}, {mode.upper()}")
        if (method, control_mode(mode)) in leaky:
            ax.set_title(f"{method}, {mode.upper()}: LEAKY control", color="firebrick")
    _figure_legend(fig, axes.flat)
    fig.suptitle("ROAR/KAR accuracy beside the mask-only control (trained on the removal pattern alone); "
                 "shaded: 95% t-interval over seeds")
    return fig


def example_grid(summary: dict, context, run):
    """(images float ndarray[rows, cols, H, W, C] in [0, 1], row labels, column labels, fill name) of test image
    EXAMPLE_INDEX masked as retraining masked it (the fill's `apply`, then back to
    pixels), or None when there is nothing to draw. Raises UserError when the store or fill cannot serve.
    The only part of the report that needs the compiled extension: it is imported here."""
    import numpy as np
    import torch

    from roarfast.data.base import FileSet

    ds = context.dataset
    if ds is None or not summary["fills"]:
        return None
    if isinstance(ds.test, FileSet):
        raise UserError("the dataset is streamed from disk; the grid draws in-memory datasets only")
    fill_name = DEFAULT_FILL if DEFAULT_FILL in summary["fills"] else summary["fills"][0]
    fill = resolve_fill(fill_name)
    columns = [(mode, f) for mode in MODES for f in sorted({g["fraction"] for g in summary["groups"]
                                                            if g["mode"] == mode and g["fill"] == fill_name})]
    store = run.rank_store
    stored = set(store.methods("test"))
    methods = sorted({g["method"] for g in summary["groups"] if g["mode"] in MODES} & stored, key=method_order)
    if not methods or not columns:
        return None
    image = ds.test.images[EXAMPLE_INDEX:EXAMPLE_INDEX + 1]
    mean = torch.tensor(ds.mean).view(1, -1, 1, 1)
    std = torch.tensor(ds.std).view(1, -1, 1, 1)
    original = image.float().div(255)[0].permute(1, 2, 0).numpy()
    rows = []
    for method in methods:
        ranks = run.read_ranks(method, "test", ds.fingerprint).rows([EXAMPLE_INDEX])
        row = [original]
        for mode, fraction in columns:
            x = fill.apply(image, ranks, float(fraction), mode == "kar", mean=ds.mean, std=ds.std,
                           ids=torch.tensor([EXAMPLE_INDEX]))
            row.append((x * std + mean).clamp(0, 1)[0].permute(1, 2, 0).numpy())
        rows.append(row)
    labels = ["original"] + [f"{mode.upper()} {f:.0%}" for mode, f in columns]
    return np.stack([np.stack(r) for r in rows]), methods, labels, fill_name


def figure_examples(images, row_labels: list, col_labels: list, fill: str):
    """The example grid: rows = methods, columns = original then mode x fraction."""
    plt = _pyplot()

    rows, cols = images.shape[:2]
    fig, axes = plt.subplots(rows, cols, figsize=(1.35 * cols + 1.0, 1.4 * rows + 0.6), squeeze=False,
                             layout="constrained")
    for r in range(rows):
        for c in range(cols):
            ax = axes[r][c]
            picture = images[r, c]
            ax.imshow(picture[..., 0] if picture.shape[-1] == 1 else picture, cmap="gray" if picture.shape[-1] == 1
                      else None, vmin=0, vmax=1, interpolation="nearest")
            ax.set_xticks([])
            ax.set_yticks([])
            if r == 0:
                ax.set_title(col_labels[c], fontsize=8)
            if c == 0:
                ax.set_ylabel(row_labels[r], fontsize=8)
    fig.suptitle(f"One test image as retraining saw it (removed pixels take the fill: {fill})", fontsize=10)
    return fig
