"""`roarfast run` for real, at its own data size, net and epochs (on a CPU, cells in single-thread processes):
the quick sweep (ROAR and KAR at the fraction covering the object (8x8 of 32x32) and at 0.5, three seeds, mask-only
controls), the report, the verdicts and the dataset's checks; then a rerun that reuses everything."""

import json

import pytest
from click.testing import CliRunner

from roarfast.cli import main
from roarfast.report.text import NOT_A_FINDING
from roarfast.methods import register
from roarfast.methods.declaration import ESTIMATORS
from roarfast.methods.estimators.baselines import random as random_scores
from roarfast.rundir.directory import RunDir

pytestmark = pytest.mark.minutes(3)  # on 2 cores: collected early (tests/conftest.py)

#: the run's training split, net and epochs; fewer methods, fractions and test images, for CI
ARGS = ["--data-option", "num_test=500", "--method", "oracle,random,random-twin", "--fraction", "0.0625,0.5",
        "--no-progress"]


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """A finished `roarfast run`, with `random-twin`: random's own scores under another name, which must
    never come out better or worse than random."""
    run_dir = tmp_path_factory.mktemp("run") / "default"
    with pytest.MonkeyPatch.context() as mp:
        assert len(ESTIMATORS)  # the built-ins discovered before the copy
        mp.setattr(ESTIMATORS, "_entries", dict(ESTIMATORS._entries))
        register("random-twin", uses_model=False, seeded=True, target_mode="none")(random_scores)
        first = CliRunner().invoke(main, ["run", "--run-dir", str(run_dir), *ARGS], catch_exceptions=False)
        assert first.exit_code == 0, first.output
        stamps = {p.name: p.stat().st_mtime_ns for p in RunDir(run_dir).base_checkpoint.iterdir()}
        again = CliRunner().invoke(main, ["run", "--run-dir", str(run_dir), *ARGS], catch_exceptions=False)
        assert again.exit_code == 0, again.output
    return run_dir, first.output, again.output, stamps


def verdicts(output: str) -> dict:
    """{(mode, method, fraction text): verdict line} from the printed verdict lines."""
    out = {}
    for line in output.splitlines():
        line = line.removeprefix(NOT_A_FINDING)
        for mode in ("ROAR", "KAR"):
            if line.startswith(mode + " "):
                fraction, method = line.split()[1:3]
                out[(mode, method.rstrip(":"), fraction)] = line
    return out


def test_oracle_beats_random_everywhere_and_its_control_is_not_leaky(finished):
    _, output, _, _ = finished
    lines = verdicts(output)
    oracle = {key: line for key, line in lines.items() if key[1] == "oracle"}
    assert len(oracle) == 4, output  # roar and kar at two fractions
    for key, line in oracle.items():
        assert "better than random" in line, line
        assert "not leaky" in line and "LEAKY" not in line, line


def test_a_copy_of_random_is_never_better_or_worse(finished):
    _, output, _, _ = finished
    twin = {key: line for key, line in verdicts(output).items() if key[1] == "random-twin"}
    assert len(twin) == 4, output
    # its cells are random's: a difference of 0, "no different" where the equivalence test (TOST within 5 points)
    # can tell over the seeds' spread, else undecided, never a significant difference
    assert all(": no different, equivalent" in line or ": undecided (" in line for line in twin.values()), twin
    assert all("vs random" in line and ": +0.0 points [" in line for line in twin.values()), twin


def test_checks_pass_and_the_report_is_written(finished):
    run_dir, output, _, _ = finished
    checks = [line for line in output.splitlines() if line.startswith("check: ")]
    # oracle ROAR ~ chance, random ROAR 0.5 far above, oracle KAR ~ unmodified, oracle control ~ chance
    assert len(checks) == 4 and all(line.split(": ")[-1].startswith("ok") for line in checks), checks
    report = RunDir(run_dir).report_dir
    assert (report / "index.html").exists() and str(report / "index.html") in output
    summary = json.loads((report / "summary.json").read_text())
    assert summary


def test_rerun_reuses_the_base_model_ranks_and_cells(finished):
    run_dir, first, again, stamps = finished
    assert {p.name: p.stat().st_mtime_ns for p in RunDir(run_dir).base_checkpoint.iterdir()} == stamps
    assert "reusing" in again and "done: 48, to do: 0" in again
    assert "[sweep] 1/" not in again  # no cell trained again
    from roarfast.results import ResultsDB

    with ResultsDB(RunDir(run_dir).results_path) as db:
        rows = db.rows()
    # 3 methods x (roar, kar) x 2 fractions x 3 seeds, plus one control per method, mode and fraction
    assert len(rows) == 36 + 12 and all(r["status"] == "done" for r in rows)
    assert {r["fraction"] for r in rows if r["mode"] == "kar"} == {0.0625, 0.5}
