"""examples/first_study.ipynb executed as a reader executes it, by a real Jupyter kernel (nbclient, ipykernel;
this venv's python): its outputs show what the Study will run, progress while it runs (never tqdm's
"IProgress not found" warning), and the report inline: the Run table, the verdict lines, the figures embedded."""

import json
import re
import sys
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

NOTEBOOK = Path(__file__).resolve().parents[1] / "examples" / "first_study.ipynb"


@pytest.fixture(scope="module")
def executed(tmp_path_factory):
    """The notebook after a kernel of this venv's python ran it in a fresh folder; its code cells' outputs."""
    from jupyter_client import KernelManager
    from jupyter_client.kernelspec import KernelSpecManager

    where = tmp_path_factory.mktemp("notebook")
    spec = where / "kernels" / "roarfast-test"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "roarfast test", "language": "python"}))
    manager = KernelManager(kernel_name="roarfast-test",
                            kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(spec.parent)]))
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    nbclient.NotebookClient(notebook, km=manager, timeout=300, resources={"metadata": {"path": str(where)}}).execute()
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
    assert re.search(r"<li[^>]*>ROAR 50%[^<]* grad: ", page) and re.search(r"<li[^>]*>KAR 50%[^<]* grad: ", page)
    assert re.search(r"<img [^>]*src='data:image/png;base64,[A-Za-z0-9+/]{1000}", page)
    assert "<style>" not in page and "<body" not in page  # the notebook keeps its own look
    assert (where / "runs" / "first-study" / "report" / "index.html").is_file()
