"""benchmarks/compare_runs.py, the behaviour-unchanged check: two runs with the same measurements and reports
but other timings compare equal; an accuracy one bit off, a missing measurement or a changed report line
does not. A run whose results.sqlite is of an earlier schema is compared through a migrated copy; across
versions, measurements are matched without their config hash."""

import math
import runpy
import sqlite3
from pathlib import Path

import pytest

from roarfast.report import write_report
from roarfast.results import RETRAIN, MeasurementKey, ResultsDB
from roarfast.rundir.directory import RunDir

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "compare_runs.py"
compare = runpy.run_path(str(SCRIPT))["compare"]


def make_run(root, seconds: float, last_acc: float = 0.75, extra_cell: bool = False, config: str = "h") -> RunDir:
    run = RunDir(root)
    with ResultsDB(run.results_path) as db:
        cells = [("random", 0.5 + 0.01 * s) for s in range(3)] + [("oracle", 0.1 + 0.01 * s) for s in range(2)]
        cells.append(("oracle", last_acc))
        if extra_cell:
            cells.append(("sobel", 0.4))
        for i, (method, acc) in enumerate(cells):
            key = MeasurementKey(RETRAIN, "embedded", "fastnet", method, "roar", "dataset-mean", 0.5, i % 3, config * 64)
            db.record(key, {"test_acc": acc, "val_acc": acc, "epochs": 3, "seconds": seconds, "versions": {}})
    run.record_stage_time("train", seconds)
    run.record_stage_time("retrain", 6 * seconds)
    write_report(run.root)
    return run


def test_same_measurements_with_other_timings_are_the_same_run(tmp_path, capsys):
    a, b = make_run(tmp_path / "a", 1.0), make_run(tmp_path / "b", 2.5)
    assert (a.report_dir / "index.md").read_text() != (b.report_dir / "index.md").read_text()  # the stage times
    assert compare(a.root, b.root) == []
    assert "6 measurements equal bit for bit" in capsys.readouterr().out


def test_an_accuracy_one_bit_off_or_a_missing_measurement_is_a_difference(tmp_path):
    a = make_run(tmp_path / "a", 1.0)
    off_by_a_bit = make_run(tmp_path / "b", 1.0, last_acc=math.nextafter(0.75, 1.0))
    problems = compare(a.root, off_by_a_bit.root)
    assert any(line.startswith("measurement {") and "'method': 'oracle'" in line for line in problems), problems
    more = make_run(tmp_path / "c", 1.0, extra_cell=True)
    problems = compare(a.root, more.root)
    assert any("measurement only in" in line and "sobel" in line for line in problems)
    assert any(line.startswith("index.md line") for line in problems)  # the report shows the extra method


def test_across_versions_measurements_match_without_their_config_hash(tmp_path, capsys):
    a, b = make_run(tmp_path / "a", 1.0), make_run(tmp_path / "b", 1.0, config="e")  # a version that hashes more
    assert any("measurement only in" in line for line in compare(a.root, b.root))
    assert compare(a.root, b.root, across_versions=True) == []
    assert "6 equal bit for bit across versions" in capsys.readouterr().out
    off = make_run(tmp_path / "c", 1.0, last_acc=math.nextafter(0.75, 0.0), config="e")
    assert any("'method': 'oracle'" in line for line in compare(a.root, off.root, across_versions=True))


def test_a_run_of_an_earlier_schema_is_compared_through_a_migrated_copy(tmp_path):
    a, b = make_run(tmp_path / "a", 1.0), make_run(tmp_path / "b", 1.0)
    # b's file as schema v2 wrote it: a cells table, the fill in extra
    with sqlite3.connect(b.results_path) as raw:
        raw.execute("CREATE TABLE cells AS SELECT dataset, model, method, mode, fraction, seed, config_hash, status, "
                    "test_acc, val_acc, epochs, seconds, versions, '{\"fill\": \"dataset-mean\"}' AS extra, error, "
                    "created, finished, owner, heartbeat FROM measurements")
        raw.execute("DROP TABLE measurements")
        raw.execute("PRAGMA user_version = 2")
    before = b.results_path.read_bytes()
    assert compare(a.root, b.root) == []
    assert b.results_path.read_bytes() == before


@pytest.mark.parametrize("argv, code", [(["same"], 0), (["other"], 1)])
def test_exit_code(tmp_path, argv, code):
    a = make_run(tmp_path / "a", 1.0)
    make_run(tmp_path / "same", 3.0)
    make_run(tmp_path / "other", 1.0, last_acc=0.5)
    main = runpy.run_path(str(SCRIPT))["main"]
    assert main([str(a.root), str(tmp_path / argv[0])]) == code
