"""The model the cluster tests' cells train and their extractions explain: fastnet, built inside a Ray worker after
the pause that the test gives that worker's node, each build noted with its node, and there pausing before each
forward pass as long as the test says. A pause keeps a cell or a chunk in flight long enough for a test to remove
its node or kill its driver; the notes say where cells and chunks started (the rows and the driver say where
they finished). Outside Ray (the driver, a data-parallel rank) it is fastnet, at once.

The test's folder, $ROARFAST_TEST_CLUSTER_DIR, holds `pauses.json` ({node id or "*": seconds, "forward":
seconds before each forward pass, or "fail": a message that every build in a Ray worker raises}, read at every
build and forward, and again while a pause lasts: a test holds a node's cell with a long pause and releases it by
setting a shorter one) and `builds.jsonl` (one {"node", "pid", "time"} line per build in a Ray worker)."""

import json
import os
import time
from pathlib import Path

from roarfast.models.fastnet import fastnet


def _ray_node() -> str | None:
    """The Ray node id of this process when it is a Ray worker, else None."""
    try:
        import ray
    except ImportError:
        return None
    if not ray.is_initialized() or ray.get_runtime_context().worker.mode != ray.WORKER_MODE:
        return None
    return ray.get_runtime_context().get_node_id()


def _pauses(folder: Path) -> dict:
    return json.loads((folder / "pauses.json").read_text()) if (folder / "pauses.json").exists() else {}


def _pause(folder: Path, *keys: str) -> None:
    """Sleeps as long as the first of `keys` that pauses.json names says, from now, reading it again as it sleeps."""
    start = time.time()
    while True:
        pauses = _pauses(folder)
        seconds = next((pauses[key] for key in keys if key in pauses), 0)
        if time.time() >= start + seconds:
            return
        time.sleep(min(0.2, start + seconds - time.time()))


def paused_fastnet(num_classes: int, image_size: int, in_channels: int):
    node = _ray_node()
    folder = os.environ.get("ROARFAST_TEST_CLUSTER_DIR")
    model = fastnet(num_classes, image_size, in_channels)
    if node is not None and folder:
        folder = Path(folder)
        with open(folder / "builds.jsonl", "a") as notes:
            notes.write(json.dumps({"node": node, "pid": os.getpid(), "time": time.time()}) + "\n")
        pauses = _pauses(folder)
        if "fail" in pauses:
            raise RuntimeError(pauses["fail"])
        _pause(folder, node, "*")
        # a hook holds no weights: the state dict is fastnet's
        model.register_forward_pre_hook(lambda module, args: _pause(folder, "forward"))
    return model
