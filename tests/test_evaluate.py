"""roarfast evaluate (MoRF / LeRF / ROAD without retraining): argument checks that write nothing, the
Kendall tau and estimator scores against hand-worked rows, and on the embedded dataset (slow): the
oracle first under MoRF and ROAD, random as good removed most- as least-relevant first."""

import math

import pytest
from click.testing import CliRunner

from roarfast.cli import main
from roarfast.errors import UserError
from roarfast.evaluate import (
    EvaluateOptions,
    estimator_scores,
    kendall_tau,
    parse_metrics,
    rank_agreement,
    run_evaluate,
)


def test_kendall_tau_hand_worked():
    a = {"x": 1.0, "y": 2.0, "z": 3.0}
    assert kendall_tau(a, a) == 1.0
    assert kendall_tau(a, {"x": 3.0, "y": 2.0, "z": 1.0}) == -1.0
    # pairs (x,y) concordant, (x,z) concordant, (y,z) discordant: (2 - 1) / 3
    assert kendall_tau(a, {"x": 0.0, "y": 2.0, "z": 1.0}) == pytest.approx(1 / 3)
    # a tie in b: tau-b = (2 - 0) / sqrt(3 * 2)
    assert kendall_tau(a, {"x": 0.0, "y": 1.0, "z": 1.0}) == pytest.approx(2 / math.sqrt(6))
    assert math.isnan(kendall_tau({"x": 1.0}, {"x": 2.0}))


def row(method, mode, fraction, acc):
    return {"method": method, "mode": mode, "fraction": fraction, "test_acc": acc, "status": "done"}


def test_estimator_scores_and_agreement_from_rows():
    rows = [row("oracle", "roar", 0.5, 0.1), row("random", "roar", 0.5, 0.8), row("grad", "roar", 0.5, 0.5),
            row("oracle", "morf", 0.3, 0.2), row("oracle", "morf", 0.7, 0.0), row("random", "morf", 0.5, 0.9),
            row("grad", "morf", 0.5, 0.95),
            row("oracle", "road-lerf", 0.5, 0.9), row("oracle", "road-morf", 0.5, 0.2),
            row("random", "road-lerf", 0.5, 0.6), row("random", "road-morf", 0.5, 0.6),
            row("grad", "road-lerf", 0.5, 0.7), row("grad", "road-morf", 0.5, 0.5)]
    scores = estimator_scores(rows)
    assert scores["morf"] == {"oracle": -0.1, "random": -0.9, "grad": -0.95}
    assert scores["road"] == pytest.approx({"oracle": 0.7, "random": 0.0, "grad": 0.2})
    assert set(scores) == {"roar", "morf", "road"}
    tau = rank_agreement(rows)
    assert set(tau) == {("roar", "morf"), ("roar", "road"), ("morf", "road")}
    assert tau[("roar", "road")] == 1.0  # oracle > grad > random in both
    assert tau[("roar", "morf")] == pytest.approx(1 / 3)  # morf: oracle > random > grad


def test_bad_metric_and_fraction():
    with pytest.raises(UserError, match="--metric should be a comma-separated subset of morf,lerf,road"):
        parse_metrics("morf,roar")
    result = CliRunner().invoke(main, ["evaluate", "--metric", "mof"])
    assert result.exit_code != 0 and "--metric should be" in result.output
    result = CliRunner().invoke(main, ["evaluate", "--fraction", "1.5"])
    assert result.exit_code == 2 and "--fraction" in result.output
    with pytest.raises(UserError, match=r"--fraction should be numbers in \(0, 1\]"):
        run_evaluate("nowhere", EvaluateOptions(fractions=(0.0,)))


def test_evaluate_without_base_model_writes_nothing(tmp_path):
    run_dir = tmp_path / "run"
    result = CliRunner().invoke(main, ["evaluate", "--run-dir", str(run_dir), "--no-progress"])
    assert result.exit_code != 0 and "no base model" in result.output
    assert not (run_dir / "results.sqlite").exists()


@pytest.mark.slow
def test_evaluate_embedded_oracle_first_random_even(tmp_path):
    run_dir = tmp_path / "run"
    runner = CliRunner()
    base = ["--run-dir", str(run_dir), "--no-progress"]
    assert runner.invoke(main, ["train", *base], catch_exceptions=False).exit_code == 0
    # without ranks: one message, nothing written
    result = runner.invoke(main, ["evaluate", *base])
    assert result.exit_code != 0 and "no complete test ranks" in result.output
    assert not (run_dir / "results.sqlite").exists()
    result = runner.invoke(main, ["extract", "--method", "oracle,random,sobel", "--split", "test", *base],
                           catch_exceptions=False)
    assert result.exit_code == 0, result.output
    result = runner.invoke(main, ["evaluate", *base], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    from roarfast.results import ResultsDB

    rows = ResultsDB(run_dir / "results.sqlite").rows()
    assert {r["mode"] for r in rows} == {"morf", "lerf", "road-morf", "road-lerf"}
    assert len(rows) == 3 * 4 * 5 and all(0.0 <= r["extra"]["mean_probability"] <= 1.0 for r in rows)
    scores = estimator_scores(rows)
    for benchmark in ("morf", "road"):
        assert max(scores[benchmark], key=scores[benchmark].get) == "oracle", scores
    # random ranks carry no order: removing its "most" or "least" relevant pixels first is the same
    acc = {(r["mode"], r["fraction"]): r["test_acc"] for r in rows if r["method"] == "random"}
    for prefix in ("", "road-"):
        for fraction in (0.1, 0.3, 0.5, 0.7, 0.9):
            assert abs(acc[(prefix + "morf", fraction)] - acc[(prefix + "lerf", fraction)]) <= 0.1, acc
    assert abs(scores["road"]["random"]) <= 0.05, scores
