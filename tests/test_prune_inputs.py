"""Issue 40's other bad inputs, each one line: seeds and counts out of their bounds, Study's arguments of the
wrong type; and a tree's canvas decided by the decoder that decodes it (its size check and its decode agree)."""

import struct
import zlib

import pytest

from roarfast import Study
from roarfast.common.options import MAX_SEED
from roarfast.data import canvas
from roarfast.data.cache import Listing
from roarfast.data.canvas import examine
from roarfast.data.decode import CPU_DECODER, DALI
from roarfast.errors import UserError
from tests.test_cli_errors import fails_with_one_line
from tests.test_data_imagefolder_inputs import noise, tree_of


@pytest.mark.parametrize("args, exit_code, said", [
    (["train", "--seed", "99999999999999999999"], 2, f"0<=x<={MAX_SEED}"),
    (["sweep", "--dry-run", "--seeds", "100000000"], 2, "--seeds should be at most 10,000, got 100,000,000"),
    (["sweep", "--dry-run", "--seed", str(MAX_SEED - 2), "--seeds", "5"], 2, "(the last seed) should be a seed in"),
    (["sweep", "--dry-run", "--control-seeds", "100000000"], 2, "--control-seeds should be at most 10,000"),
])
def test_seeds_and_counts_out_of_bounds_are_one_line(tmp_path, args, exit_code, said):
    assert said in fails_with_one_line([*args, "--run-dir", str(tmp_path / "run")], exit_code)
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("run_dir, arguments, said", [
    (12345, {}, "run_dir should be a path, got int"),
    ("run", {"methods": 5}, "methods should be names, functions or {name: function}"),
    ("run", {"seed": "x"}, "seed should be an int (a seed), got str 'x'"),
    ("run", {"seed": MAX_SEED + 1}, f"seed should be a seed in [0, {MAX_SEED}]"),
    ("run", {"seeds": 2.5}, "seeds should be an int (retrainings per cell) or \"auto\", got float"),
    ("run", {"dataset_options": ["num_train=8"]}, "dataset_options should be a dict, got list"),
    ("run", {"progress": "no"}, "progress should be True or False"),
])
def test_a_study_s_arguments_of_the_wrong_type_are_one_line(tmp_path, run_dir, arguments, said):
    with pytest.raises(UserError) as err:
        Study(tmp_path / run_dir if isinstance(run_dir, str) else run_dir, **arguments)
    assert said in str(err.value) and "\n" not in str(err.value)


def bomb_png(path, side: int = 20000) -> None:
    """A PNG whose header says side x side: PIL refuses to open it (its decompression-bomb guard), DALI would
    decode it."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", side, side, 8, 2, 0, 0, 0)
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"\0" * 64))
                     + chunk(b"IEND", b""))


def test_the_canvas_is_decided_by_the_decoder_that_decodes(tmp_path, monkeypatch):
    monkeypatch.setenv("ROARFAST_CACHE_DIR", str(tmp_path / "cache"))
    root = tree_of(tmp_path / "tree", {"a": [noise(32, 32, 0)], "b": [noise(32, 32, 1)]})
    bomb_png(root / "train" / "b" / "big.png")
    listing = Listing.of(root / "train", ["a/0.png", "b/0.png", "b/big.png"])
    # the CPU decoder opens files with PIL, which refuses the 20000 px file: left out, the canvas stays 32 px
    assert canvas.undecodable(root / "train", ["b/big.png"], CPU_DECODER) == {"b/big.png": canvas.UNDECODABLE}
    assert examine(listing, CPU_DECODER).size == (32, 32)
    # DALI decodes it (here: a stand-in that decodes every file), so it is kept and its size counts: two sizes
    tried = []
    monkeypatch.setattr(canvas, "canvas_batches", lambda decoder, folder, files, *a: tried.append(
        (decoder, files)) or iter([{}]))
    assert examine(listing, DALI).size is None  # no longer the CPU decoder's cached answer
    assert (DALI, ["b/big.png"]) in tried or (DALI, ["a/0.png"]) in tried
