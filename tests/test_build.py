"""The build and load path: CUDA detection without a GPU, and the errors a broken build gives."""

import importlib.util
import json
import shutil
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]


def load_setup():
    spec = importlib.util.spec_from_file_location("roarfast_setup", ROOT / "setup.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # not __main__: defines the helpers, builds nothing
    return module


def test_no_nvcc_gives_cpu_only_build(monkeypatch):
    setup = load_setup()
    monkeypatch.delenv("ROARFAST_CUDA", raising=False)
    build, reason = setup.want_cuda(None)
    assert build is False
    assert "CPU-only" in reason


def test_roarfast_cuda_0_forces_cpu_even_with_nvcc(monkeypatch):
    setup = load_setup()
    monkeypatch.setenv("ROARFAST_CUDA", "0")
    assert setup.want_cuda("/usr/local/cuda", gpu=False) == (False, "ROARFAST_CUDA=0: CPU-only build")


def test_roarfast_cuda_1_without_toolkit_is_an_error(monkeypatch):
    setup = load_setup()
    monkeypatch.setenv("ROARFAST_CUDA", "1")
    with pytest.raises(SystemExit, match="no CUDA toolkit"):
        setup.want_cuda(None)


@pytest.mark.skipif(torch.version.cuda is None, reason="needs a CUDA build of torch")
def test_cuda_kernels_are_built_where_a_gpu_is_visible_or_asked_for(monkeypatch):
    setup = load_setup()
    monkeypatch.delenv("ROARFAST_CUDA", raising=False)
    assert setup.want_cuda("/usr/local/cuda", gpu=True)[0] is True
    build, reason = setup.want_cuda("/usr/local/cuda", gpu=False)  # a CPU-only build where no GPU can run them
    assert build is False and "no GPU visible" in reason and "ROARFAST_CUDA=1 bash scripts/bootstrap.sh" in reason
    monkeypatch.setenv("ROARFAST_CUDA", "1")  # what scripts/test.sh asks wherever nvcc is: CI compiles every .cu
    assert setup.want_cuda("/usr/local/cuda", gpu=False) == (True, "ROARFAST_CUDA=1")


@pytest.mark.skipif(torch.version.cuda is None, reason="needs a CUDA build of torch")
@pytest.mark.parametrize("forced, toolkit", [("0", "/usr/local/cuda"), ("", None)])
def test_a_cpu_only_build_on_a_gpu_machine_says_how_to_add_the_kernels(monkeypatch, forced, toolkit):
    setup = load_setup()
    monkeypatch.setenv("ROARFAST_CUDA", forced)
    build, reason = setup.want_cuda(toolkit, gpu=True)
    assert build is False
    assert "CPU-only build on a machine with a GPU; `ROARFAST_CUDA=1 bash scripts/bootstrap.sh` adds" in reason


def test_device_cuda_with_a_cpu_only_extension_is_refused_in_one_line(monkeypatch, capsys):
    from roarfast.common import device
    from roarfast.common.device import resolve_device
    from roarfast.errors import UserError

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(device, "build_config", lambda: {"cuda": False, "cuda_reason": "no GPU visible"})
    with pytest.raises(UserError, match=r"--device cuda: roarfast's extension was built without CUDA kernels; "
                                        r"`ROARFAST_CUDA=1 bash scripts/bootstrap.sh` adds them"):
        resolve_device("cuda")
    assert resolve_device("auto") == torch.device("cpu")  # auto passes over the GPU, saying so
    assert "ROARFAST_CUDA=1 bash scripts/bootstrap.sh" in capsys.readouterr().err


@pytest.mark.skipif(torch.version.cuda is None or load_setup().find_cuda_home() is None,
                    reason="needs nvcc and a CUDA build of torch")
def test_installed_build_has_cpu_and_cuda_kernels():
    from roarfast import _extension, ops  # noqa: F401  (loads _C)

    config = _extension.build_config()
    if not config.get("cuda"):
        pytest.skip(f"this build was made without CUDA: {config.get('cuda_reason')}")
    for op in ("rank",):
        assert _extension.has_kernel(op, "CPU")
        assert _extension.has_kernel(op, "CUDA")


def test_mismatched_torch_build_names_the_fix(monkeypatch):
    from roarfast import _extension

    monkeypatch.setattr(_extension, "build_config", lambda: {"torch": "0.0.1-other"})
    with pytest.raises(_extension.ExtensionError) as err:
        _extension.load()
    assert "0.0.1-other" in str(err.value) and "pip install --no-build-isolation -e ." in str(err.value)


def test_missing_extension_names_the_fix(monkeypatch):
    import importlib

    from roarfast import _extension

    def missing(name):
        raise ModuleNotFoundError(f"No module named '{name}'")

    monkeypatch.setattr(_extension, "build_config", lambda: {})
    monkeypatch.setattr(importlib, "import_module", missing)
    with pytest.raises(_extension.ExtensionError, match="is not built; build it: bash scripts/bootstrap.sh"):
        _extension.load()


def test_build_config_records_torch_version():
    config = json.loads((ROOT / "roarfast" / "_build_config.json").read_text())
    assert config["torch"] == torch.__version__


def test_unity_units_include_every_source_once_and_are_rewritten_only_on_change(tmp_path):
    setup = load_setup()
    csrc = tmp_path / "csrc"
    sizes = {"a.cpp": 900, "ops/b.cpp": 500, "ops/cpu/c.cpp": 450, "d.cpp": 10}
    for name, size in sizes.items():
        (csrc / name).parent.mkdir(parents=True, exist_ok=True)
        (csrc / name).write_text("x" * size)
    sources = sorted(csrc.rglob("*.cpp"))
    units = setup.unity_sources(sources, csrc, tmp_path / "unity", units=2)
    included = [line.split('"')[1] for unit in units for line in unit.read_text().splitlines()
                if line.startswith("#include")]
    assert sorted(included) == sorted(sizes)  # each source in exactly one unit, by its include-root path
    by_unit = [sum(sizes[line.split('"')[1]] for line in unit.read_text().splitlines() if line.startswith("#"))
               for unit in units]
    assert sorted(by_unit) == [910, 950]  # largest first, each into the lighter unit: 900+10 and 500+450
    mtimes = [unit.stat().st_mtime_ns for unit in units]
    assert setup.unity_sources(sources, csrc, tmp_path / "unity", units=2) == units
    assert [unit.stat().st_mtime_ns for unit in units] == mtimes  # unchanged lists: ninja rebuilds nothing
    one = setup.unity_sources(sources, csrc, tmp_path / "unity", units=1)  # fewer units: the stale one is removed
    assert [unit.name for unit in (tmp_path / "unity").glob("*.cpp")] == [one[0].name]
    assert len(setup.unity_sources(sources, csrc, tmp_path / "u2", units=99)) == len(sizes)  # never an empty unit


def test_the_unity_grouping_is_the_same_whatever_the_machines_job_count(monkeypatch, tmp_path):
    # a grouping that followed the job count would let a clash between two sources show on some machines only
    setup = load_setup()
    monkeypatch.setenv("ROARFAST_CUDA", "0")
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", setup.DEFAULT_ARCHS)
    groupings = {}
    for jobs in ("1", "2", "4", "16"):
        root = tmp_path / jobs  # a copy of the sources: the build's own units stay as they are
        shutil.copytree(ROOT / "csrc", root / "csrc")
        monkeypatch.setattr(setup, "ROOT", root)
        monkeypatch.setattr(setup, "UNITY_DIR", root / "build" / "unity")
        monkeypatch.setenv("MAX_JOBS", jobs)
        ext, _ = setup.extension()
        groupings[jobs] = [(unit, (root / unit).read_text()) for unit in ext.sources]
    assert len(groupings["1"]) > 1  # several units, so that a grouping could differ
    assert groupings["1"] == groupings["2"] == groupings["4"] == groupings["16"]


def test_the_extension_is_built_from_unity_units_covering_every_source():
    config = json.loads((ROOT / "roarfast" / "_build_config.json").read_text())
    cpp = list((ROOT / "csrc").rglob("*.cpp"))
    assert config["sources"] - config["cu_sources"] == len(cpp)
    assert 1 <= config["unity_units"] <= len(cpp)
    if config["cuda"]:  # the kernels too: every .cu in some unit
        assert config["cu_sources"] == len(list((ROOT / "csrc").rglob("*.cu")))
        assert 1 <= config["cuda_unity_units"] <= config["cu_sources"]
