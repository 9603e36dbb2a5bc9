"""Executes examples/first_study.ipynb (or the notebook named) in a real Jupyter kernel of this Python and stores it
with its outputs, so the repository and the docs (docs/howto/notebooks.md) show what a reader's run shows. The
notebook then ends in a cell saying that this script made its outputs: when, on which CPU and commit, in how long.

    python scripts/run_notebook.py [NOTEBOOK] [--timeout SECONDS]

It runs in a fresh temporary folder (the study's run directory is made there, not beside the notebook) and refuses
to store outputs whose study is not CONCLUSIVE (its report's summary.json): an example must show a study that can
answer. Needs nbclient and ipykernel (roarfast's `test` extra).
"""

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

import nbclient
import nbformat
from jupyter_client import KernelManager
from jupyter_client.kernelspec import KernelSpecManager

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "examples" / "first_study.ipynb"
#: the id of the cell this script writes at the end (replaced on every run, never added twice)
MADE_BY = "made-by-run-notebook"
#: where the notebook's Study writes its report, from the folder it runs in
SUMMARY = Path("runs") / "first-study" / "report" / "summary.json"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("notebook", nargs="?", type=Path, default=NOTEBOOK)
    parser.add_argument("--timeout", type=int, default=1800, help="seconds a cell may run")
    args = parser.parse_args()
    notebook = nbformat.read(args.notebook, as_version=4)
    notebook.cells = [c for c in notebook.cells if c.get("id") != MADE_BY]
    commit = subprocess.run(["git", "-C", str(ROOT), "describe", "--always", "--dirty"], capture_output=True,
                            text=True).stdout.strip() or "unknown"  # what runs: read before it runs
    with tempfile.TemporaryDirectory(prefix="roarfast-notebook-") as where:
        started = time.perf_counter()
        execute(notebook, Path(where), args.timeout)
        seconds = time.perf_counter() - started
        summary = Path(where) / SUMMARY
        status = json.loads(summary.read_text())["status"] if summary.is_file() else None
    if status != "conclusive":
        raise SystemExit(f"{args.notebook}: its study is {status or 'without a report'} ({SUMMARY}), not conclusive; "
                         "outputs not stored: give it more images or epochs")
    for cell in notebook.cells:
        if cell.cell_type == "code":
            cell.outputs = coalesced(cell.outputs)
    notebook.cells.append(nbformat.v4.new_markdown_cell(made_by(seconds, commit), id=MADE_BY))
    nbformat.write(notebook, args.notebook)
    print(f"{args.notebook}: executed in {seconds:.0f} s, study conclusive; outputs stored")


def execute(notebook, where: Path, timeout: int) -> None:
    """Runs every cell of `notebook` in place, in a kernel of this Python started in `where`."""
    spec = where / "kernels" / "roarfast-notebook"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Python 3", "language": "python"}))
    manager = KernelManager(kernel_name="roarfast-notebook",
                            kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(spec.parent)]))
    nbclient.NotebookClient(notebook, km=manager, timeout=timeout, resources={"metadata": {"path": str(where)}},
                            record_timing=False).execute()
    notebook.metadata["kernelspec"] = {"display_name": "Python 3", "language": "python", "name": "python3"}


def coalesced(outputs: list) -> list:
    """`outputs` as a reader's Jupyter shows them: consecutive stream outputs of one stream joined, and each line
    redrawn by a carriage return (a progress bar's updates) kept as its last drawing only."""
    out = []
    for output in outputs:
        if output.output_type == "stream" and out and out[-1].output_type == "stream" and out[-1].name == output.name:
            out[-1].text += output.text
        else:
            out.append(output)
    for output in out:
        if output.output_type == "stream":
            output.text = "\n".join(line.rstrip("\r").rsplit("\r", 1)[-1] for line in output.text.split("\n"))
    return out


def made_by(seconds: float, commit: str) -> str:
    when = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return (f"*The outputs above were made by `python scripts/run_notebook.py` on {when}: {cpu()}, "
            f"{os.cpu_count()} cores, Python {platform.python_version()}, roarfast at {commit} (-dirty: with "
            f"changes not yet committed), {seconds / 60:.1f} minutes for the whole notebook on a machine shared "
            f"with other work.*")


def cpu() -> str:
    """The CPU's model name (Linux), else the platform's word for it."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


if __name__ == "__main__":
    main()
