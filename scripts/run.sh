#!/usr/bin/env bash
# The main job: set-up (venv, torch, extension build), then `roarfast run` on the embedded dataset.
# Extra arguments go to `roarfast run` (e.g. `bash scripts/run.sh --device cuda`).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/bootstrap.sh
# the job writes the .pyc of the modules it imports (bootstrap.sh says why): its cell processes, started after
# its own imports, and later runs read them
unset PYTHONDONTWRITEBYTECODE
exec "${ROARFAST_VENV:-$PWD/.venv}/bin/roarfast" run "$@"
