#!/usr/bin/env bash
# Proves the CPU kernels compile for aarch64 (GH200 / Grace hosts): a syntax-only compile of csrc's
# .cpp files with Debian's cross compiler against the venv torch's headers (arch-independent).
# Installs g++-aarch64-linux-gnu when missing and we are root; skips, saying so, where apt-get cannot run.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
VENV=${ROARFAST_VENV:-$PWD/.venv}
PY=${PYTHON:-$VENV/bin/python}
CXX=aarch64-linux-gnu-g++
if ! command -v "$CXX" >/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    (apt-get update -qq && apt-get install -y -qq --no-install-recommends g++-aarch64-linux-gnu) >/dev/null
  else
    echo "check_aarch64: SKIPPED, $CXX is missing and apt-get cannot run here (need root on Debian/Ubuntu)" >&2
    exit 0
  fi
fi
include=$("$PY" -c "import torch.utils.cpp_extension as e; print(' '.join(e.include_paths()))")
flags=(-std=c++20 -fsyntax-only -ffp-contract=off -fno-math-errno -Icsrc)
for dir in $include; do flags+=(-isystem "$dir"); done
# csrc/module.cpp needs Python.h of the host; the ops and their CPU kernels are what runs on the host CPU.
status=0
for src in csrc/ops/*.cpp csrc/ops/cpu/*.cpp; do
  "$CXX" "${flags[@]}" "$src" || { echo "check_aarch64: $src does not compile for aarch64" >&2; status=1; }
done
[ "$status" = 0 ] && echo "check_aarch64: every CPU source compiles for aarch64 ($("$CXX" -dumpversion))"
exit "$status"
