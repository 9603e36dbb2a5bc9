"""The no-retrain evaluation (`roarfast evaluate`: MoRF / LeRF / ROAD without retraining): argument checks
that write nothing, and on the embedded dataset (slow): the oracle first under MoRF and ROAD, random as good
removed most- as least-relevant first. (Its estimator scores and Kendall tau: tests/test_stats.py.)"""

import pytest
from click.testing import CliRunner

from roarfast.cli import main
from roarfast.errors import UserError
from roarfast.noretrain import NoRetrainOptions
from roarfast.results import NO_RETRAIN
from roarfast.rundir import RunDir
from roarfast.stats import estimator_scores


def test_bad_metric_and_fraction():
    with pytest.raises(UserError, match="--metric should be a comma-separated subset of morf,lerf,road"):
        NoRetrainOptions(metrics=("morf", "roar"))
    result = CliRunner().invoke(main, ["evaluate", "--metric", "mof"])
    assert result.exit_code == 2 and "--metric should be" in result.output
    result = CliRunner().invoke(main, ["evaluate", "--fraction", "1.5"])
    assert result.exit_code == 2 and "--fraction: fractions must lie in (0, 1], got 1.5" in result.output
    with pytest.raises(UserError, match=r"--fraction: fractions must lie in \(0, 1\], got 0.0"):
        NoRetrainOptions(fractions=(0.0,))


def test_evaluate_without_base_model_writes_nothing(tmp_path):
    run_dir = tmp_path / "run"
    result = CliRunner().invoke(main, ["evaluate", "--run-dir", str(run_dir), "--no-progress"])
    assert result.exit_code != 0 and "no base model" in result.output
    assert not RunDir(run_dir).results_path.exists()


@pytest.mark.slow
def test_evaluate_embedded_oracle_first_random_even(tmp_path):
    run_dir = tmp_path / "run"
    runner = CliRunner()
    base = ["--run-dir", str(run_dir), "--no-progress"]
    assert runner.invoke(main, ["train", *base], catch_exceptions=False).exit_code == 0
    # without ranks: one message, nothing written
    result = runner.invoke(main, ["evaluate", *base])
    assert result.exit_code != 0 and "no complete test ranks" in result.output
    assert not RunDir(run_dir).results_path.exists()
    result = runner.invoke(main, ["extract", "--method", "oracle,random,sobel", "--split", "test", *base],
                           catch_exceptions=False)
    assert result.exit_code == 0, result.output
    result = runner.invoke(main, ["evaluate", *base], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    from roarfast.results import ResultsDB

    rows = ResultsDB(RunDir(run_dir).results_path).rows()
    assert {r["mode"] for r in rows} == {"morf", "lerf", "road-morf", "road-lerf"}
    assert len(rows) == 3 * 4 * 5 and all(0.0 <= r["extra"]["mean_probability"] <= 1.0 for r in rows)
    # no-retrain measurements, not cells: nothing drawn, nothing trained, the fill their mode names
    assert {r["kind"] for r in rows} == {NO_RETRAIN} and {(r["seed"], r["epochs"]) for r in rows} == {(None, None)}
    assert {r["fill"] for r in rows if r["mode"].startswith("road-")} == {"road"}
    assert {r["fill"] for r in rows if not r["mode"].startswith("road-")} == {"dataset-mean"}
    # a rerun measures nothing again
    again = runner.invoke(main, ["evaluate", *base], catch_exceptions=False)
    assert again.exit_code == 0 and ResultsDB(RunDir(run_dir).results_path).rows() == rows
    scores = estimator_scores(rows)
    for benchmark in ("morf", "road"):
        assert max(scores[benchmark], key=scores[benchmark].get) == "oracle", scores
    # random ranks carry no order: removing its "most" or "least" relevant pixels first is the same
    acc = {(r["mode"], r["fraction"]): r["test_acc"] for r in rows if r["method"] == "random"}
    for prefix in ("", "road-"):
        for fraction in (0.1, 0.3, 0.5, 0.7, 0.9):
            assert abs(acc[(prefix + "morf", fraction)] - acc[(prefix + "lerf", fraction)]) <= 0.1, acc
    assert abs(scores["road"]["random"]) <= 0.05, scores
