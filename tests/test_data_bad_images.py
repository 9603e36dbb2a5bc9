"""Every image file is checked before a decoder sees it, on every decoder path: DALI (its CPU pipeline here, the
GPU's where there is one) and the CPU decoder, a tree decoded into memory (and its canvases cached) or streamed.
Each kind of bad file (empty, truncated two ways, unreadable, not an image) is named in one line with what is
wrong with it, or left out with skip_bad, counted and said; no decoder is handed it. A file that turns bad after
its tree was loaded is named by the decoders' own check, mid-stream too. An empty file among a few dozen used to
kill the process inside DALI (a segfault, no message)."""

import io
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch
from PIL import Image

from roarfast.data import headers, outline_dataset
from roarfast.data.builtin.imagefolder import load_imagefolder
from roarfast.data.decode import CPU_DECODER, DALI, canvas_batches, dali_installed
from roarfast.data.stream import StreamLoader
from roarfast.errors import UserError
from tests.test_data_headers import deny
from tests.test_data_imagefolder import decoder  # noqa: F401 (a fixture: DALI, then the CPU decoder)

BAD = ("val", "b/bad.jpg")


def jpeg(seed: int, side: int = 20) -> bytes:
    out = io.BytesIO()
    pixels = np.random.default_rng(seed).integers(0, 256, (side, side + 4, 3), dtype=np.uint8)
    Image.fromarray(pixels).save(out, "JPEG", quality=90)
    return out.getvalue()


#: each kind of bad file: how it is made from a whole JPEG's bytes, and what the line says of it
KINDS = {
    "empty": (lambda good: b"", "empty: 0 bytes"),
    "no end marker": (lambda good: good[:good.rindex(b"\xff\xd9")],
                      "truncated: no JPEG end-of-image marker after its image data"),
    "shorter than its headers": (lambda good: good[:good.index(b"\xff\xdb") + 10],
                                 "shorter than its JPEG headers say"),
    "not an image": (lambda good: b"a text file, named as an image\n",
                     "not an image: neither JPEG, PNG, BMP, TIFF nor WebP"),
    "unreadable": (None, "unreadable: Permission denied"),
}


def make_tree(root, per_class: int = 3):
    for split in ("train", "val"):
        for c, cls in enumerate(("a", "b")):
            (root / split / cls).mkdir(parents=True, exist_ok=True)
            for i in range(per_class):
                (root / split / cls / f"{i}.jpg").write_bytes(jpeg(100 * c + i))
    return root


def spoil(path, kind: str, monkeypatch) -> None:
    make, _ = KINDS[kind]
    good = path.read_bytes() if path.exists() else jpeg(7)
    path.write_bytes(good)
    if make is None:
        deny(path, monkeypatch)
    else:
        path.write_bytes(make(good))


def decoded_paths(monkeypatch) -> list:
    """The paths whose bytes a decoder is handed from now on (every decoder reads them through read_checked)."""
    seen = []
    original = headers.read_checked

    def recording(path):
        seen.append(str(path))
        return original(path)

    for module in ("roarfast.data.dali", "roarfast.data.decode"):
        monkeypatch.setattr(f"{module}.read_checked", recording)
    return seen


@pytest.mark.parametrize("stream", [False, True], ids=["in-memory", "streamed"])
@pytest.mark.parametrize("kind", KINDS)
def test_a_bad_file_is_named_or_skipped_and_never_decoded(tmp_path, monkeypatch, caplog, decoder, kind, stream):
    root = make_tree(tmp_path / "tree")
    bad = root / BAD[0] / BAD[1]
    spoil(bad, kind, monkeypatch)
    why = KINDS[kind][1]
    seen = decoded_paths(monkeypatch)
    with pytest.raises(UserError) as err:
        load_imagefolder(root, device="cpu", stream=stream)
    said = str(err.value)
    assert said.startswith(f"cannot decode 1 image(s) in {root / 'val'}: b/bad.jpg (") and why in said
    assert said.endswith("(--data-option skip_bad=true skips them)") and "\n" not in said
    with caplog.at_level("WARNING"):
        train, test = load_imagefolder(root, device="cpu", stream=stream, skip_bad=True)
    assert len(train) == 6 and len(test) == 6 and "b/bad.jpg" not in getattr(test, "files", [])
    assert f"skipping 1 bad image(s) of 7 in {root / 'val'}: b/bad.jpg (" in caplog.text and why in caplog.text
    if stream:  # the streamed split's batches: the six files kept
        loader = StreamLoader(test, (0.5,) * 3, (0.25,) * 3, "cpu", num_threads=1)
        assert sum(len(x) for x, _ in loader.batches(torch.arange(len(test)), 4)) == 6
    assert seen and str(bad) not in seen  # the decoders were handed every file but the bad one


def test_a_file_spoiled_after_its_canvases_were_cached_is_named_not_mapped(tmp_path, monkeypatch, decoder):
    root = make_tree(tmp_path / "tree")
    first, _ = load_imagefolder(root, device="cpu", stream=False)  # decoded, and the canvases cached
    spoil(root / "train" / "a" / "1.jpg", "no end marker", monkeypatch)
    with pytest.raises(UserError, match=r"train: a/1.jpg \(truncated: no JPEG end-of-image marker"):
        load_imagefolder(root, device="cpu", stream=False)
    kept, _ = load_imagefolder(root, device="cpu", stream=False, skip_bad=True)
    assert torch.equal(kept.images, first.images[[0, 2, 3, 4, 5]])  # the other canvases as they were


@pytest.mark.parametrize("kind", KINDS)
def test_a_file_that_turns_bad_mid_stream_is_named_by_the_decoders_check(tmp_path, monkeypatch, decoder, kind):
    root = make_tree(tmp_path / "tree")
    train, _ = load_imagefolder(root, device="cpu", stream=True)
    spoil(root / "train" / "b" / "2.jpg", kind, monkeypatch)  # row 5
    loader = StreamLoader(train, (0.5,) * 3, (0.25,) * 3, "cpu", num_threads=1)
    with pytest.raises(headers.BadImageFile) as err:
        for _ in loader.batches(torch.arange(6), 3):
            pass
    assert err.value.path == root / "train" / "b" / "2.jpg" and KINDS[kind][1] in err.value.problem
    assert isinstance(err.value, UserError) and "\n" not in str(err.value)  # the command line says it in one line


@pytest.mark.parametrize("which", [DALI, CPU_DECODER])
@pytest.mark.parametrize("kind", KINDS)
def test_each_decoder_refuses_a_bad_file_it_is_handed(tmp_path, monkeypatch, which, kind):
    if which == DALI and not dali_installed():
        pytest.skip("nvidia-dali is not installed")
    folder = tmp_path / "files"
    folder.mkdir()
    (folder / "good.jpg").write_bytes(jpeg(1))
    spoil(folder / "bad.jpg", kind, monkeypatch)
    with pytest.raises(headers.BadImageFile) as err:
        for _ in canvas_batches(which, folder, ["good.jpg", "bad.jpg"], [np.array([0, 1])], 16, 12):
            pass
    assert err.value.path == folder / "bad.jpg" and KINDS[kind][1] in err.value.problem


@pytest.mark.cuda
@pytest.mark.parametrize("kind", KINDS)
def test_dali_s_gpu_decoder_is_never_handed_a_bad_file(tmp_path, monkeypatch, kind):
    pytest.importorskip("nvidia.dali", reason="nvidia-dali is not installed")
    root = make_tree(tmp_path / "tree")
    spoil(root / BAD[0] / BAD[1], kind, monkeypatch)
    with pytest.raises(UserError, match=rf"b/bad.jpg \({KINDS[kind][1]}"):
        load_imagefolder(root, device="gpu", stream=False)
    train, test = load_imagefolder(root, device="gpu", stream=True, skip_bad=True)
    loader = StreamLoader(test, (0.5,) * 3, (0.25,) * 3, "cuda")
    assert sum(len(x) for x, _ in loader.batches(torch.arange(len(test)), 4)) == 6


@pytest.mark.skipif(not dali_installed(), reason="nvidia-dali is not installed")
@pytest.mark.parametrize("skip_bad", [False, True])
def test_an_empty_file_among_dozens_no_longer_kills_the_process(tmp_path, skip_bad):
    """The tree that crashed DALI's CPU pipeline (rc 139, no message): 40 images a class of 64-67 px, one of the
    held-out split's empty. In a child process, so that a crash fails this test alone."""
    root = tmp_path / "tree"
    for split in ("train", "val"):
        for c, cls in enumerate(("a", "b")):
            (root / split / cls).mkdir(parents=True)
            for i in range(40):
                side = 64 + i % 4
                pixels = np.random.default_rng(1000 * c + i).integers(0, 256, (side, side + 3, 3), dtype=np.uint8)
                Image.fromarray(pixels).save(root / split / cls / f"{i}.jpg")
    (root / "val" / "a" / "0.jpg").write_bytes(b"")
    code = textwrap.dedent(f"""
        from roarfast.data.builtin.imagefolder import load_imagefolder
        from roarfast.errors import UserError
        try:
            train, test = load_imagefolder({str(root)!r}, device="cpu", skip_bad={skip_bad})
            print("loaded", len(train), len(test))
        except UserError as err:
            print("refused:", err)
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    expected = "loaded 80 79" if skip_bad else f"refused: cannot decode 1 image(s) in {root / 'val'}: a/0.jpg (empty"
    assert done.stdout.startswith(expected)


def test_a_load_reads_each_header_once_and_a_dry_run_only_those_that_settle_the_canvas(tmp_path, monkeypatch):
    """Cheap: a load checks every file from one read of its head and tail (the size taken from the same reads),
    kept for later loads; a dry run's outline reads only the headers that settle the canvas."""
    root = tmp_path / "tree"
    for split in ("train", "val"):
        for c, cls in enumerate(("a", "b")):
            (root / split / cls).mkdir(parents=True)
            for i in range(4):  # sizes varied: the canvas is settled by the first two that decode
                (root / split / cls / f"{i}.jpg").write_bytes(jpeg(10 * c + i, side=16 + 2 * i + c))
    files = sorted(str(path) for path in root.rglob("*.jpg"))
    read = []
    original = headers.read_header
    monkeypatch.setattr(headers, "read_header", lambda path: read.append(str(path)) or original(path))
    outline_dataset("imagefolder", root, device="cpu")
    assert len(set(read)) < len(files)  # not every file
    read.clear()
    load_imagefolder(root, device="cpu")
    assert sorted(read) == files  # every file, once
    read.clear()
    load_imagefolder(root, device="cpu")
    assert read == []  # kept
