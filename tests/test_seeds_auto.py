"""`roarfast sweep --seeds auto` end to end on a small embedded dataset: the design is recorded with the
configuration, seeds are added only where the verdict was undecided at the look before, the report reads the
verdicts look by look as the sweep did and says what the design saved."""

import pytest
from click.testing import CliRunner

from roarfast.cli import main
from roarfast.report import write_report
from roarfast.results import RETRAIN, load
from roarfast.rundir.configurations import configurations
from roarfast.rundir.directory import RunDir

DATA = ["--data-option", "num_train=300", "--data-option", "num_test=300"]


@pytest.mark.slow
def test_seeds_are_added_only_where_undecided_and_the_report_reads_the_same_looks(tmp_path):
    run_dir = tmp_path / "run"
    result = CliRunner().invoke(main, ["sweep", "--run-dir", str(run_dir), "--method", "grad,sg-sq-grad", "--mode",
                                       "roar", "--fraction", "0.25,0.5", "--seeds", "auto", "--max-seeds", "5",
                                       "--epochs", "2", "--no-control", "--device", "cpu", "--no-progress",
                                       "--model", "fastnet-small", *DATA])
    assert result.exit_code == 0, result.output
    (record,) = configurations(RunDir(run_dir))
    assert record["grids"] and all(g["design"]["looks"] == [3, 5] and g["margin"] == 0.05 for g in record["grids"])
    summary = write_report(run_dir).summary
    cells = load(run_dir, kind=RETRAIN, status="done")
    seeds = cells.groupby(["method", "fraction"])["seed"].nunique().to_dict()
    for v in summary["verdicts"]:
        # decided at look 1: 3 seeds and no more; else look 2's 5
        assert seeds[(v["method"], v["fraction"])] == (3 if v["look"] == 1 else 5)
        assert v["verdict"] != "undecided" or v["look"] == 2
    for fraction in (0.25, 0.5):  # random runs on wherever an estimator at its place was undecided
        looks = [v["look"] for v in summary["verdicts"] if v["fraction"] == fraction]
        assert seeds[("random", fraction)] == (5 if 2 in looks else 3)
    power = summary["power"]
    assert power["trainings"] == len(cells) and power["everywhere"] == 3 * 2 * 5
    assert f"{power['trainings']} cells trained where max-seeds (5) everywhere would train 30" in result.output
