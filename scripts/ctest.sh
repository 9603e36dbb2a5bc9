#!/usr/bin/env bash
# Builds csrc/ against libtorch with CMake and runs the GoogleTest unit tests (ctest), then checks
# that the CPU kernels compile for aarch64 (scripts/check_aarch64.sh).
# Installs Debian's libgtest-dev when it is missing and we are root.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
VENV=${ROARFAST_VENV:-$PWD/.venv}
PY=$VENV/bin/python
export PATH="$VENV/bin:$PATH"  # the venv carries ninja and cmake-visible tools on a fresh machine
if [ ! -e /usr/include/gtest/gtest.h ]; then
  if [ "$(id -u)" = 0 ]; then
    (apt-get update -qq && apt-get install -y -qq libgtest-dev) >/dev/null
  else
    echo "GoogleTest is missing: sudo apt-get install libgtest-dev" >&2; exit 1
  fi
fi
cmake -S . -B cmake-build -G Ninja -DPython3_EXECUTABLE="$PY" >/dev/null
cmake --build cmake-build -j "${MAX_JOBS:-2}"
ctest --test-dir cmake-build --output-on-failure -j "${MAX_JOBS:-2}"
PYTHON="$PY" bash scripts/check_aarch64.sh
