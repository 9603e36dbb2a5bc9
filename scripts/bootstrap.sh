#!/usr/bin/env bash
# Sets up everything roarfast needs in ./.venv, idempotently: the venv, torch (the local wheel:
# torch 2.14.1 / torchvision 0.29.1), the Python dependencies, and the C++/CUDA extension build (CUDA
# kernels where a GPU is visible or ROARFAST_CUDA=1 asks; --test asks wherever nvcc is).
# Each step is skipped when its inputs have not changed since it last succeeded.
# Usage: bash scripts/bootstrap.sh [--test] [--docs]   (run by scripts/run.sh; scripts/test.sh adds --test for
# the test extra: captum, DALI, pandas, Ray, timm, nbclient and ipykernel for the notebook test; --docs, the docs
# extra that builds the documentation site: scripts/docs.sh, .ci/run)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$PWD
VENV=${ROARFAST_VENV:-$ROOT/.venv}
PY=$VENV/bin/python
TORCH_PIN=${ROARFAST_TORCH:-"torch==2.14.1 torchvision==0.29.1"}
log() { echo "[bootstrap] $*" >&2; }
# torch is installed without its bytecode (below): the first process that imports a module writes its .pyc into
# the venv, and every later one reads it (import torch: 1.9 s of CPU against 3.4 s), even where the environment
# asks Python not to write bytecode
unset PYTHONDONTWRITEBYTECODE
TEST=0 DOCS=0
for arg in "$@"; do
  case "$arg" in
    --test) TEST=1 ;;
    --docs) DOCS=1 ;;
    *) log "unknown argument $arg (usage: bash scripts/bootstrap.sh [--test] [--docs])"; exit 2 ;;
  esac
done

if [ ! -x "$PY" ]; then
  log "creating $VENV"
  python3 -m venv "$VENV"
fi
# installed or not, asked of the package metadata: importing torch costs seconds, and each run.sh asks
if ! "$PY" -c "from importlib.metadata import version; version('torch'); version('torchvision'); version('ninja')" \
    2>/dev/null; then
  log "installing $TORCH_PIN and ninja (several GB, from the local wheel cache where there is one)"
  # ninja: what the extension build needs besides torch. --no-compile: Python compiles the modules it
  # imports as it first imports them, instead of pip compiling every one of torch's thousands here
  "$PY" -m pip install -q --no-compile $TORCH_PIN ninja
fi

stamp() { cat "$@" | sha256sum | cut -c1-16; }
# the runtime dependencies always; the test extra (captum, DALI, pandas, Ray) only for the tests
install_deps() {  # $1: "runtime" or an extra ("test", "docs")
  local marker="$VENV/.roarfast-deps-$1" deps_stamp
  deps_stamp=$(stamp pyproject.toml)
  [ "$(cat "$marker" 2>/dev/null)" != "$deps_stamp" ] || return 0
  log "installing Python dependencies ($1)"
  # one requirement a line: a requirement with an environment marker holds spaces
  local listed deps
  listed=$(EXTRA="$1" "$PY" - <<'PYEOF'
import os, tomllib
project = tomllib.load(open("pyproject.toml", "rb"))["project"]
deps = project["dependencies"] if os.environ["EXTRA"] == "runtime" else project["optional-dependencies"][os.environ["EXTRA"]]
print("\n".join(d for d in deps if not d.startswith(("torch", "torchvision"))))
PYEOF
)
  mapfile -t deps <<< "$listed"
  "$PY" -m pip install -q "${deps[@]}"
  echo "$deps_stamp" > "$marker"
}

# CUDA kernels where they can run (a GPU visible) or where asked (ROARFAST_CUDA=1); the tests ask wherever a
# toolkit is, so CI (nvcc, no GPU) compiles every .cu (setup.py decides; --cuda-plan prints its choice)
if [ "$TEST" = 1 ] && [ -z "${ROARFAST_CUDA:-}" ] && [ "$("$PY" setup.py --cuda-toolkit)" = 1 ]; then
  export ROARFAST_CUDA=1
fi
read -r want_cuda gpu cuda_reason <<< "$("$PY" setup.py --cuda-plan)"
# the stamp: the sources, setup.py and torch; the marker adds whether the build has CUDA kernels, so a build
# without them is redone when they are wanted (one with them serves a CPU-only wish as well)
src_stamp=$( (find csrc -type f | sort | xargs cat; cat setup.py
  "$PY" -c "from importlib.metadata import version; print(version('torch'))") | sha256sum | cut -c1-16)
read -r built_stamp built_cuda 2>/dev/null < "$VENV/.roarfast-build" || true
build_extension() {  # compiles roarfast._C; its log is build/roarfast-build.log
  log "building the roarfast extension: $cuda_reason (log: build/roarfast-build.log)"
  mkdir -p build
  installed=$(cd / && "$PY" -c "import pathlib, roarfast; print(pathlib.Path(roarfast.__file__).resolve().parent)" \
    2>/dev/null || true)
  if [ "$installed" = "$ROOT/roarfast" ]; then
    # this checkout is installed (editable) already: rebuild in place, ninja recompiles only what changed
    build=("$PY" setup.py build_ext --inplace)
  else
    build=("$PY" -m pip install -v --no-build-isolation --no-deps -e .)
  fi
  started=$SECONDS
  if ! "${build[@]}" > build/roarfast-build.log 2>&1; then
    tail -n 60 build/roarfast-build.log >&2
    log "the extension build failed; the whole log is build/roarfast-build.log"
    return 1
  fi
  sed -n '/roarfast build configuration/,/cuda_unity_units/p' build/roarfast-build.log >&2
  # the kernels compile as unity units (build/unity/unity_cuda_N.cu, each #including some of csrc's .cu files)
  compiled=$(grep -oE "unity_cuda_[0-9]+\.cu" build/roarfast-build.log | sort -u | tr "\n" " " || true)
  log "built in $((SECONDS - started)) s; CUDA units compiled: ${compiled:-none}"
  echo "$src_stamp cuda=$want_cuda" > "$VENV/.roarfast-build"
}
build_pid=
trap 'wait' EXIT  # a failed step ends the script only after a build it started has ended: no orphan compiler
if [ "${built_stamp:-}" != "$src_stamp" ] || ! ls roarfast/_C*.so >/dev/null 2>&1 \
    || { [ "$want_cuda" = 1 ] && [ "${built_cuda:-}" != "cuda=1" ]; }; then
  # the build needs torch and ninja only: it compiles while pip installs the other dependencies
  build_extension &
  build_pid=$!
elif [ "$gpu" = 1 ] && [ "${built_cuda:-}" != "cuda=1" ]; then
  log "$cuda_reason"  # never silent: this machine has a GPU that the extension cannot use
fi
install_deps runtime
if [ "$TEST" = 1 ]; then
  install_deps test
fi
if [ "$DOCS" = 1 ]; then
  install_deps docs
fi
if [ -n "$build_pid" ] && ! wait "$build_pid"; then
  exit 1
fi
# A dry run's records of this machine: the default sweep's model traced once (its FLOPs and saved activations:
# counting them on the meta device loads torch's compiler, seconds) and its steps timed, written to the cache that
# every later dry run reads (roarfast/stages/step_times.py), so that a user's first dry run answers from them. Again when
# the sources or the build change; a failure here only costs that speed, and says so.
steps_stamp=$( (cat "$VENV/.roarfast-build"; find roarfast -name '*.py' | sort | xargs cat) | sha256sum | cut -c1-16)
if [ "$(cat "$VENV/.roarfast-steps" 2>/dev/null)" != "$steps_stamp" ]; then
  log "timing this machine's steps for dry runs (once)"
  steps_dir=$(mktemp -d)
  if "$VENV/bin/roarfast" sweep --dry-run --run-dir "$steps_dir/run" > "$steps_dir/log" 2>&1; then
    echo "$steps_stamp" > "$VENV/.roarfast-steps"
  else
    tail -n 5 "$steps_dir/log" >&2
    log "the dry run that times this machine's steps failed: dry runs will time them when first asked"
  fi
  rm -rf "$steps_dir"
fi
