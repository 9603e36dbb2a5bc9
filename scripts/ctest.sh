#!/usr/bin/env bash
# Builds csrc/ against libtorch with CMake and runs the GoogleTest unit tests (ctest). Installs nothing into the
# system: cmake and GoogleTest's sources come with the test extra (bash scripts/bootstrap.sh --test; the
# ros-gtest-vendor wheel, x86-64 Linux); elsewhere the system's GoogleTest serves, and where there is none the C++
# tests are skipped in one line (ROARFAST_NEED_CTEST=1, as CI sets, makes that a failure). The aarch64 compile
# check needs a cross compiler from the system: CI runs it (.ci/run, scripts/check_aarch64.sh).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
VENV=${ROARFAST_VENV:-$PWD/.venv}
PY=$VENV/bin/python
export PATH="$VENV/bin:$PATH"  # the venv's cmake and ninja before any the system has
gtest_source=$("$PY" - <<'PYEOF'
from importlib import metadata

try:
    files = metadata.distribution("ros-gtest-vendor").files or []
except metadata.PackageNotFoundError:
    files = []
for file in files:
    if file.name == "gtest-all.cc":  # <folder>/src/gtest-all.cc
        print(file.locate().resolve().parent.parent)
PYEOF
)
if [ -z "$gtest_source" ] \
    && ! echo "#include <gtest/gtest.h>" | "${CXX:-c++}" -std=c++20 -x c++ -fsyntax-only - 2>/dev/null; then
  message="GoogleTest is missing (neither the test extra's ros-gtest-vendor nor the system's): install libgtest-dev or equivalent to run them"
  if [ "${ROARFAST_NEED_CTEST:-0}" = 1 ]; then
    echo "ctest: FAILED, $message" >&2
    exit 1
  fi
  echo "ctest: SKIPPED the C++ unit tests, $message" >&2
  exit 0
fi
cmake -S . -B cmake-build -G Ninja -DPython3_EXECUTABLE="$PY" -DROARFAST_GTEST_SOURCE="$gtest_source" >/dev/null
cmake --build cmake-build -j "${MAX_JOBS:-2}"
ctest --test-dir cmake-build --output-on-failure -j "${MAX_JOBS:-2}"
