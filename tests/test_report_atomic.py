"""The report built in a temporary directory and swapped in whole (issue 24, item 5): a failure inside a figure,
a full disk while rendering, a bug in the page, or a kill while the files are written leaves the previous
report byte for byte, and the one-line message says what was left; a link planted in the report directory
has its target left alone; a --out naming a directory no report wrote is refused."""

import errno
import os
import subprocess
import sys

import pytest
from matplotlib.figure import Figure as MplFigure

from roarfast.errors import UserError
from roarfast.report import render, write_report
from roarfast.report.sections import accuracy
from roarfast.results import RETRAIN, MeasurementKey, ResultsDB
from roarfast.rundir.directory import RunDir
from tests.test_cli_errors import fails_with_one_line

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture
def run(tmp_path) -> RunDir:
    """random and one method at ROAR 50%, two seeds, with a control: every section has something to draw."""
    run = RunDir(tmp_path / "run")
    with ResultsDB(run.results_path) as db:
        for method, accs in (("random", [0.6, 0.62]), ("a", [0.2, 0.25])):
            for mode in ("roar", "roar-mask"):
                for seed, acc in enumerate(accs):
                    fill = None if mode == "roar-mask" else "dataset-mean"
                    db.record(MeasurementKey(RETRAIN, "embedded", "fastnet", method, mode, fill, 0.5, seed, "a" * 64),
                              {"test_acc": acc if mode == "roar" else 0.1, "val_acc": acc, "epochs": 1, "seconds": 1.0,
                               "versions": {}, "test_images": 100, "test_chance": 0.1})
    return run


def contents(directory) -> dict:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


def leftovers(run) -> list:
    return sorted(p.name for p in run.root.iterdir() if p.name.startswith(".report.") and p.name != ".report.lock")


def full_disk(*args, **kwargs):
    raise OSError(errno.ENOSPC, "No space left on device")


def half_written_png(self, path, *args, **kwargs):
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n")  # a truncated PNG, then the disk is full
    full_disk()


def half_written_csv(cells, path):
    path.write_text("configuration,dataset\n")
    full_disk()


def broken_page(blocks, out_dir):
    raise RuntimeError("a bug while rendering")


FAILURES = {  # where the report fails: (what is patched, its replacement, the error expected)
    "inside a figure": ((accuracy, "figure_accuracy"), full_disk, UserError),
    "saving a figure": ((MplFigure, "savefig"), half_written_png, UserError),
    "writing cells.csv": ((render, "write_csv"), half_written_csv, UserError),
    "rendering the page": ((render, "render_html"), broken_page, RuntimeError),
}


@pytest.mark.parametrize("where", list(FAILURES))
def test_a_failed_report_leaves_the_previous_one_byte_for_byte(run, monkeypatch, where):
    write_report(run.root)
    before = contents(run.report_dir)
    assert {"index.html", "cells.csv", "accuracy_dataset-mean.png", ".roarfast-report"} <= set(before)
    (owner, name), replacement, error = FAILURES[where]
    monkeypatch.setattr(owner, name, replacement)
    with pytest.raises(error) as raised:
        write_report(run.root)
    assert contents(run.report_dir) == before and leftovers(run) == []
    if error is UserError:
        assert str(raised.value).startswith("cannot write ") and "No space left on device" in str(raised.value)
        assert f"the previous report in {run.report_dir} is intact" in str(raised.value)


def test_a_failed_first_report_says_none_was_written(run, monkeypatch):
    monkeypatch.setattr(render, "write_csv", half_written_csv)
    with pytest.raises(UserError, match="no report was written; free space there and rerun"):
        write_report(run.root)
    assert not run.report_dir.exists() and leftovers(run) == []


def test_a_report_killed_while_writing_leaves_the_previous_one_and_the_next_one_is_whole(run):
    write_report(run.root)
    before = contents(run.report_dir)
    killed = ("import os, signal, sys\n"
              "from roarfast.report import render, write_report\n"
              "def write_csv(cells, path):\n"
              "    path.write_text('half')\n"
              "    os.kill(os.getpid(), signal.SIGKILL)\n"
              "render.write_csv = write_csv\n"
              "write_report(sys.argv[1])\n")
    result = subprocess.run([sys.executable, "-c", killed, str(run.root)], cwd=REPO, capture_output=True, check=False,
                            env={**os.environ, "PYTHONPATH": REPO})
    assert result.returncode == -9, result.stderr
    assert contents(run.report_dir) == before and leftovers(run)  # the killed build is still beside it
    write_report(run.root)  # the next report removes it
    assert leftovers(run) == [] and set(contents(run.report_dir)) == set(before)


def test_a_link_planted_in_the_report_has_its_target_left_alone(run, tmp_path):
    write_report(run.root)
    target = tmp_path / "precious.txt"
    target.write_text("not roarfast's\n")
    (run.report_dir / "cells.csv").unlink()
    (run.report_dir / "cells.csv").symlink_to(target)
    write_report(run.root)
    assert target.read_text() == "not roarfast's\n"
    assert not (run.report_dir / "cells.csv").is_symlink() and (run.report_dir / "cells.csv").read_text().startswith(
        "configuration,dataset,")


def test_out_naming_a_directory_no_report_wrote_is_refused(run, tmp_path):
    mine = tmp_path / "thesis"
    mine.mkdir()
    (mine / "chapter1.tex").write_text("mine")
    line = fails_with_one_line(["report", "--run-dir", str(run.root), "--out", str(mine)])
    assert line == (f"Error: refusing to write the report into {mine}: it holds files no roarfast report wrote "
                    f"(chapter1.tex), and a report replaces its directory whole; name a new or empty directory with "
                    f"--out")
    assert contents(mine) == {"chapter1.tex": b"mine"}
    line = fails_with_one_line(["report", "--run-dir", str(run.root), "--out", str(run.root)])  # the run directory
    assert "refusing to write the report into" in line and "results.sqlite" in line
    empty = tmp_path / "empty"
    empty.mkdir()
    assert write_report(run.root, empty).index_html.is_file()


def test_a_report_written_before_the_marker_is_replaced(run, tmp_path):
    old = tmp_path / "old-report"
    old.mkdir()
    for name in ("index.html", "index.md", "summary.json", "cells.csv", "accuracy_road.png"):
        (old / name).write_text("from an older roarfast")
    write_report(run.root, old)
    assert not (old / "accuracy_road.png").exists() and (old / ".roarfast-report").is_file()
