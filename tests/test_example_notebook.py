"""The example notebook as the repository stores it (issue 48 item 6): sized at or above the dry run's floor of
optimizer steps, stored with the outputs of a conclusive study, made by scripts/run_notebook.py, which says so and
stores progress bars as a reader sees them. (tests/test_notebook.py executes its cells in a kernel, on a smaller study.)"""

import re
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from roarfast.planning.preview import MIN_CELL_STEPS, steps_per_cell

nbformat = pytest.importorskip("nbformat")
pytest.importorskip("nbclient")  # the script executes with it

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
from run_notebook import MADE_BY, NOTEBOOK, coalesced  # noqa: E402  (a script, not a package)


@pytest.fixture(scope="module")
def stored():
    return nbformat.read(NOTEBOOK, as_version=4)


def test_the_stored_notebook_shows_a_conclusive_study_and_says_what_made_its_outputs(stored):
    code = [c for c in stored.cells if c.cell_type == "code"]
    assert code and all(c.outputs for c in code)  # stored with outputs, every cell
    report = "".join(o.get("data", {}).get("text/html", "") for o in code[-1].outputs)
    assert "<h2 style='display:inline'>CONCLUSIVE: learning shown</h2>" in report
    assert "INCONCLUSIVE" not in report and "UNDERPOWERED" not in report
    # its verdict lines, grad against random under both modes
    assert re.search(r"<li[^>]*>ROAR 50%[^<]* grad: ", report) and re.search(r"<li[^>]*>KAR 50%[^<]* grad: ", report)
    made_by = stored.cells[-1]
    assert made_by.get("id") == MADE_BY and "`python scripts/run_notebook.py`" in made_by.source


def test_the_stored_study_trains_at_least_the_dry_run_s_floor_of_steps(stored):
    study = next(c for c in stored.cells if c.cell_type == "code").outputs
    shown = "".join(o.get("data", {}).get("text/plain", "") for o in study)
    epochs, batch = map(int, re.search(r"\n  cells: \S+, (\d+) epochs, batch (\d+)", shown).groups())
    train, held = re.search(r"([\d,]+) train \((\d+) of them held out for validation\)", shown).groups()
    assert steps_per_cell(SimpleNamespace(epochs=epochs, batch_size=batch), int(train.replace(",", "")) - int(held)) \
        >= MIN_CELL_STEPS
    assert "optimizer steps each" not in shown  # the dry run's warning of too few


def test_progress_is_stored_as_a_reader_sees_it():
    stream = lambda text, name="stderr": nbformat.v4.new_output("stream", name=name, text=text)  # noqa: E731
    outputs = [stream("\rtrain: 10%"), stream("\rtrain: 50%"), stream("\rtrain: 100%\n"), stream("done\n", "stdout"),
               stream("\rsweep 1/2"), stream("\rsweep 2/2\nlast\n")]
    out = coalesced(outputs)
    assert [(o.name, o.text) for o in out] == [("stderr", "train: 100%\n"), ("stdout", "done\n"),
                                               ("stderr", "sweep 2/2\nlast\n")]
