"""The text tables the commands print (only the command line prints tables): retrain's cells, the
no-retrain measurements and the fill-leakage measurements, each from results rows; what differs between the
configurations of a run directory (`roarfast ls --long`)."""

import math

from roarfast.rundir.labels import value_text


def retrain_table(rows) -> str:
    """Test accuracy per method (rows) and mode x fraction (columns), mean +- std over seeds."""
    # late: roarfast.stats loads scipy (1.6 s), which `ls` and `prune` (this module's other tables) never need
    from roarfast.stats import accuracy_over_seeds

    summary = accuracy_over_seeds(rows)
    if not summary:
        return "no cells"
    columns = sorted({(mode, fraction) for _, mode, fraction in summary})
    methods = sorted({m for m, _, _ in summary}, key=lambda m: (m != "random", m))
    header = ["method"] + [f"{mode} {fraction:g}" for mode, fraction in columns]
    lines = [header]
    for method in methods:
        line = [method]
        for mode, fraction in columns:
            cell = summary.get((method, mode, fraction))
            if cell is None:
                line.append("-")
            else:
                mean, std, n = cell
                line.append(f"{mean:.1%}" + (f" ±{std:.1%}" if n > 1 else ""))
        lines.append(line)
    widths = [max(len(row[i]) for row in lines) for i in range(len(header))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths)) for row in lines)


def no_retrain_table(rows) -> str:
    """One line per row: method, mode, fraction, accuracy and mean probability of the predicted class."""
    lines = [f"{'method':16s} {'mode':10s} {'fraction':>8s} {'test_acc':>8s} {'p(pred)':>8s}"]
    for r in sorted(rows, key=lambda r: (r["method"], r["mode"], r["fraction"])):
        lines.append(f"{r['method']:16s} {r['mode']:10s} {r['fraction']:8.2f} {r['test_acc']:8.3f} "
                     f"{(r.get('extra') or {}).get('mean_probability', math.nan):8.3f}")
    return "\n".join(lines)


def fill_leakage_table(rows) -> str:
    """One line per row: method, fill, fraction, the detector's pixel accuracy and the base rate."""
    lines = [f"{'method':12s} {'fill':14s} {'fraction':>8s} {'detector':>8s} {'base':>6s}"]
    for r in rows:
        lines.append(f"{r['method']:12s} {r['fill']:14s} {r['fraction']:8.2f} {r['test_acc']:8.3f} "
                     f"{r['extra']['base_rate']:6.3f}")
    return "\n".join(lines)


def text_table(header: list, rows: list) -> str:
    """Rows of text cells as aligned columns under their header."""
    lines = [[str(c) for c in header]] + [[str(c) for c in row] for row in rows]
    widths = [max(len(line[i]) for line in lines if i < len(line)) for i in range(len(lines[0]))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(line, widths)).rstrip() for line in lines)


def differs_table(configurations: list) -> str:
    """`roarfast ls --long`: a row per configuration (its id, what it goes by) and a column per setting whose
    values differ between them, each value whole (a digest cut short)."""
    settings = list(dict.fromkeys(name for c in configurations for name in c["differs"]))
    if not settings:
        return "what differs: nothing (one configuration)" if configurations else ""
    lines = [["id", "configuration", *settings]]
    lines += [[c["id"][:8], c["label"] or "-", *(value_text(c["differs"].get(name)) for name in settings)]
              for c in configurations]
    widths = [max(len(row[i]) for row in lines) for i in range(len(lines[0]))]
    return "what differs:\n" + "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip()
                                          for row in lines)
