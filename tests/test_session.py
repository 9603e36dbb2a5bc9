"""End to end on the embedded dataset (CPU): the three commands a user types first, with no other
arguments, then the benchmark's own correctness checks (README, "The embedded dataset"):
oracle ROAR at the fraction covering the object ~ chance, random ROAR at 0.5 far above it, oracle
KAR at that fraction ~ the unmodified accuracy, and the oracle's mask-only control ~ chance."""

import pytest
from click.testing import CliRunner

from roarfast.cli import main
from roarfast.rundir.directory import RunDir

pytestmark = pytest.mark.minutes(5)  # on 2 cores: collected early (tests/conftest.py)

# not marked slow: the main job, end to end, runs in the default test command (and CI) whatever else is left out


@pytest.fixture(scope="module")
def session(tmp_path_factory):
    """`roarfast train`, `extract --method oracle`, `retrain --fraction 0.7` in a fresh directory."""
    workdir = tmp_path_factory.mktemp("session")
    runner = CliRunner()
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(workdir)
        outputs = {}
        for args in (["train", "--no-progress"], ["extract", "--method", "oracle", "--no-progress"],
                     ["retrain", "--fraction", "0.7", "--no-progress"]):
            result = runner.invoke(main, args, catch_exceptions=False)
            assert result.exit_code == 0, result.output
            outputs[args[0]] = result.output
    return workdir / "runs" / "default", outputs


def test_session_writes_checkpoint_store_and_results(session):
    run_dir, outputs = session
    run = RunDir(run_dir)
    meta = run.base_meta()
    assert meta["test_acc"] >= 0.90, meta
    for split in ("train", "test"):
        assert run.rank_store.manifest("oracle", split)["complete"]
    # retrain with no --method runs every stored method plus random
    from roarfast.results import ResultsDB

    rows = ResultsDB(run.results_path).rows()
    assert sorted((r["method"], r["mode"], r["fraction"]) for r in rows) == [
        ("oracle", "roar", 0.7), ("random", "roar", 0.7)]
    assert "oracle" in outputs["retrain"] and "random" in outputs["retrain"]


def test_rerun_skips_finished_cells(session):
    run_dir, _ = session
    from roarfast.results import ResultsDB
    from roarfast.orchestration.retrain import RetrainOptions, run_retrain

    before = {r["method"]: r["finished"] for r in ResultsDB(RunDir(run_dir).results_path).rows()}
    rows = run_retrain(run_dir, RetrainOptions(fractions=(0.7,)), progress=False)
    assert {r["method"]: r["finished"] for r in rows} == before


def test_embedded_benchmark_checks(session):
    run_dir, _ = session
    from roarfast.data import load_dataset
    from roarfast.orchestration.demo import object_fraction
    from roarfast.orchestration.retrain import RetrainOptions, run_retrain
    from roarfast.stats import accuracy_over_seeds

    ds = load_dataset("embedded")
    chance = 1 / ds.num_classes
    covering = round(object_fraction(ds), 4)
    unmodified = RunDir(run_dir).base_meta()["test_acc"]
    rows = run_retrain(run_dir, RetrainOptions(fractions=(covering,), methods="oracle"), progress=False, dataset_obj=ds)
    rows += run_retrain(run_dir, RetrainOptions(fractions=(covering,), methods="oracle", modes=("kar",)),
                        progress=False, dataset_obj=ds)
    rows += run_retrain(run_dir, RetrainOptions(fractions=(0.5,), methods="random"), progress=False, dataset_obj=ds)
    control = run_retrain(run_dir, RetrainOptions(fractions=(covering,), methods="oracle", mask_only=True),
                          progress=False, dataset_obj=ds)
    rows += [row for row in control if row["mode"] == "roar-mask"]
    acc = {k: v[0] for k, v in accuracy_over_seeds(rows).items()}
    assert abs(acc[("oracle", "roar", covering)] - chance) <= 0.10, acc
    # the object's hole tells nothing: same shape for every class at a random place
    assert abs(acc[("oracle", "roar-mask", covering)] - chance) <= 0.10, acc
    assert acc[("random", "roar", 0.5)] - chance >= 0.40, acc
    assert abs(acc[("oracle", "kar", covering)] - unmodified) <= 0.10, acc
