#!/usr/bin/env bash
# The test command: set-up (venv, torch, extension build), the C++ unit tests, then pytest, then (the whole
# suite asked for: no arguments) the determinism and golden tests again under a second CPU code path.
# Extra arguments go to pytest (e.g. `bash scripts/test.sh -k mask`). With none, the tests marked `slow` (long
# end-to-end trainings: 4 minutes on 2 quiet cores, beyond CI's 30-minute budget) are left out:
# `bash scripts/test.sh -m slow` runs them. The main job's own end-to-end test (tests/test_session.py) is not slow.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/bootstrap.sh --test
bash scripts/ctest.sh
python="${ROARFAST_VENV:-$PWD/.venv}/bin/python"
if [ "$#" -eq 0 ]; then
  # the files spread over worker processes (pytest-xdist; a file's tests, and so its module fixtures, in one worker):
  # as many as the cores, at most 4 (each trains with torch's threads); ROARFAST_TEST_WORKERS=0 runs them in this one.
  # The files in collection order, which puts those that take minutes first (tests/conftest.py), not xdist's order
  # by number of tests, which left the longest files for last
  workers="${ROARFAST_TEST_WORKERS:-$(( $(nproc) < 4 ? $(nproc) : 4 ))}"
  "$python" -m pytest -m "not slow" -n "$workers" --dist loadfile --no-loadscope-reorder
else
  "$python" -m pytest "$@"
fi
if [ "$#" -eq 0 ]; then
  # AVX2 kernels in ATen and oneDNN: on an AVX-512 (or other) CPU, a float result that depends on the code path
  # fails here, in CI, instead of on a user's machine (tests marked `golden`, in the files that hold them)
  ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 "$python" -m pytest -q -m golden \
    $(grep -l "pytest.mark.golden" tests/test_*.py)
fi
