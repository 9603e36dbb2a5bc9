"""A new fill is one file: a computed fill written here as a module of roarfast/fills would be (a box blur:
each removed pixel becomes the mean of its in-bounds 3x3 neighbourhood of the original image) and found by
the fill resolver like the built-ins, with no other module touched. The command line offers it, retrain
trains a cell with it through the real loaders, and the model is tested on exactly the blurred images."""

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np
import torch

from roarfast.data import load_dataset
from roarfast.fills import FILLS
from roarfast.rundir.directory import RunDir

ROOT = Path(__file__).resolve().parents[1]

#: the whole new fill, as it would be saved in roarfast/fills/box_blur.py
BOX_BLUR = '''"""--fill box-blur: each removed pixel the mean of its in-bounds 3x3 neighbourhood."""

from roarfast.fills import Fill, register_fill, removed_pixels


class BoxBlur(Fill):
    name = "box-blur"
    description = "the mean of each removed pixel's 3x3 neighbourhood"
    pixel_ranks = "blurs whole pixels"

    def apply(self, images, ranks, fraction, keep, *, mean, std, ids, out_dtype=None, channels_last=False):
        import torch

        from roarfast import ops

        self.check_ranks(ranks.shape)
        x = images.float() / 255
        blurred = torch.nn.functional.avg_pool2d(x, 3, stride=1, padding=1, count_include_pad=False)
        x = torch.where(removed_pixels(ranks, fraction, keep).unsqueeze(1), blurred, x)
        x = (x - ops.per_channel(mean, images, "mean").view(1, -1, 1, 1)) / ops.per_channel(std, images, "std").view(
            1, -1, 1, 1)
        memory_format = torch.channels_last if channels_last else torch.contiguous_format
        return x.to(out_dtype or torch.float32).contiguous(memory_format=memory_format)


register_fill(BoxBlur(), order=2)
'''

#: in a fresh process: the file joins the package before anything lists the fills, then the CLI runs
DRIVER = '''
import json, sys
import roarfast.fills
roarfast.fills.__path__.append(sys.argv[1])
from click.testing import CliRunner
from roarfast.cli import main  # lists the fills in its options
torch_at_listing = "torch" in sys.modules
help_text = CliRunner().invoke(main, ["retrain", "--help"]).output
import pytest, torch
from tests.model_inputs import record_eval_inputs
seen = record_eval_inputs(pytest.MonkeyPatch())
result = CliRunner().invoke(main, ["retrain", "--run-dir", sys.argv[2], "--method", "random", "--fraction", "0.5",
                                   "--mode", "roar,kar", "--fill", "box-blur", "--epochs", "1", "--device", "cpu",
                                   "--no-progress", "--data-option", "num_train=20", "--data-option", "num_test=10"])
torch.save([inputs[-1] for inputs in seen], sys.argv[3])
print(json.dumps({"help": help_text, "torch_at_listing": torch_at_listing, "exit": result.exit_code,
                  "output": result.output}))
'''


def _box_blur(x: np.ndarray) -> np.ndarray:
    """Independently: per pixel the mean of the in-bounds pixels of its 3x3 window (x: [N, C, H, W])."""
    padded = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)), constant_values=np.nan)
    h, w = x.shape[2:]
    windows = [padded[:, :, dy:dy + h, dx:dx + w] for dy in range(3) for dx in range(3)]
    return np.nanmean(np.stack(windows), axis=0)


def test_a_fill_in_one_new_file_is_offered_and_retrains_through_the_loaders(tmp_path):
    fills_dir = tmp_path / "fills"
    fills_dir.mkdir()
    (fills_dir / "box_blur.py").write_text(BOX_BLUR)
    run_dir, seen_path = tmp_path / "run", tmp_path / "seen.pt"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    out = subprocess.run([sys.executable, "-c", DRIVER, str(fills_dir), str(run_dir), str(seen_path)], cwd=ROOT,
                         env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    report = json.loads(out.stdout.strip().splitlines()[-1])
    help_text = " ".join(report["help"].split())
    assert f"[{'|'.join(FILLS.names)}|box-blur]" in help_text  # the built-ins, then it (order=2)
    assert "box-blur: the mean of each removed pixel's 3x3 neighbourhood" in help_text
    assert not report["torch_at_listing"]  # listing the fills loads no fill's torch code
    assert report["exit"] == 0, report["output"]

    rows = RunDir(run_dir).rank_store.read("random", "test").tensor().long()  # [10, 32, 32], made by retrain
    ds = load_dataset("embedded", num_train=20, num_test=10)
    pixels = ds.test.images.double().numpy() / 255
    mean, std = (np.array(v).reshape(1, 3, 1, 1) for v in (ds.mean, ds.std))
    k = 512  # floor(0.5 x 1024)
    tested = torch.load(seen_path)
    assert len(tested) == 2  # roar, kar: one training each
    for inputs, replaced in zip(tested, (rows < k, rows >= k)):
        replaced = replaced.unsqueeze(1).numpy()
        expected = (np.where(replaced, _box_blur(pixels), pixels) - mean) / std
        torch.testing.assert_close(inputs.double(), torch.from_numpy(expected), rtol=0, atol=1e-5)
        assert not np.allclose(expected, (pixels - mean) / std, atol=1e-3)  # the blur changed what was seen
    with sqlite3.connect(RunDir(run_dir).results_path) as db:
        assert db.execute("SELECT DISTINCT fill FROM measurements").fetchall() == [("box-blur",)]
