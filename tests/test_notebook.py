"""examples/first_study.ipynb executed as a reader executes it, by a real Jupyter kernel (nbclient, ipykernel;
this venv's python): its outputs show what the Study will run, progress while it runs (never tqdm's
"IProgress not found" warning), and the report inline: the status, the Run table, the figures embedded.

The stored study takes a quarter of an hour on 2 cores, so the kernel runs the same cells on a smaller study
(SMALLER: fewer images, one epoch); the full study's verdicts are checked on the stored outputs
(tests/test_example_notebook.py), which scripts/run_notebook.py makes with the same kernel."""

import re
import sys
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
from run_notebook import NOTEBOOK, execute  # noqa: E402  (a script, not a package)

pytestmark = pytest.mark.minutes(1.5)  # on 2 cores: collected early (tests/conftest.py)

# the stored study's sizes and the smaller ones the kernel runs (each must be found in the first code cell)
SMALLER = {"epochs=3": "epochs=1", '"num_train": 1000, "num_test": 500': '"num_train": 300, "num_test": 100'}


def smaller(notebook):
    """The notebook with its first code cell's study made smaller; a size not found fails, not runs the full one."""
    cell = next(c for c in notebook.cells if c.cell_type == "code")
    for stored, small in SMALLER.items():
        assert stored in cell.source, f"the notebook's study no longer reads {stored}: update SMALLER"
        cell.source = cell.source.replace(stored, small)
    return notebook


@pytest.fixture(scope="module")
def executed(tmp_path_factory):
    """The notebook after a kernel of this venv's python ran it in a fresh folder (scripts/run_notebook.py's way,
    on the smaller study); its code cells' outputs."""
    where = tmp_path_factory.mktemp("notebook")
    notebook = smaller(nbformat.read(NOTEBOOK, as_version=4))
    execute(notebook, where, timeout=300)
    return where, [cell.outputs for cell in notebook.cells if cell.cell_type == "code"]


def texts(outputs, kind: str) -> str:
    """Every output of one code cell as text: its streams (kind "stream") or its rich outputs' `kind`."""
    if kind == "stream":
        return "".join(o["text"] for o in outputs if o["output_type"] == "stream")
    return "".join(o.get("data", {}).get(kind, "") for o in outputs if o["output_type"] in ("display_data",
                                                                                         "execute_result"))


def test_the_study_displays_its_grid_its_cells_and_an_estimated_time(executed):
    _, (study, _, _) = executed
    page = texts(study, "text/html")
    # the notebook's grid: grad and random, roar and kar, 0.5, seeds 0-1; the quick preset's controls: seed 0
    assert "methods random, grad x modes roar, kar x fractions 0.5 x seeds 0-1 = 8 cells + 4 mask-only" in page
    assert "done: 0, to do: 12" in page and "to train" in page
    assert re.search(r"ETA</th><td[^>]*>(\d+m)?[\d.]+s: base model", page), page
    assert "canvas 3x32x32, 300 train" in page
    assert "Study(" in texts(study, "text/plain")


def test_running_shows_progress_and_no_tqdm_warning(executed):
    _, (_, run, _) = executed
    shown = texts(run, "stream") + texts(run, "text/plain")
    assert re.search(r"train fastnet.*\d+/\d+", shown), shown[-3000:]  # the base model's bar
    assert re.search(r"extract (train, )?test \([^)]*grad\): ", shown)  # one bar for the splits left
    assert re.search(r"\[sweep\] 12/12 ", shown)
    assert "IProgress not found" not in shown and "TqdmWarning" not in shown
    assert "test_acc" in texts(run, "text/html")  # the cells as a table


def test_the_report_displays_inline_with_its_run_table_verdicts_and_figures(executed):
    where, (_, _, report) = executed
    page = texts(report, "text/html")
    assert re.search(r"<h2[^>]*>What was measured<", page) and "<table>" in page
    # the status first, whichever the small study reaches (its verdict lines: on the stored, conclusive outputs)
    assert re.match(r"<div class='roarfast-report'><h1>roarfast report</h1>\s*<details open><summary><h2[^>]*>"
                    r"(CONCLUSIVE|INCONCLUSIVE|UNDERPOWERED)", page), page[:400]
    assert re.search(r"<img [^>]*src='data:image/png;base64,[A-Za-z0-9+/]{1000}", page)
    assert "<style>" not in page and "<body" not in page  # the notebook keeps its own look
    assert (where / "runs" / "first-study" / "report" / "index.html").is_file()
