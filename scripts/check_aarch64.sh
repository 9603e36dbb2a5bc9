#!/usr/bin/env bash
# Proves the CPU kernels compile for aarch64 (GH200 / Grace hosts): a syntax-only compile of csrc's
# .cpp files with Debian's cross compiler against the venv torch's headers (arch-independent).
# CI runs it (.ci/run installs g++-aarch64-linux-gnu first, as root); the test command does not, since the cross
# compiler is a system package.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
VENV=${ROARFAST_VENV:-$PWD/.venv}
PY=${PYTHON:-$VENV/bin/python}
CXX=aarch64-linux-gnu-g++
if ! command -v "$CXX" >/dev/null; then
  echo "check_aarch64: $CXX is missing; install it (Debian/Ubuntu: apt-get install g++-aarch64-linux-gnu)" >&2
  exit 1
fi
include=$("$PY" -c "import torch.utils.cpp_extension as e; print(' '.join(e.include_paths()))")
flags=(-std=c++20 -fsyntax-only -ffp-contract=off -fno-math-errno -Icsrc)
for dir in $include; do flags+=(-isystem "$dir"); done
# csrc/module.cpp needs Python.h of the host; the ops and their CPU kernels are what runs on the
# host CPU. One translation unit includes them all, as setup.py's unity build does: torch's headers are parsed
# once (about 10 s) rather than once a source (minutes); an error still names the source it is in.
sources=(csrc/ops/*.cpp csrc/ops/cpu/*.cpp)
unit=$(mktemp --suffix=.cpp)
trap 'rm -f "$unit"' EXIT
for src in "${sources[@]}"; do echo "#include \"$PWD/$src\""; done > "$unit"
if "$CXX" "${flags[@]}" "$unit"; then
  echo "check_aarch64: every CPU source compiles for aarch64 (${#sources[@]} sources, $("$CXX" -dumpversion))"
else
  echo "check_aarch64: the CPU sources do not compile for aarch64 (the errors above name the source)" >&2
  exit 1
fi
