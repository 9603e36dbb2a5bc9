"""The run summary: which estimators beat random, and the embedded dataset's checks."""

from roarfast.pipeline import verdict


def row(method, mode, fraction, acc):
    return {"method": method, "mode": mode, "fraction": fraction, "test_acc": acc}


def test_beating_random_needs_more_than_noise():
    rows = [row("random", "roar", 0.5, 0.90), row("grad", "roar", 0.5, 0.60), row("sobel", "roar", 0.5, 0.895)]
    line = verdict(rows, unmodified=0.95, chance=0.1, covering=0.0625)[0]
    assert "grad (-30.0)" in line and "sobel" not in line


def test_checks_pass_and_fail_on_the_margins():
    good = [row("oracle", "roar", 0.0625, 0.15), row("random", "roar", 0.5, 0.9), row("oracle", "kar", 0.0625, 0.9),
            row("oracle", "roar-mask", 0.0625, 0.19)]
    lines = verdict(good, unmodified=0.95, chance=0.1, covering=0.0625)
    assert sum("check:" in l and ": ok" in l for l in lines) == 4
    bad = [row("oracle", "roar", 0.0625, 0.35), row("random", "roar", 0.5, 0.4), row("oracle", "kar", 0.0625, 0.7),
           row("oracle", "roar-mask", 0.0625, 0.25)]
    lines = verdict(bad, unmodified=0.95, chance=0.1, covering=0.0625)
    assert sum("FAILED" in l for l in lines) == 4
    assert any("mask-shape leakage): FAILED (25.0%)" in l for l in lines)
