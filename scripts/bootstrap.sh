#!/usr/bin/env bash
# Sets up everything roarfast needs in ./.venv, idempotently: the venv, torch (the local wheel:
# torch 2.14.1 / torchvision 0.29.1), the Python dependencies, and the C++/CUDA extension build.
# Each step is skipped when its inputs have not changed since it last succeeded.
# Usage: bash scripts/bootstrap.sh [--test]   (run by scripts/run.sh; scripts/test.sh adds --test for the
# test extra: captum, DALI, pandas, Ray)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$PWD
VENV=${ROARFAST_VENV:-$ROOT/.venv}
PY=$VENV/bin/python
TORCH_PIN=${ROARFAST_TORCH:-"torch==2.14.1 torchvision==0.29.1"}
log() { echo "[bootstrap] $*" >&2; }

if [ ! -x "$PY" ]; then
  log "creating $VENV"
  python3 -m venv "$VENV"
fi
if ! "$PY" -c "import torch, torchvision" 2>/dev/null; then
  log "installing $TORCH_PIN (several GB, from the local wheel cache where there is one)"
  "$PY" -m pip install -q $TORCH_PIN
fi

stamp() { cat "$@" | sha256sum | cut -c1-16; }
# the runtime dependencies always; the test extra (captum, DALI, pandas, Ray) only for the tests
install_deps() {  # $1: "runtime" or "test"
  local marker="$VENV/.roarfast-deps-$1" deps_stamp
  deps_stamp=$(stamp pyproject.toml)
  [ "$(cat "$marker" 2>/dev/null)" != "$deps_stamp" ] || return 0
  log "installing Python dependencies ($1)"
  deps=$(EXTRA="$1" "$PY" - <<'PYEOF'
import os, tomllib
project = tomllib.load(open("pyproject.toml", "rb"))["project"]
deps = project["dependencies"] if os.environ["EXTRA"] == "runtime" else project["optional-dependencies"]["test"]
print(" ".join(d for d in deps if not d.startswith(("torch", "torchvision"))))
PYEOF
)
  "$PY" -m pip install -q $deps
  echo "$deps_stamp" > "$marker"
}
install_deps runtime
if [ "${1:-}" = "--test" ]; then
  install_deps test
fi

build_stamp=$( (find csrc -type f | sort | xargs cat; cat setup.py; "$PY" -c "import torch; print(torch.__version__)"; echo "${ROARFAST_CUDA:-}") | sha256sum | cut -c1-16)
if [ "$(cat "$VENV/.roarfast-build" 2>/dev/null)" != "$build_stamp" ] || ! ls roarfast/_C*.so >/dev/null 2>&1; then
  log "building the roarfast extension (log: build/roarfast-build.log)"
  mkdir -p build
  installed=$(cd / && "$PY" -c "import pathlib, roarfast; print(pathlib.Path(roarfast.__file__).resolve().parent)" \
    2>/dev/null || true)
  if [ "$installed" = "$ROOT/roarfast" ]; then
    # this checkout is installed (editable) already: rebuild in place, ninja recompiles only what changed
    build=("$PY" setup.py build_ext --inplace)
  else
    build=("$PY" -m pip install -v --no-build-isolation --no-deps -e .)
  fi
  if ! "${build[@]}" > build/roarfast-build.log 2>&1; then
    tail -n 60 build/roarfast-build.log >&2
    log "the extension build failed; the whole log is build/roarfast-build.log"
    exit 1
  fi
  sed -n '/roarfast build configuration/,/cu_sources/p' build/roarfast-build.log >&2
  compiled=$(grep -oE "csrc/[A-Za-z0-9_/]+\.cu" build/roarfast-build.log | sort -u | tr "\n" " " || true)
  log "CUDA sources compiled: ${compiled:-none}"
  echo "$build_stamp" > "$VENV/.roarfast-build"
fi
