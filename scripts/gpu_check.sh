#!/usr/bin/env bash
# Everything a GPU machine should check, in one command, within about 10 minutes:
#   bash scripts/gpu_check.sh [RESULTS_DIR]      (default: $OUT, else ./gpu-results)
# 1. builds the extension in place against this machine's torch (no network, no torch install);
# 2. runs every cuda-marked test;
# 3. benchmarks/ops.py (rank with both large-image sorts);
# 4. benchmarks/retrain_cells.py: one fastnet-gpu retraining on CIFAR-10-size synthetic data with the
#    GPU utilization sampled, and 1, 2, 4, 8 cells trained at once;
# 5. benchmarks/throughput.py --quick;
# 6. the op tests once under compute-sanitizer memcheck and the block-sort tests under racecheck
#    (big-image cases left out: the sanitizers are ~50x slower), last, as the budget allows.
# Every result is a file in RESULTS_DIR; summary.txt lists each stage's status and seconds. A stage
# that would overrun the budget (ROARFAST_GPU_BUDGET seconds, default 570) is cut by timeout and says so.
# Carried wheels (captum) in .whl/ are installed to /tmp/site first when present.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
RESULTS=${1:-${OUT:-$PWD/gpu-results}}
mkdir -p "$RESULTS"
RESULTS=$(cd "$RESULTS" && pwd)
BUDGET=${ROARFAST_GPU_BUDGET:-570}
export PYTHONUNBUFFERED=1
PY=${PYTHON:-python3}
SUMMARY=$RESULTS/summary.txt
: > "$SUMMARY"
if ls .whl/*.whl >/dev/null 2>&1; then
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}

# stage NAME CAP_SECONDS COMMAND...: runs COMMAND with its output in RESULTS/NAME.log, cut at
# min(CAP, what is left of the budget); records status and seconds in summary.txt.
stage() {
  local name=$1 cap=$2; shift 2
  local left=$((BUDGET - SECONDS))
  local limit=$((cap < left ? cap : left))
  if [ "$limit" -le 5 ]; then
    echo "$name: SKIPPED (budget of ${BUDGET}s spent)" | tee -a "$SUMMARY"; return
  fi
  local start=$SECONDS
  timeout --kill-after=10 "$limit" "$@" > "$RESULTS/$name.log" 2>&1
  local rc=$?
  local status=ok
  [ "$rc" = 124 ] || [ "$rc" = 137 ] && status="CUT after ${limit}s"
  [ "$status" = ok ] && [ "$rc" != 0 ] && status="FAILED (exit $rc)"
  echo "$name: $status, $((SECONDS - start))s" | tee -a "$SUMMARY"
  tail -3 "$RESULTS/$name.log"
}

{
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  $PY -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)"
  date -u +%Y-%m-%dT%H:%M:%SZ
} | tee "$RESULTS/machine.txt"
arch=$($PY -c "import torch; p=torch.cuda.get_device_properties(0); print(f'{p.major}.{p.minor}')")
stage build 400 env MAX_JOBS="${MAX_JOBS:-16}" TORCH_CUDA_ARCH_LIST="${TORCH_CUDA_ARCH_LIST:-$arch}" \
  $PY setup.py build_ext --inplace
ls roarfast/_C*.so >/dev/null 2>&1 || { echo "BUILD FAILED: see $RESULTS/build.log"; exit 1; }

if command -v cuobjdump >/dev/null; then  # the numerics policy: no float32 FMA in roarfast's kernels
  echo "FFMA instructions in roarfast._C (want 0): $(cuobjdump -sass roarfast/_C*.so | grep -c FFMA)" \
    | tee -a "$SUMMARY"
fi
stage cuda-tests 150 $PY -m pytest -q -m cuda -p no:cacheprovider --junitxml="$RESULTS/cuda-tests.xml" tests
stage bench-ops 75 $PY benchmarks/ops.py --device cuda --min-run-time 0.2 --rank-sort device,segmented \
  --json "$RESULTS/ops.json"
stage retrain-cells 180 $PY benchmarks/retrain_cells.py --out "$RESULTS"
stage bench-throughput 100 $PY benchmarks/throughput.py --device cuda --quick --json "$RESULTS/throughput.json"
# the sanitizers slow kernels ~50x: small inputs only, no opcheck sweeps, no sleeping streams
SMALL="not 224 and not large and not grid_stride and not uint16_boundary and not 65536"
SMALL="$SMALL and not batch_sizes and not opcheck and not stream"
if command -v compute-sanitizer >/dev/null; then
  stage memcheck 120 compute-sanitizer --tool memcheck --error-exitcode 3 --target-processes all \
    $PY -m pytest -q -x -m cuda -p no:cacheprovider -k "$SMALL" tests/test_ops_rank.py tests/test_ops_mask.py \
    tests/test_ops_noise.py tests/test_ops_ensemble.py tests/test_ops_reduce_channels.py tests/test_ops_devices.py
  stage racecheck 60 compute-sanitizer --tool racecheck --racecheck-report all --error-exitcode 3 \
    --target-processes all $PY -m pytest -q -x -m cuda -p no:cacheprovider -k "block_sort_sizes and float32" \
    tests/test_ops_rank.py
else
  echo "memcheck, racecheck: SKIPPED (no compute-sanitizer on PATH)" | tee -a "$SUMMARY"
fi
echo "total ${SECONDS}s; results in $RESULTS" | tee -a "$SUMMARY"
