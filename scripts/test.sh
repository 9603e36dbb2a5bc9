#!/usr/bin/env bash
# The test command: set-up (venv, torch, extension build), the C++ unit tests, then pytest.
# Extra arguments go to pytest (e.g. `bash scripts/test.sh -k mask`).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/bootstrap.sh --test
bash scripts/ctest.sh
exec "${ROARFAST_VENV:-$PWD/.venv}/bin/python" -m pytest "$@"
