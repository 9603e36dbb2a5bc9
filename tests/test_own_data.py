"""Each command reads its own configuration's data (issue 49): `report --config A` while HEAD is B opens A's
dataset, its example images included; and `ls` lists a damaged HEAD.json, leakage.json or results row as damaged,
one line each, and goes on with the rest."""

import shutil
import sqlite3

import pytest

from roarfast.report.load import load_run
from roarfast.rundir.configurations import configurations
from roarfast.rundir.directory import RunDir
from tests.test_cli_errors import cli_ok
from tests.test_prune import SWEEP


@pytest.fixture(scope="module")
def two_data(tmp_path_factory):
    """A run directory of two configurations trained on different data (24 and 32 training images): the first,
    A, requested first; HEAD names the second, B."""
    run_dir = tmp_path_factory.mktemp("own-data") / "run"
    cli_ok(*SWEEP, "--run-dir", str(run_dir))
    cli_ok(*[{"num_train=24": "num_train=32"}.get(arg, arg) for arg in SWEEP], "--run-dir", str(run_dir))
    return run_dir


@pytest.fixture
def run(two_data, tmp_path):
    shutil.copytree(two_data, tmp_path / "run")
    return RunDir(tmp_path / "run")


def data_of(run) -> dict:
    """{configuration id: the fingerprint of the data its cells were trained on}."""
    return {record["id"]: record["settings"]["config"]["dataset"] for record in configurations(run)}


def test_a_report_of_another_configuration_reads_its_own_data(run, tmp_path):
    data = data_of(run)
    head = run.head().configuration
    (other,) = set(data) - {head}
    assert data[other] != data[head] == run.dataset_record()["fingerprint"]
    assert load_run(run).dataset.fingerprint == data[head]
    assert load_run(run, select=other).dataset.fingerprint == data[other]
    out = cli_ok("report", "--run-dir", str(run.root), "--config", other[:8], "--out", str(tmp_path / "report"))
    page = (tmp_path / "report" / "index.md").read_text()
    assert "no example images" not in out + page and "(examples.png)" in page
    assert (tmp_path / "report" / "examples.png").stat().st_size > 0


def damage_a_row(run) -> None:
    """One results row's accuracy changed behind its digest's back."""
    with sqlite3.connect(run.results_path) as db:
        changed = db.execute("UPDATE measurements SET test_acc = 0.99 WHERE rowid = "
                             "(SELECT MIN(rowid) FROM measurements WHERE kind = 'retrain')").rowcount
    assert changed == 1


@pytest.mark.parametrize("damaged", ["HEAD.json", "leakage.json", "row", "all"])
def test_ls_lists_a_damaged_head_leakage_or_row_and_goes_on(run, damaged):
    ids = sorted(data_of(run))
    if damaged in ("HEAD.json", "all"):
        run.head_path.write_text("{damaged")
    if damaged in ("leakage.json", "all"):
        (run.root / "leakage.json").write_text("[{\"method\": 1}]")
    if damaged in ("row", "all"):
        damage_a_row(run)
    out = cli_ok("ls", "--run-dir", str(run.root))
    said = [line for line in out.splitlines() if line.startswith("! damaged, listed without it:")]
    expected = {"HEAD.json": ["HEAD.json"], "leakage.json": ["leakage.json"], "row": ["results.sqlite"],
                "all": ["HEAD.json", "leakage.json", "results.sqlite"]}[damaged]
    assert len(said) == len(expected) and all(any(name in line for line in said) for name in expected), out
    assert all(cid[:8] in out for cid in ids)  # every configuration listed all the same
    if damaged in ("row", "all"):
        assert "does not match the sha256 written with it" in out
