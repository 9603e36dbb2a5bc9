#!/usr/bin/env bash
# Everything a GPU machine should check, in one command, within about 10 minutes:
#   bash scripts/gpu_check.sh [RESULTS_DIR]      (default: ./gpu-results)
#   ROARFAST_GPU_STAGES=build,cuda-tests,...     (default: every stage, in the order below)
# Stages, correctness first so that a short budget still answers "does it work":
#   build            the extension in place against this machine's torch (no network, no torch install)
#   cuda-tests       every cuda-marked test
#   memcheck         the op tests under compute-sanitizer memcheck (small cases: ~50x slower)
#   racecheck        the block-sort tests under racecheck
#   bench-ops        benchmarks/ops.py (rank with both large-image sorts), mask vs copy bandwidth
#   cifar-real       benchmarks/cifar_gpu.py on the CIFAR-10 JPEG pack in .device-data/ (when carried)
#   run-e2e          `roarfast run` on the GPU, timed
#   retrain-cells    benchmarks/retrain_cells.py: one cell's GPU utilization, 1/2/4/8 cells at once
#   bench-throughput benchmarks/throughput.py --quick
#   estimate         benchmarks/throughput.py --estimate paper (GPU-measured rates)
#   airbench-reference  benchmarks/gpu_round.py --parts reference: airbench94's published script, 5 runs, same images
#   airbench-cifar   benchmarks/gpu_round.py --parts airbench: the airbench model on the CIFAR-10 pack, ReLU and GELU
#   airbench-gap     benchmarks/gpu_round.py --parts gap: airbench94's choices added one at a time, a profile
#   compiled-cells   benchmarks/gpu_round.py --parts in-a-row: 10 cells in a row, eager and compiled, each timed
#   grouped          benchmarks/gpu_round.py --parts grouped: K cells one at a time vs together, share of peak
#   paper            benchmarks/gpu_round.py --parts paper: `roarfast sweep --preset paper` (resumes across calls;
#                    its run directory is runs/gpu-round-paper), then the report; ROARFAST_GROUP_SIZE sets its
#                    --group-size, ROARFAST_SWEEP_ARGS adds flags (e.g. "--control-seeds 1")
# Issue 25's GPU round, without a build (the carried extension), in 10-minute calls:
#   ROARFAST_GPU_STAGES=airbench-reference,airbench-cifar,grouped bash scripts/gpu_check.sh      then, until it says finished,
#   ROARFAST_GPU_STAGES=paper ROARFAST_GROUP_SIZE=K bash scripts/gpu_check.sh
# (the stages' summary.md, to paste into benchmarks/RESULTS.md, comes back beside the archive as gpu-round.md).
# Every result is a file in RESULTS_DIR; summary.txt lists each stage's status and seconds. A stage
# that would overrun the budget (ROARFAST_GPU_BUDGET seconds, default 560) is cut by timeout and says so.
# Under the device tool ($OUT set) RESULTS_DIR is packed into $OUT/gpu-results.tar.gz at exit (only a
# few files come back from $OUT), with summary.txt beside it and the built extension.
# Carried wheels (captum) in .whl/ are installed to /tmp/site first when present.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
RESULTS=${1:-$PWD/gpu-results}
mkdir -p "$RESULTS"
RESULTS=$(cd "$RESULTS" && pwd)
BUDGET=${ROARFAST_GPU_BUDGET:-560}
STAGES=",${ROARFAST_GPU_STAGES:-build,cuda-tests,memcheck,racecheck,bench-ops,cifar-real,run-e2e,retrain-cells,bench-throughput,estimate,airbench-reference,airbench-cifar,airbench-gap,compiled-cells,grouped,paper},"
wanted() { [[ "$STAGES" == *",$1,"* ]]; }
export PYTHONUNBUFFERED=1
PY=${PYTHON:-python3}
SUMMARY=$RESULTS/summary.txt
: > "$SUMMARY"
pack_results() {  # the device tool brings back at most 8 files: one archive, the summary, the extension
  [ -n "${OUT:-}" ] || return 0
  tar -czf "$OUT/gpu-results.tar.gz" --exclude='*.npy' --exclude='*.safetensors' --exclude='*.jpg' --exclude='*.pt' \
    --exclude='*.so' -C "$(dirname "$RESULTS")" "$(basename "$RESULTS")"
  cp "$SUMMARY" "$OUT/summary.txt"
  cp "$RESULTS/gpu-round/summary.md" "$OUT/gpu-round.md" 2>/dev/null || true
  cp roarfast/_C*.so "$OUT/" 2>/dev/null || true
}
trap pack_results EXIT
if ls .whl/*.whl >/dev/null 2>&1; then
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}

# stage NAME CAP_SECONDS COMMAND...: runs COMMAND with its output in RESULTS/NAME.log, cut at
# min(CAP, what is left of the budget); records status and seconds in summary.txt.
stage() {
  local name=$1 cap=$2; shift 2
  wanted "$name" || return 0
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

if wanted build && command -v cuobjdump >/dev/null; then
  # -fmad=false stops nvcc contracting our a*b+c; the FFMA left come from IEEE division/sqrt and libm
  # expansions, which round correctly. ffma.txt names the kernels that hold them; the CPU == CUDA
  # bit-identity itself is what the cuda tests check.
  cuobjdump -sass roarfast/_C*.so | awk '/Function :/ {f=$3} /FFMA/ {c[f]++} END {for (k in c) print c[k], k}' \
    | sort -rn > "$RESULTS/ffma.txt"
  echo "FFMA in SASS, by kernel: $RESULTS/ffma.txt ($(awk '{s+=$1} END {print s+0}' "$RESULTS/ffma.txt") in all)" \
    | tee -a "$SUMMARY"
fi
stage cuda-tests 150 $PY -m pytest -q -rfE -m cuda -p no:cacheprovider --junitxml="$RESULTS/cuda-tests.xml" tests
# the sanitizers slow kernels ~50x: small inputs only, no opcheck sweeps, no sleeping streams
SMALL="not 224 and not large and not grid_stride and not uint16_boundary and not 65536"
SMALL="$SMALL and not batch_sizes and not opcheck and not stream"
if command -v compute-sanitizer >/dev/null; then
  stage memcheck 120 compute-sanitizer --tool memcheck --error-exitcode 3 --target-processes all \
    $PY -m pytest -q -rfE -m cuda -p no:cacheprovider -k "$SMALL" tests/test_ops_rank.py tests/test_ops_mask.py \
    tests/test_ops_noise.py tests/test_ops_ensemble.py tests/test_ops_reduce_channels.py tests/test_ops_devices.py \
    tests/test_ops_impute.py
  stage racecheck 60 compute-sanitizer --tool racecheck --racecheck-report all --error-exitcode 3 \
    --target-processes all $PY -m pytest -q -rfE -m cuda -p no:cacheprovider -k "block_sort_sizes and float32" \
    tests/test_ops_rank.py
else
  echo "memcheck, racecheck: SKIPPED (no compute-sanitizer on PATH)" | tee -a "$SUMMARY"
fi
stage bench-ops 75 $PY benchmarks/ops.py --device cuda --min-run-time 0.2 --rank-sort device,segmented \
  --json "$RESULTS/ops.json"
if [ -f .device-data/cifar10-jpeg.npz ]; then
  stage cifar-real 150 $PY benchmarks/cifar_gpu.py run --pack .device-data --out "$RESULTS/cifar" ${ROARFAST_CIFAR_ARGS:-}
elif wanted cifar-real; then
  echo "cifar-real: SKIPPED (no .device-data/cifar10-jpeg.npz: see benchmarks/cifar_gpu.py pack)" | tee -a "$SUMMARY"
fi
stage run-e2e 150 $PY -m roarfast.cli run --device cuda --run-dir "$RESULTS/run" --no-progress
stage retrain-cells 180 $PY benchmarks/retrain_cells.py --out "$RESULTS/cells"
stage bench-throughput 100 $PY benchmarks/throughput.py --device cuda --quick --json "$RESULTS/throughput.json"
stage estimate 90 $PY benchmarks/throughput.py --device cuda --estimate paper --json "$RESULTS/estimate.json"
if [ -f .device-data/cifar10-jpeg.npz ]; then
  ROUND=(benchmarks/gpu_round.py --pack .device-data --out "$RESULTS/gpu-round")
  # airbench94's published script beside roarfast's airbench on the same decoded images, 5 runs each (issue 41
  # item 1); the script travels as .device-data/airbench94.py (copied there before the call)
  stage airbench-reference 150 $PY "${ROUND[@]}" --parts reference --reference-runs 5
  stage airbench-cifar 150 $PY "${ROUND[@]}" --parts airbench --seeds 5
  # what closes the gap to airbench94, one of its choices at a time, and a profile of one training
  stage airbench-gap 240 $PY "${ROUND[@]}" --parts gap --seeds 5
  # what a compiled step costs to compile per process, and whether later cells recompile: before it is a default
  stage compiled-cells 240 $PY "${ROUND[@]}" --parts in-a-row --cells 10 --ways loop+reduce-overhead,loop+default
  stage grouped 330 $PY "${ROUND[@]}" --parts grouped
  left=$((BUDGET - SECONDS - 20))
  stage paper 560 $PY "${ROUND[@]}" --parts paper --seconds "$left" \
    ${ROARFAST_GROUP_SIZE:+--group-size "$ROARFAST_GROUP_SIZE"} --sweep-args="${ROARFAST_SWEEP_ARGS:-}"
elif wanted airbench-reference || wanted airbench-cifar || wanted airbench-gap || wanted compiled-cells || wanted grouped || wanted paper; then
  echo "airbench-cifar, grouped, paper: SKIPPED (no .device-data/cifar10-jpeg.npz: see benchmarks/cifar_gpu.py pack)" \
    | tee -a "$SUMMARY"
fi
echo "total ${SECONDS}s; results in $RESULTS" | tee -a "$SUMMARY"
