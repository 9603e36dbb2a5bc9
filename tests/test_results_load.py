"""roarfast.results.load: the cells of a run directory for a notebook, as a DataFrame or plain dicts."""

import sys

import pytest

from roarfast.results import Cell, ResultsDB, load


def _fill_run(run_dir):
    with ResultsDB(run_dir / "results.sqlite") as db:
        for seed, acc in enumerate((0.5, 0.7)):
            cell = Cell("embedded", "fastnet", "grad", "roar", 0.5, seed, "a" * 64)
            db.record(cell, dict(test_acc=acc, val_acc=acc, epochs=3, seconds=1.0, fill="zero", versions={}))
        db.claim(Cell("embedded", "fastnet", "grad", "kar", 0.5, 0, "a" * 64))  # running: not a result yet


def test_load_gives_a_dataframe_of_done_cells_with_extras_as_columns(tmp_path):
    pytest.importorskip("pandas")
    _fill_run(tmp_path)
    cells = load(tmp_path)
    assert len(cells) == 2 and set(cells["seed"]) == {0, 1}
    assert list(cells["fill"]) == ["zero", "zero"]
    assert cells.groupby("method")["test_acc"].mean()["grad"] == pytest.approx(0.6)
    assert len(load(tmp_path, status=None)) == 3


def test_without_pandas_the_same_cells_come_as_dicts(tmp_path, monkeypatch):
    _fill_run(tmp_path)
    monkeypatch.setitem(sys.modules, "pandas", None)
    cells = load(tmp_path)
    assert isinstance(cells, list) and [c["test_acc"] for c in cells] == [0.5, 0.7]
    assert all(c["fill"] == "zero" and c["status"] == "done" for c in cells)


def test_a_run_directory_without_results_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="no cell has run"):
        load(tmp_path)
