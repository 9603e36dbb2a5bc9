"""The embedded dataset's checks that `roarfast run` prints (verdicts against random are the report's:
tests/test_report.py): each passes and fails on its margin, on the mean over seeds."""

from roarfast.orchestration.demo import embedded_checks


def row(method, mode, fraction, acc, seed=0):
    return {"method": method, "mode": mode, "fraction": fraction, "test_acc": acc, "seed": seed}


def test_checks_pass_and_fail_on_the_margins():
    good = [row("oracle", "roar", 0.0625, 0.15), row("random", "roar", 0.5, 0.9), row("oracle", "kar", 0.0625, 0.9),
            row("oracle", "roar-mask", 0.0625, 0.19)]
    checks = embedded_checks(good, unmodified=0.95, chance=0.1, covering=0.0625)
    assert [ok for _, ok, _ in checks] == [True] * 4
    bad = [row("oracle", "roar", 0.0625, 0.35), row("random", "roar", 0.5, 0.4), row("oracle", "kar", 0.0625, 0.7),
           row("oracle", "roar-mask", 0.0625, 0.25)]
    checks = embedded_checks(bad, unmodified=0.95, chance=0.1, covering=0.0625)
    assert [ok for _, ok, _ in checks] == [False] * 4
    text, _, acc = checks[3]
    assert "mask-shape leakage" in text and acc == 0.25


def test_checks_read_the_mean_over_seeds_and_skip_missing_cells():
    # oracle ROAR: seeds at 0.05 and 0.35 average 0.20, within 0.10 of chance; no KAR or control cells
    rows = [row("oracle", "roar", 0.0625, 0.05, 0), row("oracle", "roar", 0.0625, 0.35, 1),
            row("random", "roar", 0.5, 0.45)]
    checks = embedded_checks(rows, unmodified=0.95, chance=0.1, covering=0.0625)
    assert [(ok, round(acc, 6)) for _, ok, acc in checks] == [(True, 0.2), (False, 0.45)]
